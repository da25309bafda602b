"""The workflow (workflow/Snakefile): it plans every notebook, on this machine and on a SLURM cluster,
each after the notebooks whose checkpoints it reads, and a rule's fingerprint file says it is out of
date when, and only when, the index would call its reports stale."""

import json
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import fingerprints
import pytest
import report_index
import yaml

from orderlib import freshness

REPO = Path(__file__).resolve().parents[1]
CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def run_ids(notebook: Path) -> set[str]:
    """The run_paths ids a notebook's code names (its checkpoints and reports), f-string fields
    filled from its parameters cell's string defaults."""
    cells = json.loads(notebook.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    params = next(("".join(c["source"]) for c in cells if "parameters" in c["metadata"].get("tags", [])), "")
    defaults = dict(re.findall(r'^(\w+)\s*=\s*"([^"]*)"', params, re.M))
    ids = set()
    for call in re.findall(r"run_paths\((.*?),\s*PRESET\)", "\n".join(code)):
        for literal in re.findall(r'"([^"]+)"', call):
            ids.add(re.sub(r"\{(\w+)\}", lambda m: defaults.get(m.group(1), m.group(0)), literal))
    return ids


def test_config_lists_every_notebook_and_each_starts_after_the_notebooks_whose_runs_it_reads():
    assert list(CONFIG["notebooks"]) == NOTEBOOKS and len(NOTEBOOKS) == 10
    owner = {}  # run id -> the first notebook that names it (the one that trains what is under it)
    for stem in NOTEBOOKS:
        for rid in run_ids(REPO / "notebooks" / f"{stem}.ipynb"):
            owner.setdefault(rid, stem)
    assert owner["oe_retrieval_scenes"] == "03_oe_table2_retrieval" and owner["utama"] == "08_utama_compositionality"
    after = {stem: (spec or {}).get("after", []) for stem, spec in CONFIG["notebooks"].items()}

    def before(n, seen=()):
        return {d for m in after[n] if m not in seen for d in {m} | before(m, seen + (m,))}

    for stem in NOTEBOOKS:
        others = {owner[r] for r in run_ids(REPO / "notebooks" / f"{stem}.ipynb")} - {stem}
        assert others <= before(stem), f"{stem} reads the runs of {others}: list them in its `after`"


def dry_run(runs: Path, *args: str) -> str:
    """`snakemake -n` of the workflow in this checkout on a preset of its own, whose outputs and
    fingerprint files go under `runs` (none exist: every rule is planned)."""
    snakemake = Path(sys.executable).with_name("snakemake")
    cmd = [str(snakemake), "-n", "--snakefile", "workflow/Snakefile", "--config", "preset=dryrun", *args]
    env = {**os.environ, "ORDERLIB_RUNS": str(runs)}
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def job_counts(text: str) -> dict[str, int]:
    """The first "Job stats" table of snakemake's output: {rule: jobs}."""
    table = text.split("Job stats:", 1)[1].split("\n\n", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\S+)\s+(\d+)$", table, re.M)}


def rule_block(text: str, rule: str) -> str:
    return text.split(f"rule {rule}:", 1)[1].split("\n\n", 1)[0]


@pytest.fixture(scope="module")
def local_plan(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    return runs, dry_run(runs, "--cores", "3")


def test_a_dry_run_plans_every_notebook_in_order_and_their_timings(local_plan):
    runs, text = local_plan
    counts = job_counts(text)
    assert {stem: counts.get(stem) for stem in NOTEBOOKS} == dict.fromkeys(NOTEBOOKS, 1), counts
    assert counts["bench_reproduce"] == 1 and counts["all"] == 1 and counts["total"] == 12
    executed = f"{runs}/dryrun/executed"
    assert f"{executed}/03_oe_table2_retrieval.ipynb" in rule_block(text, "04_oe_sec46_detail").split("output:")[0]
    inputs_09 = rule_block(text, "09_sherlock_facts").split("output:")[0]
    assert f"{executed}/03_oe_table2_retrieval.ipynb" in inputs_09 and f"{executed}/08_utama" in inputs_09
    assert f"{runs}/fingerprints/dryrun/04_oe_sec46_detail.json" in rule_block(text, "04_oe_sec46_detail")
    # Table 1 trains one process per core: every core; the others as config's threads says (all)
    assert "threads: 3" in rule_block(text, "01_oe_table1_wordnet")
    assert "ORDERLIB_NOTEBOOK=06_devise_table1.ipynb OMP_NUM_THREADS=3" in text
    assert "-p PRESET dryrun" in rule_block(text, "00_oe_fig2_toy2d")
    assert (runs / "fingerprints" / "dryrun" / "00_oe_fig2_toy2d.json").exists()  # written when it was parsed


def test_on_the_full_preset_a_notebook_runs_after_the_seed_spreads_it_shows(tmp_path):
    """03, 06, 07, 08 and 09 display seed-spread verdicts: each waits on those spreads (which train
    its seed-0 models themselves), so a rerun of a spread reruns the notebook after it, in one run."""
    from report_index import shown_reports

    snakemake = Path(sys.executable).with_name("snakemake")
    cmd = [str(snakemake), "-n", "--forceall", "--snakefile", "workflow/Snakefile", "--cores", "2", "reports"]
    env = {**os.environ, "ORDERLIB_RUNS": str(tmp_path)}
    done = subprocess.run([*cmd, "--config", "preset=full"], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    shows = {stem: shown_reports(json.loads((REPO / "notebooks" / f"{stem}.ipynb").read_text())) for stem in NOTEBOOKS}
    assert {s for s, ids in shows.items() if ids} == {s for s in NOTEBOOKS if s[:2] in {"03", "06", "07", "08", "09"}}
    for stem, ids in shows.items():
        inputs = rule_block(done.stdout, stem).split("output:")[0]
        assert all(f"reports/tables/{rid}.meta.json" in inputs for rid in ids), (stem, ids, inputs)


def test_the_slurm_profile_plans_every_notebook_as_a_job():
    pytest.importorskip("snakemake_executor_plugin_slurm")
    import tempfile

    with tempfile.TemporaryDirectory() as runs:
        text = dry_run(Path(runs), "--profile", "workflow/profiles/slurm")
    counts = job_counts(text)
    assert {stem: counts.get(stem) for stem in NOTEBOOKS} == dict.fromkeys(NOTEBOOKS, 1), counts
    assert "runtime=480" in rule_block(text, "01_oe_table1_wordnet") and "gpu=0" in rule_block(text, "00_oe_fig2_toy2d")


def test_a_comment_reruns_nothing_a_changed_import_reruns_what_the_index_calls_stale(tmp_path):
    def write(path, text):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)

    write("orderlib/__init__.py", "")
    write("orderlib/a.py", "def f():\n    return 1\n")
    write("orderlib/b.py", "def g():\n    return 2\n")
    write("benchmarks/x.py", "from orderlib import a\n")
    write("benchmarks/y.py", "from orderlib import b\n")
    tables = tmp_path / "reports" / "tables"
    for rid in ("x", "y"):  # each report records the code that wrote it, as reports.write_table does
        record = freshness.run_record(f"benchmarks/{rid}.py", None, tmp_path)
        write(f"reports/tables/{rid}.meta.json", json.dumps({"fingerprints": record}))
    past = time.time() - 100
    for rid in ("x", "y"):
        os.utime(tables / f"{rid}.meta.json", (past, past))

    def refresh(rid):
        """(why the report is stale, whether its fingerprint file changed, whether it is dated after the report)"""
        read = freshness.tree_reader(tmp_path)
        why = fingerprints.stale(f"benchmarks/{rid}.py", tables, [rid], read)
        stamp, meta = tmp_path / "fp" / f"{rid}.json", tables / f"{rid}.meta.json"
        changed = fingerprints.refresh(stamp, f"benchmarks/{rid}.py", read, [meta], why)
        return why, changed, stamp.stat().st_mtime > meta.stat().st_mtime

    assert refresh("x") == ([], True, False) and refresh("y") == ([], True, False)  # current: dated before
    assert refresh("x") == ([], False, False)  # nothing changed: not rewritten
    write("orderlib/a.py", "def f():\n    # a comment\n    return 1  # and another\n")
    assert refresh("x") == ([], False, False)
    write("orderlib/a.py", "import orderlib.b\n\n\ndef f():\n    return 1\n")
    assert refresh("x") == (["x: orderlib/a.py"], True, True) and refresh("y") == ([], False, False)
    assert refresh("x") == (["x: orderlib/a.py"], True, True)  # each plan of a stale rule: new content
    write("orderlib/a.py", "def f():\n    return 1\n")  # reverted: current again, dated before its report
    assert refresh("x") == ([], True, False)


def test_every_report_has_a_source_and_the_package_leaves_the_workflow_out(tmp_path):
    registry = report_index.load_registry()
    assert all((REPO / e["source"]).is_file() for e in registry.values())
    assert report_index.NEEDS_DEVICE == {"bench_reproduce_cuda": registry["bench_reproduce_cuda"]["needs_device"]}
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["orderlib*"]
    assert not (REPO / "orderlib" / "tools").exists()
    # lint-imports forbids the package every module of workflow/scripts, by the name they import it by
    (contract,) = [c for c in project["tool"]["importlinter"]["contracts"] if c.get("source_modules") == ["orderlib"]]
    assert sorted(contract["forbidden_modules"]) == sorted(p.stem for p in (REPO / "workflow/scripts").glob("*.py"))


def test_the_index_refuses_a_report_that_a_failed_run_wrote(tmp_path):
    rep = tmp_path / "reports"
    (rep / "tables").mkdir(parents=True)
    (rep / "figures").mkdir()
    failed = {"notebook": "07_devise_zeroshot.ipynb", "error": "AssertionError: sanity bound", "commit": "c"}
    (rep / "tables" / "devise_zeroshot.meta.json").write_text(json.dumps({"git_commit": "c", "failed_run": failed}))
    (rep / "figures" / "devise_zeroshot_examples.png").write_bytes(b"png")
    with pytest.raises(ValueError, match="devise_zeroshot: written by a run of 07_devise_zeroshot.ipynb that then"):
        report_index.render(tmp_path)
