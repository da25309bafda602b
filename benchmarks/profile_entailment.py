"""Profile Table 3's training (notebook 02, full preset): where an epoch's time goes.

Times the phases of `--batches` training batches of one model (batch assembly, forward, loss,
backward, gradient clipping, Adam step), the held-out pass `fit` runs after every epoch beside the
held-out + test pass it ran before test was scored only at the chosen epoch, and lists the operators with the most self CPU time (torch.profiler) over a
few batches; then compares, in alternating rounds on the same real batches, the encoder's CPU GRU
loop (orderlib.encoders.sentence.gru_last_hidden) with PyTorch's packed GRU, forward + backward.
Prints what it measured; nothing is written to reports/.

    .venv/bin/python benchmarks/profile_entailment.py [--dataset snli] [--model order-embeddings]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from orderlib.encoders import sentence
from orderlib.encoders.entailment import entailment_loss
from orderlib.experiments import oe_snli
from orderlib.training.entailment import _build, evaluate, held_out, prepare


def phase_times(model, opt, data, cfg, device, batches: int) -> dict[str, float]:
    """Seconds per phase summed over `batches` training batches in a seeded order."""
    order = np.random.default_rng(0).permutation(len(data.train))
    t = dict.fromkeys(["batch", "forward", "loss", "backward", "clip", "step"], 0.0)
    model.train()
    for b in range(batches):
        idx = order[b * cfg.batch : (b + 1) * cfg.batch]
        t0 = time.perf_counter()
        args = data.train.batch(idx, device)
        t1 = time.perf_counter()
        e = model(*args)  # (B,)
        t2 = time.perf_counter()
        loss = entailment_loss(model, e, data.train.positive[idx].to(device), cfg.margin)
        t3 = time.perf_counter()
        opt.zero_grad()
        loss.backward()
        t4 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        t5 = time.perf_counter()
        opt.step()
        t6 = time.perf_counter()
        for k, a, z in zip(t, (t0, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6)):
            t[k] += z - a
    return t


def _packed_gru(gru, x, lengths):
    packed = torch.nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    return gru(packed)[1][0]


def compare_gru(model, data, cfg, rounds: int, batches: int = 3) -> dict[str, list[float]]:
    """Seconds per batch (forward + backward) of the GRU loop and of PyTorch's packed GRU, the two
    alternating over `rounds` rounds of the same `batches` batches."""
    order = np.random.default_rng(1).permutation(len(data.train))
    loop, out = sentence.gru_last_hidden, {"gru loop": [], "packed nn.GRU": []}
    try:
        for _ in range(rounds):
            for name, f in [("packed nn.GRU", _packed_gru), ("gru loop", loop)]:
                sentence.gru_last_hidden = f  # what the encoder calls on CPU
                t0 = time.perf_counter()
                for b in range(batches):
                    idx = order[b * cfg.batch : (b + 1) * cfg.batch]
                    e = model(*data.train.batch(idx, "cpu"))
                    entailment_loss(model, e, data.train.positive[idx], cfg.margin).backward()
                out[name].append((time.perf_counter() - t0) / batches)
    finally:
        sentence.gru_last_hidden = loop
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="snli", choices=["snli", "sick"])
    ap.add_argument("--model", default="order-embeddings", choices=oe_snli.MODELS[:3])
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of the GRU comparison")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    cfg_all = oe_snli.PRESETS["full"]
    train, dev, test, _ = oe_snli.splits(a.dataset, cfg_all)
    data = prepare(train, dev, test)
    cfg = oe_snli.model_config(a.model, cfg_all)
    device = torch.device("cpu")
    model = _build(cfg, len(data.vocab), device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    n_batches = -(-len(data.train) // cfg.batch)
    print(
        f"{a.dataset} {a.model}: {len(data.train)} training pairs = {n_batches} batches of {cfg.batch}; "
        f"held-out {len(data.holdout)}, test {len(data.test)}; vocabulary {len(data.vocab)}; "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters; {a.threads} threads"
    )
    phase_times(model, opt, data, cfg, device, 1)  # warm-up
    t = phase_times(model, opt, data, cfg, device, a.batches)
    per_batch = sum(t.values()) / a.batches
    t0 = time.perf_counter()
    evaluate(model, data, device)
    ev_both = time.perf_counter() - t0
    t0 = time.perf_counter()
    held_out(model, data, device)
    ev = time.perf_counter() - t0
    epoch = per_batch * n_batches + ev
    print(
        f"\nper training batch {per_batch:.3f} s; one epoch ~ {per_batch * n_batches:.0f} s training "
        f"+ {ev:.0f} s evaluation = {epoch:.0f} s"
    )
    for k, v in t.items():
        print(f"  {k:9s} {v / a.batches:7.3f} s/batch  {100 * v / a.batches * n_batches / epoch:5.1f}% of an epoch")
    print(f"  {'held-out':9s} {ev:7.3f} s/epoch  {100 * ev / epoch:5.1f}% of an epoch")
    before = per_batch * n_batches + ev_both
    print(
        f"  (held-out + test, scored every epoch before: {ev_both:.3f} s/epoch, {100 * ev_both / before:.1f}% of "
        f"that epoch; an epoch is now {before / epoch:.2f}x faster)"
    )
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        phase_times(model, opt, data, cfg, device, 3)
    print("\nself CPU time over 3 batches, top operators:")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=40))
    c = compare_gru(model, data, cfg, a.rounds)
    ratio = np.array(c["packed nn.GRU"]) / np.array(c["gru loop"])
    print(
        f"forward + backward per batch, median of {a.rounds} alternating rounds: gru loop "
        f"{np.median(c['gru loop']):.3f} s, packed nn.GRU {np.median(c['packed nn.GRU']):.3f} s, "
        f"speed-up {np.median(ratio):.2f}x (range {ratio.min():.2f}-{ratio.max():.2f})"
    )


if __name__ == "__main__":
    main()
