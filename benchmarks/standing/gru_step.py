"""GRU training steps of Tables 2 and 3 (notebooks 03 and 02, full preset): what each change buys.

One training step (forward, loss, backward, per-tensor clipping, Adam) of the full-preset model on
real batches, for four ways of running its 1024-d GRU, alternating over ROUNDS rounds in one run so
a change in the machine's load hits all alike:
- PyTorch's packed nn.GRU (float32);
- the step-wise loop the encoder used before (one autograd graph per step, float32);
- orderlib's GRURecurrence (hand-written backward, W_hh gradient as one product; float32);
- the same with bf16 matrix products (orderlib.precision, "auto" where the CPU has bf16 units).
Table 3: SNLI training pairs (premise and hypothesis, order-embeddings model). Table 2: Fashion-MNIST
Scenes training captions with random image features of the frozen CNN's width (the image side is
one linear layer; the GRU dominates). Also the largest relative difference of the step's gradient
from the step-wise loop's. Writes reports/tables/bench_gru_step.*.

    .venv/bin/python benchmarks/standing/gru_step.py [--rounds 5] [--steps 6]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence

from orderlib import precision
from orderlib.data.fashion_mnist import ensure_fashion_mnist, load_fashion_mnist
from orderlib.data.scenes import Lexicon, caption_tokenize, make_scenes
from orderlib.data.wordnet import ensure_wordnet, open_wordnet
from orderlib.encoders import sentence
from orderlib.encoders.entailment import entailment_loss
from orderlib.encoders.sentence import Vocab
from orderlib.experiments import oe_retrieval, oe_snli
from orderlib.losses import in_batch_loss
from orderlib.reports import device_description, write_table
from orderlib.training.entailment import prepare, seeded_model
from orderlib.training.retrieval import build_model

GRU_RECURRENCE = sentence.gru_last_hidden


def packed_gru(gru, x, lengths):
    """PyTorch's own packed GRU."""
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    return gru(packed)[1][0]


def stepwise_loop(gru, x, lengths):
    """The encoder's CPU loop before GRURecurrence (commit 579f867): autograd records every step."""
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    sizes = packed.batch_sizes.tolist()
    gi = F.linear(packed.data, gru.weight_ih_l0, gru.bias_ih_l0).split(sizes)
    h = x.new_zeros(sizes[0], gru.hidden_size)
    for t, n in enumerate(sizes):
        hn = h[:n]
        i_r, i_z, i_n = gi[t].chunk(3, 1)
        h_r, h_z, h_n = F.linear(hn, gru.weight_hh_l0, gru.bias_hh_l0).chunk(3, 1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        new = torch.tanh(i_n + r * h_n)
        new = new + z * (hn - new)
        h = torch.cat([new, h[n:]]) if n < len(h) else new
    return h.index_select(0, packed.unsorted_indices.to(h.device))


VARIANTS = {  # name -> (GRU function, matmul mode)
    "packed nn.GRU, fp32": (packed_gru, "fp32"),
    "step-wise loop (before), fp32": (stepwise_loop, "fp32"),
    "GRURecurrence, fp32": (GRU_RECURRENCE, "fp32"),
    "GRURecurrence, bf16 products": (GRU_RECURRENCE, "bf16"),
}
BASELINE = "step-wise loop (before), fp32"


def table3_task(steps: int):
    """(model, step(batch index) -> loss, name) of Table 3's order-embeddings model on SNLI."""
    cfg_all = oe_snli.PRESETS["full"]
    train, dev, test, _ = oe_snli.splits("snli", cfg_all)
    data = prepare(train, dev, test)
    cfg = oe_snli.model_config("order-embeddings", cfg_all)
    model = seeded_model(cfg, len(data.vocab), torch.device("cpu"))
    order = np.random.default_rng(0).permutation(len(data.train))
    batches = [order[b * cfg.batch : (b + 1) * cfg.batch] for b in range(steps)]

    def loss(b):
        idx = batches[b]
        return entailment_loss(model, model(*data.train.batch(idx, "cpu")), data.train.positive[idx], cfg.margin)

    return model, loss, cfg, f"SNLI ({len(data.train)} training pairs, vocabulary {len(data.vocab)})"


def table2_task(steps: int):
    """(model, step(batch index) -> loss, name) of Table 2's order-embeddings model on Scenes captions."""
    cfg_all = oe_retrieval.PRESETS["full"]
    ensure_wordnet("3.0")
    ensure_fashion_mnist()
    lexicon = Lexicon.from_wordnet(open_wordnet("3.0"))
    scenes = make_scenes(load_fashion_mnist("train"), "train", cfg_all["n_train"], lexicon, cfg_all["seed"])
    caps = [caption_tokenize(c) for c in scenes.captions]
    vocab = Vocab.build(caps)
    tokens, lengths = vocab.encode(caps)
    cfg = oe_retrieval.row_config("order-embeddings", cfg_all)
    feature_dim = 4 * 64  # the frozen CNN's scene features: 2x2 cells of its 64 channels
    model = build_model(cfg, len(vocab), feature_dim, torch.device("cpu"))
    g = torch.Generator().manual_seed(0)
    feats = torch.randn(steps * cfg.batch, feature_dim, generator=g).abs()
    rows = np.random.default_rng(0).permutation(len(caps))[: steps * cfg.batch]

    def loss(b):
        r = torch.as_tensor(rows[b * cfg.batch : (b + 1) * cfg.batch])
        t = tokens[r, : int(lengths[r].max())]
        e = model(feats[b * cfg.batch : (b + 1) * cfg.batch], t, lengths[r])
        return in_batch_loss(e, cfg.loss, cfg.margin, cfg.temperature)

    return model, loss, cfg, f"Fashion-MNIST Scenes ({len(caps)} training captions, vocabulary {len(vocab)})"


def step_seconds(model, loss, cfg, steps: int, mode: str, per_tensor_clip: bool) -> float:
    """Seconds per training step over `steps` batches (a fresh Adam; the model's weights move)."""
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    with precision.matmul_precision(mode, "cpu"):
        t0 = time.perf_counter()
        for b in range(steps):
            opt.zero_grad()
            loss(b).backward()
            if per_tensor_clip:
                for p in model.parameters():
                    torch.nn.utils.clip_grad_norm_(p, cfg.clip)
            else:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            opt.step()
        return (time.perf_counter() - t0) / steps


def gradient_gap(model, loss) -> dict[str, float]:
    """Largest relative gradient difference (over parameter tensors) of each variant from the baseline, one batch."""

    def grads(fn, mode):
        sentence.gru_last_hidden = fn
        model.zero_grad()
        with precision.matmul_precision(mode, "cpu"):
            loss(0).backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    ref = grads(*VARIANTS[BASELINE])
    out = {}
    for name, (fn, mode) in VARIANTS.items():
        got = grads(fn, mode)
        out[name] = max(float((a - b).norm() / b.norm().clamp_min(1e-30)) for a, b in zip(got, ref))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of every variant")
    ap.add_argument("--steps", type=int, default=6, help="training steps per variant and round")
    a = ap.parse_args()
    if precision.resolve("auto", "cpu") != "bf16":
        VARIANTS.pop("GRURecurrence, bf16 products")  # no bf16 units on this CPU
    t_start = time.perf_counter()
    rows, seconds = [], {}
    try:
        for table, make, per_tensor in (("Table 3", table3_task, False), ("Table 2", table2_task, True)):
            model, loss, cfg, source = make(a.steps)
            state = {k: v.clone() for k, v in model.state_dict().items()}
            gaps = gradient_gap(model, loss)
            secs = {name: [] for name in VARIANTS}
            for _ in range(a.rounds):
                for name, (fn, mode) in VARIANTS.items():
                    model.load_state_dict(state)  # every variant starts from the same weights
                    sentence.gru_last_hidden = fn
                    secs[name].append(step_seconds(model, loss, cfg, a.steps, mode, per_tensor))
            seconds[table] = secs
            for name in VARIANTS:
                ratio = np.array(secs[BASELINE]) / np.array(secs[name])
                method = f"{table} ({source}): {name}"
                rows += [
                    dict(
                        method=method,
                        metric="seconds per training step (median of rounds)",
                        ours=round(float(np.median(secs[name])), 4),
                    ),
                    dict(
                        method=method,
                        metric="speed-up over the step-wise loop (median of rounds)",
                        ours=round(float(np.median(ratio)), 2),
                    ),
                    dict(
                        method=method,
                        metric="largest relative gradient difference from the step-wise loop",
                        ours=float(f"{gaps[name]:.2e}"),
                    ),
                ]
    finally:
        sentence.gru_last_hidden = GRU_RECURRENCE
    df = pd.DataFrame(rows).assign(paper=None)[["method", "metric", "paper", "ours"]]
    meta = {
        "preset": "full",
        "seed": 0,
        "device": device_description("cpu"),
        "threads": torch.get_num_threads(),
        "data_source": "SNLI 1.0 (oe_snli splits, full preset); Fashion-MNIST Scenes captions (train, full preset)",
        "data_fingerprint": None,
        "wall_time_s": time.perf_counter() - t_start,
        "rounds": a.rounds,
        "steps": a.steps,
        "seconds": seconds,
    }
    notes = (
        f"One training step (forward, loss, backward, gradient clipping as the trainer does, Adam) of the "
        f"full-preset order-embeddings model (1024-d GRU, 300-d words, batch 128), median over {a.rounds} "
        f"alternating rounds of {a.steps} steps each, {torch.get_num_threads()} threads. Table 2's image "
        f"features are random (the GRU dominates the step). 'bf16 products': float32 tensors whose matrix "
        f"products take bfloat16 inputs with float32 sums (orderlib.precision)."
    )
    write_table(
        "bench_gru_step",
        df,
        meta,
        title="GRU training steps of Tables 2 and 3: GRU implementation and matrix-product precision",
        notes=notes,
    )
    print(df.to_string(index=False))


if __name__ == "__main__":
    main()
