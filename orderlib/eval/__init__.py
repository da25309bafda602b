"""The four papers' evaluation protocols on arrays or tensors: plain inputs, a small result out,
no files, no printing (docs/your_data.md#in-python). Bad input raises orderlib.errors.InputError
(a ValueError naming the argument).

- retrieval (Table 2 of Vendrov et al., VSE++): `retrieval_metrics` on an (N, k N) matrix,
  `retrieval_metrics_of_embeddings` on embeddings with a penalty of orderlib.penalties.MATRIX_ENERGIES;
- hypernymy (Table 1 of Vendrov et al.): `hypernymy_metrics` (threshold on dev, accuracy, AP,
  ROC AUC, ROC points), `pair_energies`, `transitive_closure_accuracy`;
- compositional (Utama; Misra et al.; czsl): `closed_world_topk`, `generalised_sweep`, `sampled_sweep`;
- facts (Sherlock, Table 4): `fact_retrieval`, strict and implied, the scoring explicit;
- DeViSE's flat hit@k and hierarchical precision@k: `orderlib.eval.hierarchy`.
"""

from orderlib.errors import InputError
from orderlib.eval.compositional import (
    accuracy_at_bias,
    closed_world_chance,
    closed_world_topk,
    generalised_sweep,
    sampled_sweep,
    topk_accuracy,
)
from orderlib.eval.facts import ALL, FACT_PROTOCOLS, SAME_ORDER, SCORINGS, FactRetrievalResult, fact_retrieval
from orderlib.eval.hypernymy import (
    HypernymyResult,
    ap_auc,
    hypernymy_metrics,
    pair_energies,
    transitive_closure_accuracy,
)
from orderlib.eval.retrieval import (
    PRIMARY_TIES,
    RETRIEVAL_PROTOCOLS,
    TIES,
    RetrievalResult,
    rank_metrics,
    retrieval_metrics,
    retrieval_metrics_of_embeddings,
)
from orderlib.eval.threshold import best_threshold, roc_points, threshold_accuracy

__all__ = [
    "ALL",
    "FACT_PROTOCOLS",
    "PRIMARY_TIES",
    "RETRIEVAL_PROTOCOLS",
    "SAME_ORDER",
    "SCORINGS",
    "TIES",
    "FactRetrievalResult",
    "HypernymyResult",
    "InputError",
    "RetrievalResult",
    "accuracy_at_bias",
    "ap_auc",
    "best_threshold",
    "closed_world_chance",
    "closed_world_topk",
    "fact_retrieval",
    "generalised_sweep",
    "hypernymy_metrics",
    "pair_energies",
    "rank_metrics",
    "retrieval_metrics",
    "retrieval_metrics_of_embeddings",
    "roc_points",
    "sampled_sweep",
    "threshold_accuracy",
    "topk_accuracy",
    "transitive_closure_accuracy",
]
