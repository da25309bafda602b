"""Data-parallel training under torchrun (orderlib.distributed): two CPU processes on gloo
(tests/ddp_worker.py) compute one process's loss and gradients and train one process's models."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import ddp_worker as worker
import numpy as np
import pytest
import torch

from orderlib import distributed as ddp
from orderlib.checkpoint import load_checkpoint
from orderlib.training import fit
from orderlib.training.entailment import entailment_accuracy, train_entailment_model
from orderlib.training.retrieval import retrieval_metrics_of_model, train_retrieval_model

# Tolerances, two processes against one (float32 on CPU; they differ by float rounding only: the
# order of the sums over shards and ranks). Seen on this machine in parentheses.
GRADIENT = 1e-5  # one global batch: max |difference| / max |gradient| over all weights (<= 2e-7)
LOSS = 1e-5  # relative, per batch and per epoch (<= 6e-7)
WEIGHTS = 1e-5  # max |difference| over all weights after 3 epochs of Adam (~1e-7)
POINTS = 0.5  # dev and test recall sums and accuracies, in points (equal)
WRONG = 0.1  # how far (relative) a wrong sharding's gradient must be from one process's (>= 0.39)
REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """Run tests/ddp_worker.py under torchrun on 2 CPU processes; return (its folder, each rank's findings)."""
    out = tmp_path_factory.mktemp("ddp")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
        str(Path(worker.__file__)),
        str(out),
    ]
    done = subprocess.run(cmd, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-6000:]
    return out, [torch.load(out / f"rank{r}.pt", weights_only=True) for r in range(2)]


@pytest.fixture
def one_thread():
    """One torch thread, as each worker has (OMP_NUM_THREADS=1): the same kernels, no oversubscribed cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _weights_apart(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


def test_shards_cover_each_batch_once_in_order():
    for world in (1, 2, 3, 4, 8):
        for n in range(1, 20):
            shards = [ddp.shard(n, (r, world)) for r in range(world)]
            m = -(-n // world)
            assert all(len(rows) == m and 0 <= own <= m for rows, own in shards)
            assert sum(own for _, own in shards) == n
            assert np.concatenate([rows for rows, _ in shards])[:n].tolist() == list(range(n))  # gather_rows's order
            assert all(((0 <= rows) & (rows < n)).all() for rows, _ in shards)


def test_bad_shards_and_missing_torchrun_say_what_to_do(monkeypatch):
    with pytest.raises(ValueError, match="rank 2 of 2"):
        ddp.shard(4, (2, 2))
    with pytest.raises(ValueError, match="batch of 0 rows"):
        ddp.shard(0, (0, 2))
    for var in ddp.TORCHRUN_ENV:
        monkeypatch.delenv(var, raising=False)
    assert not ddp.launched() and not ddp.active() and ddp.rank() == 0 and ddp.world_size() == 1
    with pytest.raises(RuntimeError, match="torchrun"):
        with ddp.process_group(torch.device("cpu")):
            pass
    with pytest.raises(RuntimeError, match="torchrun"):
        fit(torch.nn.Linear(1, 1), None, {}, lambda e: 0.0, dict, "x", 1, 1, distributed=True)
    with pytest.raises(RuntimeError, match="torchrun"):
        train_retrieval_model(worker.retrieval_data(), worker.RETRIEVAL, progress=False, distributed=True)
    with pytest.raises(ValueError, match="device kind"):
        ddp.local_device("tpu")


def test_gather_rows_sends_every_ranks_gradient_back_to_the_rows_owner(two_processes):
    _, ranks = two_processes
    for found in ranks:
        assert sorted(found["gather_rows"]) == sorted(worker.BATCHES)
        for n, d in found["gather_rows"].items():
            assert d["forward"] and d["gradient"] == 0, (n, d)


def test_a_sharded_batch_has_one_process_loss_and_gradients(two_processes):
    _, ranks = two_processes
    for found in ranks:
        assert found["world_size"] == 2
        for case, d in found["gradients"].items():
            assert d["loss"] <= LOSS and d["gradient"] <= GRADIENT, (case, d)
            # the check can fail: negatives from this rank's shard only, or the other ranks' embeddings
            # gathered as constants (half the gradient: Adam would hide that, this check does not)
            for wrong in ("local negatives", "gathered without gradient"):
                if wrong in d:
                    assert d[wrong] >= WRONG, (case, wrong, d)


def test_two_processes_train_the_one_process_models(two_processes, one_thread):
    _, (first, second) = two_processes
    rdata, edata = worker.retrieval_data(), worker.entailment_data()
    one = {
        "retrieval": train_retrieval_model(rdata, worker.RETRIEVAL, progress=False),
        "entailment": train_entailment_model(edata, worker.ENTAILMENT, progress=False),
    }
    tests = {
        "retrieval": retrieval_metrics_of_model(one["retrieval"].model, rdata.test),
        "entailment": entailment_accuracy(one["entailment"].model, edata, "cpu"),
    }
    for name, r in one.items():
        two = first[name]
        assert _weights_apart(two["state"], second[name]["state"]) == 0  # the ranks hold one model
        assert _weights_apart(two["state"], r.model.state_dict()) <= WEIGHTS, name
        assert two["best_epoch"] == r.best_epoch and len(two["history"]) == len(r.history)
        for h2, h1 in zip(two["history"], r.history):
            assert abs(h2["loss"] - h1["loss"]) <= LOSS * abs(h1["loss"]), (name, h2, h1)
            for k in ("dev_score", "dev_rsum", "dev_accuracy", "test_accuracy"):
                if k in h1:
                    assert abs(h2[k] - h1[k]) <= POINTS, (name, k, h2, h1)
        flat2, flat1 = _flat(two["test"]), _flat(tests[name])
        scores = [k for k in flat1 if "R@" in k or "rsum" in k or "accuracy" in k]
        assert scores and all(abs(flat2[k] - flat1[k]) <= POINTS for k in scores), (name, flat2, flat1)


def _flat(metrics: dict, prefix: str = "") -> dict:
    """{"image retrieval": {"R@1": x}} -> {"image retrieval R@1": x}."""
    out = {}
    for k, v in metrics.items():
        out.update(_flat(v, f"{prefix}{k} ") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def test_the_checkpoint_serves_a_single_process_run(two_processes):
    """Rank 0 wrote the checkpoint under the key of a single-process run: a notebook loads it at once."""
    out, (first, _) = two_processes
    r = train_retrieval_model(
        worker.retrieval_data(), worker.RETRIEVAL, checkpoint=out / "retrieval.pt", progress=False
    )
    e = train_entailment_model(
        worker.entailment_data(), worker.ENTAILMENT, checkpoint=out / "entailment.pt", progress=False
    )
    for name, res in (("retrieval", r), ("entailment", e)):
        assert res.resumed and _weights_apart(res.model.state_dict(), first[name]["state"]) == 0
        assert load_checkpoint(out / f"{name}.pt")["processes"] == 2


def test_the_launcher_builds_what_the_notebooks_build():
    """workflow/scripts/train_parallel.py copies the notebooks' config and checkpoint lines: keep them in step."""
    launcher = (REPO / "workflow/scripts/train_parallel.py").read_text()
    for notebook, lines in {
        "03_oe_table2_retrieval": [
            'cfg = {**exp.PRESETS[PRESET], "data": DATA, **({"rows": rows} if rows else {})}',
            'paths = run_paths(f"oe_retrieval_{DATA}", PRESET)',
        ],
        "02_oe_table3_snli": [
            'cfg = {**exp.PRESETS[PRESET], "data": DATA}',
            'cfg["datasets"] = ["snli"]',
            'paths = run_paths("oe_table3_snli", PRESET)',
        ],
    }.items():
        cells = json.loads((REPO / f"notebooks/{notebook}.ipynb").read_text())["cells"]
        source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        for line in lines:
            assert line in source, (notebook, line)
            ours = line.replace("PRESET]", "args.preset]").replace(", PRESET)", ", args.preset)")
            ours = (
                ours.replace('"data": DATA', '"data": args.data')
                .replace('"matmul": MATMUL', '"matmul": args.matmul')
                .replace("{DATA}", "{args.data}")
            )
            assert ours in launcher, (notebook, ours)
        assert "matmul = precision.use(MATMUL, device)" in source and 'cfg["matmul"] = matmul' in source
    assert launcher.count('cfg["matmul"] = precision.use(args.matmul, device)') == 2


def test_the_launcher_without_torchrun_trains_into_the_notebooks_checkpoints(tmp_path, monkeypatch, capsys, one_thread):
    """One process, toy data in place of the notebooks': the models land where the notebooks look
    (run_paths of their names) and a second run loads them."""
    from types import SimpleNamespace

    import train_parallel

    from orderlib.experiments import oe_retrieval, oe_snli
    from orderlib.runs import run_paths

    for var in ddp.TORCHRUN_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(train_parallel, "run_paths", lambda name, preset: run_paths(name, preset, tmp_path))
    toy = worker.retrieval_data()
    monkeypatch.setattr(oe_retrieval, "run", lambda cfg, *a, **k: SimpleNamespace(data={"10crop": toy}))
    pairs = worker.toy_pairs(24, 0), worker.toy_pairs(20, 1), worker.toy_pairs(20, 2)
    monkeypatch.setattr(oe_snli, "splits", lambda dataset, cfg, directory=None: (*pairs, "toy"))
    args = {"retrieval": ["--rows", "order-embeddings,InfoNCE (cosine)"], "snli": []}
    for notebook, folder, n in (("retrieval", "oe_retrieval_scenes", 2), ("snli", "oe_table3_snli", 8)):
        for how in ("trained on 1 process(es)", "loaded, already trained"):
            assert train_parallel.main([notebook, "--device", "cpu", *args[notebook]]) == 0
            lines = capsys.readouterr().out.splitlines()
            assert len(lines) == n and all(how in line for line in lines), lines
        checkpoints = sorted((tmp_path / "runs/small/checkpoints" / folder).glob("*.pt"))
        assert len(checkpoints) == n
        assert all(load_checkpoint(c)["processes"] == 1 for c in checkpoints)
