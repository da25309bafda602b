"""Table 1 of Vendrov et al. (WordNet hypernym prediction): presets and the multi-seed runner.

The paper's hyperparameters live in PRESETS["full"]; PRESETS["small"] is the minutes-on-CPU preset
that CI executes. The numbers quoted from the paper (PAPER_TABLE1), the rows beyond it (LATER) and
the tables of a run are in orderlib.experiments.oe_wordnet_tables.

A *setting* is a protocol on a split: "paper" (the authors' protocol on our seeded split),
"paper, authors' split" (the same protocol on the authors' own split, regenerated from their code),
"paper, Athiwaratkun & Wilson's split" (the same code on the WordNet 3.0 they read) and "clean"
(distinct pairs, verified negatives). Every learned row is trained once per seed
(initialisation and training negatives differ; the split does not), as independent jobs that can
run in parallel processes and resume from their checkpoints.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from orderlib.checkpoint import fingerprint, load_checkpoint
from orderlib.concepts import init_from_poincare
from orderlib.concepts.rows import ROW_SETTINGS, row_config, train_row
from orderlib.data.hypernymy import HypernymyData, authors_split, make_splits
from orderlib.data.wordnet import NounGraph, ensure_wordnet, load_noun_graph
from orderlib.eval.hypernymy import transitive_closure_accuracy
from orderlib.experiments.oe_wordnet_tables import LATER
from orderlib.params import boolean, device, matmul, one_of, subset_of, workers
from orderlib.paths import slug
from orderlib.training.workers import resolve_workers, run_in_workers

SETTINGS = {  # setting -> (protocol, split)
    "paper": ("paper", "ours"),
    "paper, authors' split": ("paper", "authors"),
    "paper, Athiwaratkun & Wilson's split": ("paper", "athiwaratkun"),
    "clean": ("clean", "ours"),
}
# Athiwaratkun & Wilson's split (density order embeddings' 92.3): Vendrov et al.'s createDatasets.lua,
# which their repository keeps, run on the WordNet their preprocessing read (NLTK's 3.0: 84,427 edges,
# 837,888 listed pairs, the counts their script's comments give)
ATHIWARATKUN_WORDNET = "3.0"
SPLITS = {
    "ours": ["ours"],
    "authors": ["authors"],
    "athiwaratkun": ["athiwaratkun"],
    "both": ["ours", "authors"],
    "all": ["ours", "authors", "athiwaratkun"],
}  # SPLIT -> splits


# Per-row settings: orderlib.concepts.rows.ROW_SETTINGS (the paper's where it gives them; ours are stated
# there and in the notebook).
_FULL_MODELS = ROW_SETTINGS
# Extra negative kinds per true pair for density order embeddings (concepts.NEGATIVE_KINDS;
# Athiwaratkun & Wilson's S2 = swap, S4 = sibling), chosen on dev: their WordNet command used the
# random corruption alone, their paper reports the kinds combined.
DOE_NEGATIVES = [(), ("swap",), ("swap", "sibling")]
DOE = "density order embeddings"


def dev_grid(name: str, method: str, points: list[dict], run: dict | None = None, stage: int = 1) -> dict:
    """One dev grid: `points` (overrides of the row's settings) tried at the first seed, the best on
    dev kept (ties: the point listed first). `run` overrides the schedule of the grid's runs where it
    differs from the final run's; stage 2 starts from what stage 1 chose for the same row."""
    return dict(name=name, method=method, points=points, run=run or {}, stage=stage)


def _full_grids() -> list[dict]:
    return [
        # the paper: margin "chosen by grid search" (7); short runs, as the paper's search was
        dev_grid(
            "word2gauss margin",
            "word2gauss",
            [{"margin": m} for m in (1.0, 3.0, 7.0)],
            dict(epochs=5, patience=5, train_fraction=1.0),
        ),
        dev_grid("bilinear lr", "order-embeddings (bilinear)", [{"lr": x} for x in (0.01, 0.003, 0.001, 0.0003)]),
        # their WordNet command's settings (lr 0.01, gamma 225 here, 20 epochs), then the final schedule
        dev_grid(f"{DOE} negatives", DOE, [{"negatives": k} for k in DOE_NEGATIVES], dict(epochs=20)),
        dev_grid(
            f"{DOE} lr x gamma",
            DOE,
            [{"lr": lr, "model_kwargs": {"gamma": g}} for lr in (0.01, 0.003, 0.001, 0.0005) for g in (225.0, 100.0)],
            stage=2,
        ),
    ]


def _small_grids() -> list[dict]:
    return [
        dev_grid(
            "word2gauss margin",
            "word2gauss",
            [{"margin": m} for m in (1.0, 7.0)],
            dict(epochs=1, patience=1, train_fraction=0.05),
        ),
        dev_grid("bilinear lr", "order-embeddings (bilinear)", [{"lr": x} for x in (0.01, 0.001)]),
        dev_grid(f"{DOE} negatives", DOE, [{"negatives": k} for k in DOE_NEGATIVES[:2]]),
        dev_grid(
            f"{DOE} lr x gamma", DOE, [{"lr": lr, "model_kwargs": {"gamma": 225.0}} for lr in (0.01, 0.003)], stage=2
        ),
    ]


CONES_INIT_SCALE = 0.7  # Ganea et al.'s code rescales the Poincaré embeddings it starts from
PRESETS = {
    "full": dict(
        wordnet="3.1",
        dim=50,
        batch=500,
        split_seed=0,
        seeds=[0, 1, 2],
        n_test=4000,
        n_dev=4000,
        train_fraction=1.0,
        models=_FULL_MODELS,
        methods=list(_FULL_MODELS),
        grids=_full_grids(),
    ),
    "small": dict(
        wordnet="3.1",
        dim=50,
        batch=500,
        split_seed=0,
        seeds=[0, 1],
        n_test=4000,
        n_dev=4000,
        train_fraction=0.05,
        models={k: {**v, "epochs": 1 if k in LATER else 2, "patience": 2} for k, v in _FULL_MODELS.items()},
        methods=list(_FULL_MODELS),
        grids=_small_grids(),
    ),
}

# Notebook parameters and their valid values (orderlib.params.validate).
PARAMETERS = {
    "PRESET": one_of(PRESETS),
    "MATMUL": matmul,
    "DEVICE": device,
    "PROTOCOLS": subset_of(["paper", "clean"]),
    "SPLIT": one_of(list(SPLITS)),
    "WORKERS": workers,
    "PROGRESS": boolean,
}


# WORKERS="auto" (training.workers.resolve_workers) runs at most this many processes: a table model's
# step is small, and every process holds each setting's data.
MAX_WORKERS = 8


def preferred_device() -> str:
    """Table 1's device for DEVICE="auto" (runs.resolve_device's `prefer`): the CPU wherever the compiled
    table-model step builds (concept_step.cpp, one process per core), else CUDA (the PyTorch step in one
    process). Table 1's models are lookup tables: a few small kernels per batch of 500 pairs on a GPU."""
    from orderlib.concepts import compiled

    if torch.cuda.is_available() and compiled.concept_step_kernel() is None:
        return "cuda"
    return "cpu"


def _grid_values(grid: dict) -> str:
    """The values a dev grid tries, per setting: "lr 0.01, 0.003 x gamma 225, 100"."""
    values: dict[str, list] = {}
    for p in grid["points"]:
        for k, v in {**{k: v for k, v in p.items() if k != "model_kwargs"}, **p.get("model_kwargs", {})}.items():
            shown = negatives_label(v) if k == "negatives" else f"{v:g}"
            if shown not in values.setdefault(k, []):
                values[k].append(shown)
    return " x ".join(f"{k} {', '.join(v)}" for k, v in values.items())


def models_table(cfg: dict) -> pd.DataFrame:
    """Each row's schedule under a preset, one line per row: epochs, patience, learning rate, margin,
    its other settings and the values its dev grids try (the chosen ones train every seed)."""
    rows = []
    for m in cfg["methods"]:
        o = cfg["models"][m]
        other = {k: v for k, v in o.items() if k not in ("epochs", "patience", "lr", "margin", "model_kwargs")}
        other.update(o.get("model_kwargs", {}))
        rows.append(
            dict(
                method=m,
                epochs=o["epochs"],
                patience=o["patience"],
                lr=f"{o['lr']:g}" if "lr" in o else "",
                margin=f"{o['margin']:g}" if "margin" in o else "",
                other=", ".join(f"{k} {' + '.join(v)}" if k == "negatives" else f"{k} {v:g}" for k, v in other.items()),
                dev_grid="; ".join(_grid_values(g) for g in cfg["grids"] if g["method"] == m),
            )
        )
    return pd.DataFrame(rows).set_index("method")


def settings(protocols: list[str], split: str = "all") -> list[str]:
    """Return the settings a notebook run covers: every (protocol, split) that exists, where split is
    a key of SPLITS: "ours", "authors" (the paper protocol on Vendrov et al.'s own split; clean has no
    authors' split), "athiwaratkun" (the paper protocol on Athiwaratkun & Wilson's), "both" (ours and
    authors) or "all"."""
    return [s for s, (p, sp) in SETTINGS.items() if p in protocols and sp in SPLITS[split]]


def setting_graph(graph: NounGraph, setting: str) -> NounGraph:
    """Return the WordNet graph a setting is drawn from: `graph` (the preset's), or for Athiwaratkun &
    Wilson's split the WordNet they read (ATHIWARATKUN_WORDNET), installed if missing."""
    if SETTINGS[setting][1] != "athiwaratkun" or graph.version == ATHIWARATKUN_WORDNET:
        return graph
    ensure_wordnet(ATHIWARATKUN_WORDNET)
    return load_noun_graph(ATHIWARATKUN_WORDNET)


def setting_data(graph: NounGraph, setting: str, cfg: dict) -> HypernymyData:
    """Build the train / dev / test data of one setting, from the WordNet it is drawn from
    (setting_graph of `graph`, the preset's WordNet or already the setting's own)."""
    protocol, split = SETTINGS[setting]
    if split in ("authors", "athiwaratkun"):  # the same createDatasets.lua, on their WordNet each
        return authors_split(setting_graph(graph, setting), cfg["n_test"], cfg["n_dev"])
    return make_splits(graph.parents, protocol, cfg["n_test"], cfg["n_dev"], cfg["split_seed"])


_DATA: dict[str, HypernymyData] = {}  # this process's data by setting (filled by run_table1 / workers)


def load_setting(preset: str, setting: str, workers="auto") -> tuple[dict, NounGraph, int]:
    """Install and load the WordNet `setting` is drawn from (setting_graph), put `setting`'s data
    where run_jobs' workers find it, and resolve `workers` ("auto" or a count, as a string from a
    command line too); for scripts that run jobs of one setting (benchmarks/)."""
    cfg = PRESETS[preset]
    ensure_wordnet(cfg["wordnet"])
    graph = setting_graph(load_noun_graph(cfg["wordnet"]), setting)
    _DATA.clear()
    _DATA[setting] = setting_data(graph, setting, cfg)
    return cfg, graph, resolve_workers(workers, "cpu", MAX_WORKERS)


def _install_data(data: dict[str, HypernymyData]) -> None:
    """A worker's setup (run_in_workers): the settings' data, sent once per process, not per job."""
    _DATA.update(data)


def model_config(name: str, cfg: dict, seed: int | None = None, **overrides):
    """Return the trainer config of one Table 1 row under a preset and seed (default: its first)."""
    seed = cfg["seeds"][0] if seed is None else seed
    shared = dict(dim=cfg["dim"], batch=cfg["batch"], train_fraction=cfg["train_fraction"])
    return row_config(name, seed, cfg["models"][name], **{**shared, **overrides})


def _summary(r, c) -> dict:
    """The numbers of one trained run that the tables and figures need (no weights)."""
    return {
        "test": r.test_accuracy,
        "dev": r.dev_accuracy,
        "seconds": r.seconds,
        "best_epoch": r.best_epoch,
        "epochs_run": len(r.history),
        "best_test_over_epochs": max(h["test_accuracy"] for h in r.history),
        "resumed": r.resumed,
        "history": r.history,
        "config": dict(c.__dict__),
    }


def run_job(job: dict) -> dict:
    """Run one job: ("train", setting, method, seed, overrides) or a grid point; return its summary.
    A job's "fused" (optional) picks the table models' training step (train_concept_model's `fused`).

    Module-level so that worker processes can run it on the data they were started with.
    """
    if job.get("threads"):
        torch.set_num_threads(job["threads"])  # this process is ours: one share of the cores
    cfg, setting = job["cfg"], job["setting"]
    data = _DATA[setting]
    c = model_config(job["method"], cfg, job["seed"], **job.get("overrides", {}))
    ckpt = Path(job["checkpoint"]) if job.get("checkpoint") else None
    init = None
    if job["method"] == "hyperbolic entailment cones":  # start from this seed's Poincaré embeddings
        pj = training_job(
            "train", setting, "Poincaré embeddings", job["seed"], cfg, job["device"], ckpt.parent if ckpt else None, 0.0
        )
        poincare = train_row(
            data,
            model_config("Poincaré embeddings", cfg, job["seed"]),
            job["device"],
            Path(pj["checkpoint"]) if pj["checkpoint"] else None,
            False,
        ).model
        init = init_from_poincare(poincare, CONES_INIT_SCALE)
    r = train_row(data, c, job["device"], ckpt, job.get("progress", False), init, job.get("fused"))
    state = load_checkpoint(ckpt) if ckpt else None  # which commit's code trained it (resumed runs too)
    return {
        **{k: job[k] for k in ("kind", "setting", "method", "seed")},
        "overrides": job.get("overrides", {}),
        "grid": job.get("grid"),
        "point": job.get("point"),
        **_summary(r, c),
        "trained_at": state.get("trained_at") if state else None,
    }


def run_jobs(jobs: list[dict], workers: int, progress: bool = True) -> list[dict]:
    """Run jobs in `workers` processes (in this process when 1), longest first; keep their order.
    Each worker gets this process's settings' data (_DATA) once, glibc's huge-page advice and
    cpu_count // workers threads."""
    threads = {"threads": max(1, (os.cpu_count() or 1) // workers)} if workers > 1 else {}
    named = {str(i): {"job": {**j, **threads}} for i, j in enumerate(jobs)}
    costs = {str(i): j.get("cost", 1.0) for i, j in enumerate(jobs)}
    setup = (_install_data, (dict(_DATA),))
    done = run_in_workers(
        run_job, named, workers, costs, progress, "Table 1 jobs", setup=setup, huge_pages=True, in_process=True
    )
    return list(done.values())


def training_job(kind, setting, method, seed, cfg, device, run_dir, cost, overrides=None) -> dict:
    """One training job. Its checkpoint is named by the run's config (ASCII, no spaces), so two
    jobs with the same config (a grid point and the final seed-0 run) share one training."""
    overrides = overrides or {}
    c = model_config(method, cfg, seed, **overrides)
    name = f"{slug(setting)}-{slug(method)}-s{seed}-{fingerprint(sorted(vars(c).items()))[:10]}.pt"
    return {
        "kind": kind,
        "setting": setting,
        "method": method,
        "seed": seed,
        "cfg": cfg,
        "device": str(device),
        "overrides": overrides,
        "cost": cost,
        "checkpoint": str(run_dir / name) if run_dir else None,
    }


def _cost(cfg: dict, method: str, overrides: dict | None = None) -> float:
    """Rough relative cost of one run (for scheduling the longest first)."""
    per_epoch = {
        "word2gauss": 0.4,
        "box embeddings": 4.0,
        "Gumbel box embeddings": 4.0,
        "density order embeddings": 3.0,
        "Poincaré embeddings": 3.0,
        "hyperbolic entailment cones": 3.0,
    }.get(method, 1.0)
    c = {"train_fraction": cfg["train_fraction"], **cfg["models"][method], **(overrides or {})}
    return c["epochs"] * per_epoch * c["train_fraction"] * (1 + len(c.get("negatives", ())))


def negatives_label(kinds: tuple[str, ...]) -> str:
    """Name a set of extra negative kinds as the grids show it ("random" is always drawn)."""
    return " + ".join(("random",) + tuple(kinds))


def point_label(point: dict):
    """Name a grid point as the grids show it: the value of a one-setting point ("random + swap" for
    negative kinds), else "lr 0.003, gamma 100"."""
    flat = {**{k: v for k, v in point.items() if k != "model_kwargs"}, **point.get("model_kwargs", {})}
    if len(flat) == 1:
        ((key, value),) = flat.items()
        return negatives_label(value) if key == "negatives" else value
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in flat.items())


def grid_jobs(
    cfg: dict, setting: str, device, run_dir: Path | None, stage: int = 1, chosen: dict | None = None
) -> list[dict]:
    """The jobs of one stage of the dev grids (`cfg["grids"]`) at the first seed; each point starts
    from what earlier stages chose for its row (`chosen`: method -> overrides). A point run on the
    final schedule is the final seed-0 run of its setting: one checkpoint, one training."""
    jobs = []
    for g in cfg["grids"]:
        if g["stage"] != stage or g["method"] not in cfg["methods"]:
            continue
        for p in g["points"]:
            o = {**(chosen or {}).get(g["method"], {}), **g["run"], **p}
            jobs.append(
                {
                    **training_job(
                        "grid",
                        setting,
                        g["method"],
                        cfg["seeds"][0],
                        cfg,
                        device,
                        run_dir,
                        _cost(cfg, g["method"], o),
                        o,
                    ),
                    "grid": g["name"],
                    "point": p,
                }
            )
    return jobs


def choose(grid: dict, results: list[dict]) -> tuple[dict, dict]:
    """Pick the point of `grid` with the best dev accuracy among `results` (one setting's grid runs;
    ties: the point listed first); return it and every point's dev accuracy by its label."""
    devs = [next(r["dev"] for r in results if r["grid"] == grid["name"] and r["point"] == p) for p in grid["points"]]
    best = max(range(len(devs)), key=lambda i: (devs[i], -i))
    return grid["points"][best], {point_label(p): d for p, d in zip(grid["points"], devs)}


@dataclass
class SettingRun:
    """One setting's part of a Table 1 run: its data, the closure baseline and every trained row."""

    name: str  # a key of SETTINGS, e.g. "paper, authors' split"
    wordnet: dict  # version, source and fingerprint of the WordNet it is drawn from
    closure: float  # the transitive closure baseline's test accuracy (%)
    facts: dict  # protocol_facts: the counts that change how the table reads, as the reports print them
    results: dict[str, list[dict]] = field(default_factory=dict)  # method -> run_job summaries, one per seed
    grids: dict[str, dict] = field(default_factory=dict)  # grid name -> point label -> dev accuracy
    chosen: dict[str, dict] = field(default_factory=dict)  # method -> the overrides its dev grids chose

    @property
    def protocol(self) -> str:
        return SETTINGS[self.name][0]

    @property
    def split(self) -> str:
        return SETTINGS[self.name][1]

    @property
    def test_positives_in_train(self) -> int:
        return self.facts["test positives also in train"]

    @property
    def true_test_negatives(self) -> int:
        return self.facts["test negatives that are true pairs"]

    @property
    def accuracy_ceiling(self) -> float:
        return self.facts["accuracy ceiling (%)"]

    def seed_runs(self, method: str) -> list[dict]:
        """The run_job summaries of `method`, in seed order."""
        return sorted(self.results[method], key=lambda r: r["seed"])

    def test_accuracies(self, method: str) -> list[float]:
        """Test accuracy (%) of `method`, one per seed in seed order."""
        return [r["test"] for r in self.seed_runs(method)]


@dataclass
class Table1Run:
    """What run_table1 returns: every setting's SettingRun by name, the wall time and the workers."""

    settings: dict[str, SettingRun]
    wall_time_s: float = 0.0
    workers: int = 1

    def setting(self, protocol: str, split: str) -> SettingRun | None:
        """The setting of `protocol` on `split` (SETTINGS' values), or None where this run has none."""
        return next((r for r in self.settings.values() if (r.protocol, r.split) == (protocol, split)), None)


def run_table1(
    graph: NounGraph,
    cfg: dict,
    settings_: list[str],
    device="cpu",
    run_dir: Path | None = None,
    workers: int = 1,
    progress: bool = True,
) -> Table1Run:
    """Run Table 1 under every setting: dev grids, then every learned row for every seed."""
    t0 = time.perf_counter()
    out: dict[str, SettingRun] = {}
    _DATA.clear()
    for s in settings_:  # the data, the closure baseline (no learning), the data facts and source
        g = setting_graph(graph, s)
        data = _DATA[s] = setting_data(g, s, cfg)
        wordnet = {"version": g.version, "source": g.source, "fingerprint": g.fingerprint}
        out[s] = SettingRun(s, wordnet, transitive_closure_accuracy(data), data.stats)
    chosen: dict[str, dict[str, dict]] = {s: {} for s in settings_}  # setting -> method -> overrides
    for stage in sorted({g["stage"] for g in cfg["grids"]}):
        jobs = [j for s in settings_ for j in grid_jobs(cfg, s, device, run_dir, stage, chosen[s])]
        results = run_jobs(jobs, workers, progress)
        for s in settings_:
            for g in [g for g in cfg["grids"] if g["stage"] == stage and g["method"] in cfg["methods"]]:
                point, out[s].grids[g["name"]] = choose(g, [r for r in results if r["setting"] == s])
                chosen[s][g["method"]] = {**chosen[s].get(g["method"], {}), **point}
    jobs = [
        training_job("train", s, m, seed, cfg, device, run_dir, _cost(cfg, m, chosen[s].get(m)), chosen[s].get(m))
        for s in settings_
        for m in cfg["methods"]
        for seed in cfg["seeds"]
    ]
    for r in run_jobs(jobs, workers, progress):
        out[r["setting"]].results.setdefault(r["method"], []).append(r)
    for s in settings_:
        out[s].chosen = chosen[s]
    return Table1Run(out, time.perf_counter() - t0, workers)
