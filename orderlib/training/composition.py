"""Attribute-object recognisers of Utama's Table 1 and their training (Section 3.1 of Utama).

Every model scores (image, pair) combinations, high = better (`scores(x, pairs) -> (N, P)`):
- "vse": VSE++ (Faghri et al.): cosine between W_f phi(i) and a composed phrase g(a, o) (Eq. 2),
  max of hinges (Eq. 3);
- "order" (beyond the paper): the phrase above its images in Vendrov et al.'s order, sum of hinges;
- "compcos" (beyond the paper): Mancini et al. (2021)'s closed-world CompCos;
- "le": Misra et al.'s label embedding, an MLP from [a; o] to a linear classifier of phi(i);
- "visual_product": log p(a|i) + log p(o|i);
- "crf": Utama's Eq. 7, log p(o|i) + log p(a|o, i).
The schedule is in docs/protocols.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from orderlib.checkpoint import code_version, fingerprint
from orderlib.encoders.cnn import ItemCNN, to_input
from orderlib.encoders.composition import build_composer
from orderlib.losses import contrastive
from orderlib.penalties import order_violation_matrix
from orderlib.training import FitResult, fit


@dataclass
class CompositionConfig:
    model: str = "vse"  # a key of MODELS
    composer: str = "lstm"  # a key of orderlib.encoders.composition.COMPOSERS (embedding models)
    dim: int = 256  # joint space
    hidden: int = 256  # classifier baselines' hidden layer
    tensor_dim: int = 32  # the tensor composer's h (Eq. 4)
    epochs: int = 20
    lr: float = 2e-4
    decay_every: int = 6  # lr / 10 every this many epochs
    clip: float = 2.0
    batch: int = 64
    margin: float = 0.2  # VSE++'s alpha; order-embeddings use 0.05
    temperature: float = 0.05
    finetune_epochs: int = 0  # > 0: then train the CNN too, from finetune_lr
    finetune_lr: float = 2e-5
    seed: int = 0


class Recogniser(nn.Module):
    """Base: inputs are frozen CNN features (N, F), or uint8 images once a CNN is attached."""

    distinct_pairs = False  # batches of distinct pairs (in-batch negatives) instead of random images

    def __init__(self):
        super().__init__()
        self.cnn: ItemCNN | None = None

    def features(self, x: torch.Tensor) -> torch.Tensor:
        if self.cnn is None:
            return x.to(self.device)
        return self.cnn.features(to_input(x, self.device))  # (B, F)

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device


class Embedding(Recogniser):
    distinct_pairs = True

    def __init__(self, feature_dim, composer, dim, penalty="cosine", loss="max", margin=0.2):
        super().__init__()
        self.W_f, self.composer = nn.Linear(feature_dim, dim), composer
        self.penalty, self.loss_kind, self.margin = penalty, loss, margin

    def _side(self, v: torch.Tensor) -> torch.Tensor:
        v = F.normalize(v, dim=-1)
        return v.abs() if self.penalty == "order" else v

    def embed_images(self, x):
        return self._side(self.W_f(self.features(x)))  # (N, D)

    def embed_pairs(self, pairs):
        return self._side(self.composer(pairs))  # (P, D)

    def energy(self, img: torch.Tensor, phr: torch.Tensor) -> torch.Tensor:
        """(N, P) penalty, low = good: 1 - cosine, or the order violation E(image, phrase)."""
        return order_violation_matrix(img, phr) if self.penalty == "order" else 1 - img @ phr.T

    def scores(self, x, pairs):
        return -self.energy(self.embed_images(x), self.embed_pairs(pairs))

    def loss(self, x, labels, seen):
        e = self.energy(self.embed_images(x), self.embed_pairs(labels))  # (B, B), diagonal = true pairs
        return contrastive(e, self.margin, max_violation=self.loss_kind == "max")


class CompCos(Recogniser):
    def __init__(self, feature_dim, composer, dim, temperature):
        super().__init__()
        self.W_f, self.composer, self.temperature = nn.Linear(feature_dim, dim), composer, temperature

    def scores(self, x, pairs):
        img = F.normalize(self.W_f(self.features(x)), dim=-1)
        return img @ F.normalize(self.composer(pairs), dim=-1).T  # (N, P) cosine

    def loss(self, x, labels, seen):
        return F.cross_entropy(self.scores(x, seen) / self.temperature, _pair_targets(labels, seen))


class LabelEmbed(Recogniser):
    def __init__(self, feature_dim, composer):
        super().__init__()
        self.composer = composer  # [a; o] -> a classifier in feature space

    def scores(self, x, pairs):
        return self.features(x) @ self.composer(pairs).T  # (N, P)

    def loss(self, x, labels, seen):
        return F.cross_entropy(self.scores(x, seen), _pair_targets(labels, seen))


def _mlp(i, h, o):
    return nn.Sequential(nn.Linear(i, h), nn.LeakyReLU(0.1), nn.Linear(h, o))


class VisualProduct(Recogniser):
    def __init__(self, feature_dim, n_attrs, n_objs, hidden):
        super().__init__()
        self.attr, self.obj = _mlp(feature_dim, hidden, n_attrs), _mlp(feature_dim, hidden, n_objs)

    def scores(self, x, pairs):
        f = self.features(x)
        pairs = pairs.to(f.device)
        return self.attr(f).log_softmax(1)[:, pairs[:, 0]] + self.obj(f).log_softmax(1)[:, pairs[:, 1]]

    def loss(self, x, labels, seen):
        f, labels = self.features(x), labels.to(self.device)
        return F.cross_entropy(self.attr(f), labels[:, 0]) + F.cross_entropy(self.obj(f), labels[:, 1])


class CRF(Recogniser):
    """P(att, obj | i) = P(obj | i) P(att | obj, i) (Eq. 7 of Utama): a shared hidden layer, one
    attribute classifier per object."""

    def __init__(self, feature_dim, n_attrs, n_objs, hidden):
        super().__init__()
        self.obj = _mlp(feature_dim, hidden, n_objs)
        self.hidden = nn.Sequential(nn.Linear(feature_dim, hidden), nn.LeakyReLU(0.1))
        self.att_w = nn.Parameter(torch.randn(n_objs, n_attrs, hidden) / hidden**0.5)  # (O, A, H)
        self.att_b = nn.Parameter(torch.zeros(n_objs, n_attrs))

    def _log_p(self, x):
        f = self.features(x)
        att = torch.einsum("nh,oah->noa", self.hidden(f), self.att_w) + self.att_b  # (N, O, A)
        return self.obj(f).log_softmax(1), att.log_softmax(2)

    def scores(self, x, pairs):
        lp_o, lp_a = self._log_p(x)
        pairs = pairs.to(lp_o.device)
        return lp_o[:, pairs[:, 1]] + lp_a[:, pairs[:, 1], pairs[:, 0]]

    def loss(self, x, labels, seen):
        lp_o, lp_a = self._log_p(x)
        labels, rows = labels.to(lp_o.device), torch.arange(len(labels), device=lp_o.device)
        return -(lp_o[rows, labels[:, 1]] + lp_a[rows, labels[:, 1], labels[:, 0]]).mean()

    @torch.no_grad()
    def max_marginal(self, x, pairs) -> torch.Tensor:
        """Utama's inference: the object of highest p(o|i) among the candidates' objects, then its
        best candidate attribute. Returns the predicted candidate index per image (N,)."""
        lp_o, lp_a = self._log_p(x)
        pairs = pairs.to(lp_o.device)
        obj_score = lp_o[:, pairs[:, 1]]  # (N, P): each candidate's object
        best_obj = pairs[obj_score.argmax(1), 1]  # (N,)
        s = torch.where(
            pairs[None, :, 1] == best_obj[:, None],
            lp_a[:, pairs[:, 1], pairs[:, 0]],
            torch.tensor(-float("inf"), device=lp_o.device),
        )
        return s.argmax(1)


def _pair_targets(labels: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    """Index of each (attr, obj) label row among the seen pairs (B,)."""
    match = (labels[:, None, :].to(seen.device) == seen[None]).all(-1)  # (B, P)
    if not match.any(1).all():
        raise ValueError("a training label is not among the training pairs")
    return match.float().argmax(1)


MODELS = ("vse", "order", "compcos", "le", "visual_product", "crf")


def build_model(cfg: CompositionConfig, feature_dim: int, word_vectors: np.ndarray, n_attrs: int) -> Recogniser:
    """The recogniser cfg.model over features of feature_dim; word vectors (A + O, d)."""
    n_objs = len(word_vectors) - n_attrs
    comp = lambda name, out: build_composer(name, word_vectors, n_attrs, out, tensor_dim=cfg.tensor_dim)
    if cfg.model == "vse":
        return Embedding(feature_dim, comp(cfg.composer, cfg.dim), cfg.dim, "cosine", "max", cfg.margin)
    if cfg.model == "order":
        return Embedding(feature_dim, comp(cfg.composer, cfg.dim), cfg.dim, "order", "sum", cfg.margin)
    if cfg.model == "compcos":
        return CompCos(feature_dim, comp(cfg.composer, cfg.dim), cfg.dim, cfg.temperature)
    if cfg.model == "le":
        return LabelEmbed(feature_dim, comp(cfg.composer, feature_dim))
    if cfg.model == "visual_product":
        return VisualProduct(feature_dim, n_attrs, n_objs, cfg.hidden)
    if cfg.model == "crf":
        return CRF(feature_dim, n_attrs, n_objs, cfg.hidden)
    raise ValueError(f"unknown model {cfg.model!r}; expected one of {MODELS}")


def epoch_batches(labels: np.ndarray, batch: int, distinct: bool, rng: np.random.Generator) -> list[np.ndarray]:
    """One epoch of index batches: random images, or (distinct) batches holding one random
    image of each of `batch` different pairs (VSE++'s rule for in-batch negatives)."""
    n = len(labels)
    if not distinct:
        order = rng.permutation(n)
        return [order[i : i + batch] for i in range(0, n, batch)]
    keys = labels[:, 0] * (labels[:, 1].max() + 1) + labels[:, 1]
    groups = [np.flatnonzero(keys == k) for k in np.unique(keys)]
    out = []
    for _ in range(int(np.ceil(n / batch))):
        picked = rng.permutation(len(groups))[:batch]
        out.append(np.array([groups[g][rng.integers(len(groups[g]))] for g in picked]))
    return out


def train_recogniser(
    cfg: CompositionConfig,
    word_vectors: np.ndarray,
    n_attrs: int,
    features: torch.Tensor,
    labels: np.ndarray,
    seen: np.ndarray,
    evaluate,
    score: str,
    checkpoint: Path | None = None,
    progress: bool = True,
    device="cpu",
    cnn: ItemCNN | None = None,
    images: np.ndarray | None = None,
    data_key: str = "",
) -> tuple[Recogniser, list[FitResult]]:
    """Train cfg.model on frozen `features` (N, F) with (attr, obj) `labels` (N, 2) of the training
    pairs `seen` (P, 2); pick the epoch of best `evaluate(model)[score]` (a held-out metric).
    With cfg.finetune_epochs, continue with `cnn` unfrozen on the uint8 `images` (the features'
    source). Returns the model (eval mode) and the FitResult of each phase."""
    device = torch.device(device)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = build_model(cfg, features.shape[1], word_vectors, n_attrs).to(device)
    seen_t = torch.as_tensor(seen, dtype=torch.long, device=device)
    labels_t = torch.as_tensor(labels, dtype=torch.long)
    key = {
        **asdict(cfg),
        "code": code_version(__name__),
        "data": data_key or fingerprint(features, labels, seen),
        "words": fingerprint(torch.as_tensor(word_vectors)),
    }

    def phase(inputs, params, lr, epochs, name):
        opt = torch.optim.Adam(params, lr=lr, fused=True)  # one kernel per step: the tensor composer's V is 11.5M

        def one_epoch(epoch: int) -> float:
            model.train()
            if model.cnn is not None:
                model.cnn.eval()  # batch-norm statistics stay those of pre-training
            for group in opt.param_groups:
                group["lr"] = lr * 0.1 ** (epoch // cfg.decay_every)
            rng = np.random.default_rng([cfg.seed, epoch, len(name)])
            total, steps = 0.0, epoch_batches(labels, cfg.batch, model.distinct_pairs, rng)
            for idx in steps:
                loss = model.loss(inputs[idx], labels_t[idx], seen_t)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
                opt.step()
                total += loss.item()
            return total / len(steps)

        ckpt = checkpoint and Path(f"{checkpoint}.{name}")
        return fit(
            model,
            opt,
            {**key, "phase": name},
            one_epoch,
            lambda: evaluate(model),
            score,
            epochs,
            epochs,
            ckpt,
            progress,
            f"{cfg.model}/{cfg.composer} {name}",
        )

    results = [phase(features, list(model.parameters()), cfg.lr, cfg.epochs, "frozen")]
    if cfg.finetune_epochs:
        if cnn is None or images is None:
            raise ValueError("finetuning needs the CNN and the training images")
        model.cnn = cnn.to(device).requires_grad_(True)
        results.append(phase(images, list(model.parameters()), cfg.finetune_lr, cfg.finetune_epochs, "finetune"))
    model.eval().requires_grad_(False)
    return model, results
