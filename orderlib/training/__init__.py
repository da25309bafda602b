"""Trainers, one per kind of model, over one shared epoch loop (`loop.fit`).

hypernymy (concept tables on WordNet: order, bilinear, box, cone, Poincaré), word2gauss (its own
compiled loop), entailment (SNLI/SICK sentence encoders), retrieval (caption-image), devise (the
DeViSE map), composition (Utama's recognisers), sherlock (structured facts)."""

from orderlib.training.loop import FitResult, ThresholdResult, TrainingDiverged, fit, seeded_rng

__all__ = ["FitResult", "ThresholdResult", "TrainingDiverged", "fit", "seeded_rng"]
