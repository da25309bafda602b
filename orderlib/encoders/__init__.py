"""Encoders: map concepts, sentences or images to embeddings."""
