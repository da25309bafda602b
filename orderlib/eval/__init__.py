"""Evaluation: threshold accuracy, retrieval ranks, hit@k."""
