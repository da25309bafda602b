"""Report tables: long-format CSV + Markdown + provenance JSON, written atomically.

Every table is `reports/tables/<id>.csv` with at least `method, metric, paper, ours`
(`paper` empty where the paper has no number), `<id>.md` and `<id>.meta.json`.
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from orderlib import freshness
from orderlib.atomic import atomic_write_files
from orderlib.paths import repo_root

REQUIRED_COLUMNS = ("method", "metric", "paper", "ours")


def git_commit(root: Path | None = None) -> str:
    """Return the current commit (with '-dirty' if tracked files other than the generated
    reports/ differ from it: a run of several notebooks rewrites reports/ as it goes), or 'unknown'.
    ORDERLIB_GIT_COMMIT, where set, names it instead: a copy of the tree without .git (e.g. sent
    to a GPU machine) says which commit it is."""
    if os.environ.get("ORDERLIB_GIT_COMMIT"):
        return os.environ["ORDERLIB_GIT_COMMIT"]
    root = root or repo_root()
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!reports"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def model_record(seconds: float | None, trained_at: str | None, loaded: bool, **extra) -> dict:
    """One trained model's provenance: its training time (s to the millisecond, summed over resumes; None: not
    recorded), the commit whose code trained it (None: a checkpoint from before this was recorded)
    and whether this run loaded it, in whole or in part, from a checkpoint."""
    return {
        "train_seconds": None if seconds is None else round(float(seconds), 3),
        "trained_at": trained_at,
        "loaded_from_checkpoint": bool(loaded),
        **extra,
    }


def training_provenance(models: dict[str, dict], commit: str) -> dict:
    """Return the `training` block of a report's .meta.json: `models` (name -> model_record), the
    summed training time, the commits that trained them, and the models trained at a commit other
    than `commit` (the report's), with a one-line note a reader can quote."""
    others = sorted(name for name, m in models.items() if m["trained_at"] != commit)
    if not models:
        note = "no trained models"
    elif not others:
        note = f"all {len(models)} models trained at this report's commit, in this run or resumed from it"
    else:
        note = (
            f"{len(others)} of {len(models)} models were trained at another commit than this report's "
            f"and loaded from checkpoints: {', '.join(others)}"
        )
    return {
        "train_seconds_total": round(sum(m["train_seconds"] or 0.0 for m in models.values()), 3),
        "trained_at": sorted({str(m["trained_at"]) for m in models.values()}),
        "trained_at_other_commit": others,
        "note": note,
        "models": models,
    }


def device_description(device, workers: int = 1) -> str:
    """Describe the device a run used: CPU model, its kind (cpu_kind) and threads (or `workers`
    one-thread processes, training.workers), or the CUDA device name."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpu = f"{cpu}, {cpu_kind()}"
    if workers > 1:
        return f"cpu:{cpu} ({workers} processes x 1 thread)"
    return f"cpu:{cpu} ({torch.get_num_threads()} threads)"


def cpu_kind() -> str:
    """What sets this CPU's rounding, as probed: the vector kernels ATen dispatches to (AVX512, AVX2,
    DEFAULT: torch's own CPU probe, capped by ATEN_CPU_CAPABILITY) and whether float32 products run
    in bf16 under MATMUL bf16 (orderlib.precision's probe). One model name spans several kinds."""
    import torch

    from orderlib import precision

    kind = f"{torch.backends.cpu.get_cpu_capability()} kernels"
    return f"{kind}, bf16 products" if precision.bf16_products() else kind


def report_meta(
    *,
    preset: str,
    seed,
    device,
    commit: str,
    data_source: str,
    data_fingerprint: str,
    wall_time_s: float,
    trained: dict[str, dict],
    processes: int = 1,
    **extra,
) -> dict:
    """Return the provenance every notebook writes beside its tables (write_table's `meta`): preset,
    seed, device (device_description, with `processes`), the commit the run started from, the data's
    source and fingerprint, wall time, the notebook's own fields (`extra`), the `training` block of
    `trained` (name -> model_record) and `matmul`, the matrix-product precision in effect on the device."""
    from orderlib import precision

    return {
        "preset": preset,
        "seed": seed,
        "device": device_description(device, processes),
        "git_commit": commit,
        "data_source": data_source,
        "data_fingerprint": data_fingerprint,
        "wall_time_s": wall_time_s,
        **extra,
        "training": training_provenance(trained, commit),
        "matmul": precision.in_effect(device),
    }


def cite_round(x):
    """Round a number as a reader would cite it: whole floats as ints, |x| >= 1 to 2 decimals,
    smaller ones to 3 significant digits (0.8534 -> 0.853); anything else unchanged."""
    if isinstance(x, bool) or not isinstance(x, float) or not math.isfinite(x):
        return x
    if x.is_integer():
        return int(x)
    if abs(x) >= 1:
        return round(x, 2)
    return float(f"{x:.3g}")


def rounded(df: pd.DataFrame) -> pd.DataFrame:
    """Return `df` with every float cell rounded by `cite_round` (object columns, so ints stay ints)."""
    out = df.copy()
    for col in out.columns:
        if out[col].map(lambda v: isinstance(v, float)).any():
            out[col] = pd.Series([cite_round(v) for v in out[col]], index=out.index, dtype=object)
    return out


def to_markdown(df: pd.DataFrame, title: str = "", notes: str = "") -> str:
    """Render a long table as Markdown: method x metric, with paper and ours side by side."""
    show = df.copy()
    show["paper"] = show["paper"].map(lambda x: "" if pd.isna(x) or x == "" else f"{float(x):g}")
    for col in show.columns:  # `ours` and other float columns (tie-rule bounds): 2 decimals; counts as ints
        if col == "paper" or not show[col].map(lambda x: isinstance(x, float)).any():
            continue
        counts = (
            col != "ours"
            and show[col].dropna().map(lambda x: isinstance(x, (int, float)) and float(x).is_integer()).all()
        )
        fmt = (lambda x: f"{int(x)}") if counts else (lambda x: f"{x:.2f}" if isinstance(x, float) else str(x))
        show[col] = show[col].map(lambda x: "" if pd.isna(x) else fmt(x))
    show = show.astype(object).where(show.notna(), "")  # a missing value reads as an empty cell, not <NA>
    parts = [f"# {title}\n" if title else "", show.to_markdown(index=False), "\n"]
    if notes:
        parts.append("\n" + notes.strip() + "\n")
    return "\n".join(p for p in parts if p)


def write_table(
    table_id: str,
    df: pd.DataFrame,
    meta: dict,
    out_dir: Path | None = None,
    title: str = "",
    notes: str = "",
    show: pd.DataFrame | None = None,
) -> dict[str, Path]:
    """Write `<id>.csv`, `<id>.md`, `<id>.meta.json` under reports/tables atomically; return paths.

    Numbers in the CSV are rounded as cited (`cite_round`). `show`, if given, is what the Markdown renders (e.g. means ± sd without the per-seed rows
    that the CSV keeps); by default the CSV's rows.

    `meta` should hold at least preset, seed, device, data source and fingerprint and wall time;
    the git commit (unless given: take it when the run starts), timestamp and versions are added,
    the notebook that wrote it (its source, where that is a notebook), and `matmul`, the precision of matrix products in
    effect for the run's device (orderlib.precision; a notebook sets it once, from MATMUL), unless
    given, and `fingerprints`, the code and data that produced it (orderlib.freshness), for the
    source named by `meta["source"]` or found by `freshness.run_source` (None where neither names one).
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"table {table_id!r} lacks columns {missing}; long format needs {REQUIRED_COLUMNS}")
    for key in ("preset", "seed", "device", "data_source", "data_fingerprint", "wall_time_s"):
        if key not in meta:
            raise ValueError(f"provenance for {table_id!r} lacks {key!r}")
    import torch

    from orderlib import precision

    out_dir = Path(out_dir or repo_root() / "reports" / "tables")
    source = meta.get("source") or freshness.run_source()
    matmul = meta.get("matmul") or precision.in_effect("cuda" if str(meta["device"]).startswith("cuda") else "cpu")
    full_meta = {
        "id": table_id,
        "git_commit": meta.get("git_commit") or git_commit(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        **({"notebook": Path(source).name} if source and source.startswith("notebooks/") else {}),
        **meta,
        "matmul": matmul,
        "fingerprints": freshness.run_record(source, meta["data_fingerprint"]) if source else None,
    }
    paths = {
        "csv": out_dir / f"{table_id}.csv",
        "md": out_dir / f"{table_id}.md",
        "meta": out_dir / f"{table_id}.meta.json",
    }
    # All three are rendered before any is replaced, then renamed together: never a new CSV beside
    # an old meta.json.
    atomic_write_files(
        {
            paths["csv"]: rounded(df).to_csv(index=False).encode(),
            paths["md"]: to_markdown(df if show is None else show, title, notes).encode(),
            paths["meta"]: (json.dumps(full_meta, indent=2, default=str) + "\n").encode(),
        }
    )
    return paths


@dataclass
class NotebookReports:
    """A notebook's run as every report it writes records it: preset, config, device, processes, the
    commit it started from, its start time and the tables folder. A notebook's `Reports` extends it
    with the writing of its own tables; `meta`, where a subclass sets it once the models are trained,
    is what `write_table` records by default."""

    preset: str
    cfg: dict
    device: object
    workers: int
    commit: str
    t_start: float
    tables: Path

    meta = None  # not a field: a subclass's describe(...) sets it

    def elapsed(self) -> float:
        """Seconds since the notebook started."""
        return time.perf_counter() - self.t_start

    def run_meta(self, **fields) -> dict:
        """report_meta with this run's preset, device, commit and wall time so far, and `fields`."""
        return report_meta(**{"preset": self.preset, "device": self.device, "commit": self.commit,
                              "wall_time_s": self.elapsed(), **fields})  # fmt: skip

    def write_table(
        self, table_id: str, df: pd.DataFrame, title: str, notes: str, meta: dict | None = None, **kw
    ) -> dict:
        """write_table under this run's tables folder with `meta`, else `self.meta` with its wall time taken now."""
        if meta is None:
            if self.meta is None:
                raise RuntimeError(f"{type(self).__name__}: describe(...) the trained models before writing {table_id}")
            meta = {**self.meta, "wall_time_s": self.elapsed()}
        return write_table(table_id, df, meta, self.tables, title=title, notes=notes, **kw)


def save_figure(fig, name: str, out_dir: Path | None = None) -> Path:
    """Save a matplotlib figure as reports/figures/<name>.png atomically."""
    out_dir = Path(out_dir or repo_root() / "reports" / "figures")
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.png"
    tmp = out_dir / f".{name}.{os.getpid()}.png"
    fig.savefig(tmp, dpi=150, bbox_inches="tight")
    os.replace(tmp, path)
    return path
