"""Where a notebook run writes: reports for the full preset, scratch dirs for the others."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from orderlib.paths import reports_root, runs_root


@dataclass
class RunPaths:
    tables: Path
    figures: Path
    checkpoints: Path

    @property
    def reports(self) -> Path:
        return self.tables.parent


def run_paths(name: str, preset: str, root: Path | None = None) -> RunPaths:
    """Full-preset runs write `reports/`; other presets write `runs/<preset>/reports/` so a CI
    run never overwrites the committed tables. Checkpoints go to `runs/<preset>/checkpoints/<name>`.
    `runs/` and `reports/` are `orderlib.paths.runs_root()` and `reports_root()` (under `root` if given)."""
    runs = Path(root) / "runs" if root else runs_root()
    full = Path(root) / "reports" if root else reports_root()
    reports = full if preset == "full" else runs / preset / "reports"
    ckpt = runs / preset / "checkpoints" / name
    for p in (reports / "tables", reports / "figures", ckpt):
        p.mkdir(parents=True, exist_ok=True)
    return RunPaths(reports / "tables", reports / "figures", ckpt)


def resolve_device(value: str = "auto", prefer: str = "cuda") -> torch.device:
    """Return the device a notebook runs on. "auto": `prefer` where this machine has it, else the CPU;
    `prefer` is CUDA unless an experiment runs faster elsewhere (Table 1: the CPU, where its compiled
    step builds). Any other value is taken as named."""
    if value != "auto":
        return torch.device(value)
    if torch.device(prefer).type == "cuda" and not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device(prefer)
