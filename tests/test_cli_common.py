"""The `orderlib` command as a whole: every --help example runs, the console entry point works,
the example files regenerate bit for bit, and a failed write leaves nothing behind."""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from orderlib import cli
from orderlib.cli import report

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "tests" / "data" / "cli"
COMMANDS = [
    ["eval", "retrieval"],
    ["eval", "hypernymy"],
    ["eval", "compositional"],
    ["eval", "facts"],
    ["train", "hypernymy"],
]


def help_example(command: list[str], capsys) -> list[str]:
    """The argv of the example at the end of `orderlib <command> --help`."""
    with pytest.raises(SystemExit) as exit_:
        cli.main([*command, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    example = text.split("example (from the repository root", 1)[1].split("\n", 1)[1]
    line = " ".join(part.strip().rstrip("\\") for part in example.strip().splitlines())
    argv = shlex.split(line)
    assert argv[0] == "orderlib"
    return argv[1:]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_example_runs(command, capsys, tmp_path, monkeypatch):
    argv = help_example(command, capsys)
    assert argv[: len(command)] == command
    out = argv.index("--out") + 1
    argv[out] = str(tmp_path / "report")
    monkeypatch.chdir(ROOT)
    assert cli.main(argv) == 0
    stem = "hypernymy_train" if command[0] == "train" else command[1]
    meta = json.loads((tmp_path / "report" / f"{stem}.meta.json").read_text())
    assert meta["orderlib_version"] and meta["protocol"] and meta["tie_rule"]
    assert all(len(r["sha256"]) == 64 for r in meta["inputs"].values())
    df = pd.read_csv(tmp_path / "report" / f"{stem}.csv")
    assert {"method", "metric", "paper", "ours"} <= set(df.columns)
    assert (tmp_path / "report" / f"{stem}.md").read_text().startswith("# ")


def test_module_entry_point_in_a_subprocess(tmp_path):
    """`python -m orderlib.cli` (what the `orderlib` console script calls) runs and fails as documented."""
    base = [sys.executable, "-m", "orderlib.cli", "eval", "compositional", "--kind", "similarity"]
    files = ["--labels", str(EXAMPLES / "compositional_labels.txt"), "--seen", str(EXAMPLES / "compositional_seen.txt")]
    ok = subprocess.run(
        [*base, "--scores", str(EXAMPLES / "compositional_scores.npy"), *files, "--out", str(tmp_path / "a")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert ok.returncode == 0, ok.stderr
    assert "closed world" in ok.stdout
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "compositional.csv",
        "compositional.md",
        "compositional.meta.json",
    ]
    bad = subprocess.run(
        [*base, "--scores", str(EXAMPLES / "facts_labels.txt"), *files, "--out", str(tmp_path / "b")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith(f"orderlib: error: {EXAMPLES / 'compositional_labels.txt'}: ")
    assert not (tmp_path / "b").exists()


def test_console_script_is_declared():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'orderlib = "orderlib.cli:main"' in text.split("[project.scripts]", 1)[1].split("[", 1)[0]


def test_examples_regenerate_bit_for_bit(tmp_path):
    spec = importlib.util.spec_from_file_location("make_examples", EXAMPLES / "make_examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = module.make(tmp_path)
    assert written
    for path in written:
        shipped = EXAMPLES / path.name
        assert shipped.read_bytes() == path.read_bytes(), f"{shipped} differs from make_examples.py's output"
        assert shipped.stat().st_size < 8000


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(report, "to_markdown", broken)
    argv = [
        "eval",
        "compositional",
        "--scores",
        str(EXAMPLES / "compositional_scores.npy"),
        "--kind",
        "similarity",
        "--labels",
        str(EXAMPLES / "compositional_labels.txt"),
        "--seen",
        str(EXAMPLES / "compositional_seen.txt"),
        "--out",
        str(tmp_path / "out"),
    ]
    with pytest.raises(RuntimeError):
        cli.main(argv)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_bad_input_keeps_an_earlier_report(tmp_path, capsys):
    argv = [
        "eval",
        "compositional",
        "--kind",
        "similarity",
        "--labels",
        str(EXAMPLES / "compositional_labels.txt"),
        "--seen",
        str(EXAMPLES / "compositional_seen.txt"),
        "--out",
        str(tmp_path),
    ]
    assert cli.main([*argv, "--scores", str(EXAMPLES / "compositional_scores.npy")]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert cli.main([*argv, "--scores", str(tmp_path / "missing.npy")]) == 2
    assert capsys.readouterr().err.endswith(f"orderlib: error: {tmp_path / 'missing.npy'}: no such file\n")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_report_id_must_be_a_plain_name(tmp_path, capsys):
    argv = ["eval", "facts", "--matrix", "m.npy", "--kind", "distance", "--facts", "f.tsv", "--labels", "l.txt"]
    assert cli.main([*argv, "--out", str(tmp_path / "o"), "--id", "../escape"]) == 2
    assert "orderlib: error: ../escape: a report id is" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
