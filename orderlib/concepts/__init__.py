"""Table 1 of Vendrov et al.: concept models of WordNet hypernymy and their trainers, in one package.

- `spec`: a table's constraint (`TableSpec`), written once;
- `base`, `euclidean`, `boxes`, `hyperbolic`: the models, each an energy, a loss and its table specs;
- `models`: the registry `CONCEPT_MODELS` and `build_concept_model`;
- `row_adam`: lazy (row-wise) Adam, Riemannian on the ball;
- `step`: one training step, chosen once (`build_step`): compiled, row-wise or dense;
- `compiled`: the C++ step and word2gauss's loop, built on first use;
- `negatives`, `train`: the epoch loop, early stopping and the dev threshold;
- `word2gauss`: word2gauss's own trainer.
"""

from orderlib.concepts.base import ConceptModel
from orderlib.concepts.compiled import concept_step_status, word2gauss_status
from orderlib.concepts.hyperbolic import init_from_poincare
from orderlib.concepts.models import CONCEPT_MODELS, build_concept_model
from orderlib.concepts.negatives import NEGATIVE_KINDS
from orderlib.concepts.spec import TableSpec
from orderlib.concepts.step import OPTIMIZERS, build_step
from orderlib.concepts.train import (
    HypernymyConfig,
    evaluation_trace,
    hypernymy_accuracy,
    train_concept_model,
)
from orderlib.concepts.word2gauss import Word2GaussConfig, train_word2gauss

__all__ = [
    "CONCEPT_MODELS",
    "NEGATIVE_KINDS",
    "OPTIMIZERS",
    "ConceptModel",
    "HypernymyConfig",
    "TableSpec",
    "Word2GaussConfig",
    "build_concept_model",
    "build_step",
    "concept_step_status",
    "evaluation_trace",
    "hypernymy_accuracy",
    "init_from_poincare",
    "train_concept_model",
    "train_word2gauss",
    "word2gauss_status",
]
