"""Train joint image-caption embeddings (Section 4.4 of Vendrov et al.): batches of distinct
images with one random caption each, all in-batch contrastive terms, Adam, per-tensor gradient
clipping, early stopping on dev image-retrieval recall (R@1 + R@5 + R@10, as the authors' code)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from orderlib import distributed as ddp
from orderlib import precision
from orderlib.checkpoint import code_version, fingerprint
from orderlib.encoders.joint import JointEmbedding
from orderlib.encoders.sentence import Vocab
from orderlib.eval.retrieval import evaluate_retrieval
from orderlib.losses import in_batch_loss
from orderlib.training import fit

CAPTIONS_PER_IMAGE = 5
# The code that determines a trained model: its checkpoints are keyed by this code's version.


@dataclass
class RetrievalConfig:
    penalty: str = "order"  # "order", "cosine" (symm.), "order-reversed"
    loss: str = "sum"  # "sum" (Eq. 5), "max" (VSE++), "infonce"
    margin: float = 0.05  # alpha of Eq. (5): 0.05 for order, 0.2 for cosine (Section 4.5)
    temperature: float = 0.05  # InfoNCE only
    word_dim: int = 300
    dim: int = 1024
    batch: int = 128
    lr: float = 1e-3
    clip: float = 2.0  # per-tensor gradient-norm clip, as the authors' code
    epochs: int = 15
    patience: int = 5
    seed: int = 0
    matmul: str = "fp32"  # precision of training's matrix products (orderlib.precision): "fp32", "bf16", "auto"


@dataclass
class CaptionedImages:
    """One split: image k's captions are rows 5k..5k+4 of tokens."""

    features: torch.Tensor  # (N, F) float32
    tokens: torch.Tensor  # (5N, T) long
    lengths: torch.Tensor  # (5N,) long

    def __len__(self) -> int:
        return self.features.shape[0]

    def captions(self, idx, device) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens trimmed to the longest of idx, lengths) of caption rows idx."""
        idx = torch.as_tensor(idx)
        lengths = self.lengths[idx]
        return self.tokens[idx, : int(lengths.max())].to(device), lengths


@dataclass
class RetrievalData:
    train: CaptionedImages
    dev: CaptionedImages
    test: CaptionedImages
    vocab: Vocab
    feature_dim: int = field(init=False)

    def __post_init__(self):
        self.feature_dim = self.train.features.shape[1]


def encode_split(features: torch.Tensor, captions: list[list[str]], vocab: Vocab) -> CaptionedImages:
    """Tokenised captions (5 per image, in image order) + features -> CaptionedImages."""
    if len(captions) != CAPTIONS_PER_IMAGE * features.shape[0]:
        raise ValueError(
            f"{len(captions)} captions for {features.shape[0]} images; expected {CAPTIONS_PER_IMAGE} per image"
        )
    tokens, lengths = vocab.encode(captions)
    return CaptionedImages(torch.as_tensor(features, dtype=torch.float32), tokens, lengths)


def prepare(splits: dict[str, tuple[torch.Tensor, list[list[str]]]], min_count: int = 1) -> RetrievalData:
    """{"train"|"dev"|"test": (features, tokenised captions)} -> RetrievalData, with a vocabulary
    of the training captions' words seen at least `min_count` times."""
    vocab = Vocab.build(splits["train"][1], min_count)
    return RetrievalData(*(encode_split(*splits[s], vocab) for s in ("train", "dev", "test")), vocab)


@torch.no_grad()
def embed(model: JointEmbedding, split: CaptionedImages, batch: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (images (N, D), captions (5N, D)) embedded by `model`, on the model's device."""
    model.eval()
    device = next(model.parameters()).device
    ims = torch.cat([model.images(split.features[i : i + batch].to(device)) for i in range(0, len(split), batch)])
    n = split.tokens.shape[0]
    caps = torch.cat(
        [model.captions(*split.captions(torch.arange(i, min(i + batch, n)), device)) for i in range(0, n, batch)]
    )
    return ims, caps


def retrieval_metrics_of_model(model: JointEmbedding, split: CaptionedImages, folds: int = 1, name: str = "") -> dict:
    """Retrieval metrics (see orderlib.eval.retrieval.evaluate_retrieval) of `model` on `split`;
    `name` (model and split) is what an error about NaN embeddings names."""
    ims, caps = embed(model, split)
    return evaluate_retrieval(ims, caps, model.penalty_matrix, CAPTIONS_PER_IMAGE, folds, name=name)


def dev_score(metrics: dict) -> float:
    """Image-retrieval R@1 + R@5 + R@10: the authors' model-selection criterion."""
    return sum(v for k, v in metrics["image retrieval"].items() if k.startswith("R@"))


def build_model(cfg: RetrievalConfig, vocab_size: int, feature_dim: int, device) -> JointEmbedding:
    with torch.random.fork_rng(devices=[]):  # seeded init without touching the global RNG
        torch.manual_seed(cfg.seed)
        model = JointEmbedding(cfg.penalty, vocab_size, feature_dim, cfg.word_dim, cfg.dim)
    return model.to(device)


class Encoders(torch.nn.Module):
    """The two encoders of a JointEmbedding as one module, the part DistributedDataParallel wraps."""

    def __init__(self, model: JointEmbedding):
        super().__init__()
        self.model = model

    def forward(self, features: torch.Tensor, tokens: torch.Tensor, lengths: torch.Tensor):
        """Return (images (B, D), captions (B, D)) embedded."""
        return self.model.images(features), self.model.captions(tokens, lengths)


def sharded_penalties(
    model: JointEmbedding, encoders: torch.nn.Module, split: CaptionedImages, idx: np.ndarray, caps: np.ndarray
) -> torch.Tensor:
    """Return the (B, B) penalty matrix of a global batch (images idx, captions caps) of which this
    rank encodes only its shard (orderlib.distributed.shard) through `encoders` (Encoders(model)
    under orderlib.distributed.wrap): the embeddings are gathered from every rank with gradient, so
    each caption's negatives are the whole batch, as in one process."""
    device = next(model.parameters()).device
    rows, _ = ddp.shard(len(idx))  # (m,) positions in the batch
    images, captions = encoders(split.features[idx[rows]].to(device), *split.captions(caps[rows], device))  # (m, D)
    return model.penalty_matrix(ddp.gather_rows(images, len(idx)), ddp.gather_rows(captions, len(idx)))  # (B, B)


def train_epoch(
    model: JointEmbedding,
    opt,
    data: RetrievalData,
    cfg: RetrievalConfig,
    epoch: int,
    progress: bool = False,
    encoders: torch.nn.Module | None = None,
) -> float:
    """One pass over the training images in batches of `cfg.batch` distinct images, each with one
    of its captions drawn at random; returns the mean batch loss. With `encoders` (see
    `sharded_penalties`), this rank encodes its shard of each batch and DistributedDataParallel
    averages the gradients: every rank then takes the step one process would take."""
    model.train()
    device = next(model.parameters()).device
    rng = np.random.default_rng([cfg.seed, epoch])
    order = rng.permutation(len(data.train))
    pick = rng.integers(CAPTIONS_PER_IMAGE, size=len(order))
    total, steps = 0.0, range(0, len(order), cfg.batch)
    for i in tqdm(steps, desc=f"epoch {epoch}", leave=False, disable=not progress):
        idx = order[i : i + cfg.batch]
        caps = idx * CAPTIONS_PER_IMAGE + pick[i : i + cfg.batch]
        if encoders is None:
            e = model(data.train.features[idx].to(device), *data.train.captions(caps, device))  # (B, B)
        else:
            e = sharded_penalties(model, encoders, data.train, idx, caps)  # (B, B)
        loss = in_batch_loss(e, cfg.loss, cfg.margin, cfg.temperature)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            if p.grad is not None:
                torch.nn.utils.clip_grad_norm_(p, cfg.clip)
        opt.step()
        total += loss.item()
    return total / max(1, len(steps))


@dataclass
class RetrievalResult:
    model: JointEmbedding
    history: list[dict]
    best_epoch: int
    dev_score: float
    seconds: float
    resumed: bool
    trained_at: str | None = None  # git commit that trained it (None: a checkpoint from before this was recorded)


def train_retrieval_model(
    data: RetrievalData,
    cfg: RetrievalConfig,
    device="cpu",
    checkpoint: Path | None = None,
    progress: bool = True,
    desc: str = "",
    distributed: bool = False,
) -> RetrievalResult:
    """Train with early stopping on the dev score; resume from `checkpoint`; return the best model.
    With `distributed`, every rank of a torchrun process group calls this alike (its own `device`)
    and trains its shard of each global batch of `cfg.batch` (orderlib.distributed); the checkpoint
    has the key a single-process run of `cfg` has, so either run resumes or loads the other's."""
    model = build_model(cfg, len(data.vocab), data.feature_dim, torch.device(device))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    encoders = ddp.wrap(Encoders(model)) if distributed else None

    label = desc or f"{cfg.penalty}/{cfg.loss}"

    def held_out() -> dict:
        m = retrieval_metrics_of_model(model, data.dev, name=f"{label}, dev split")
        return {"dev_score": dev_score(m), "dev_rsum": m["rsum"]}

    matmul = precision.resolve(cfg.matmul, device)
    key = {
        **asdict(cfg),
        "matmul": matmul,
        "vocab": len(data.vocab),
        "feature_dim": data.feature_dim,
        "code": code_version(__name__),
        "data": fingerprint(
            data.vocab.words,
            *(getattr(s, f) for s in (data.train, data.dev, data.test) for f in ("features", "tokens", "lengths")),
        ),
    }
    with precision.matmul_precision(matmul, device):  # training and its dev checks; test is scored in fp32
        fitted = fit(
            model,
            opt,
            key,
            lambda epoch: train_epoch(model, opt, data, cfg, epoch, progress and ddp.is_main(), encoders),
            held_out,
            "dev_score",
            cfg.epochs,
            cfg.patience,
            checkpoint,
            progress,
            label,
            distributed,
        )
    model.eval()
    return RetrievalResult(
        model, fitted.history, fitted.best_epoch, fitted.best_score, fitted.seconds, fitted.resumed, fitted.trained_at
    )
