"""Executed notebooks are published without the machine's paths."""

import json
import re

import pytest
from publish_notebook import publish


def test_publish_makes_machine_paths_relative(tmp_path):
    root = tmp_path / "checkout"
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": ["print(paths)"],
                "metadata": {},
                "execution_count": 1,
                "outputs": [
                    {
                        "output_type": "stream",
                        "name": "stdout",
                        "text": [f"wrote {root}/reports/tables/t.csv\n", f"cwd {root}\n"],
                    }
                ],
            }
        ],
        "metadata": {"papermill": {"input_path": "notebooks/x.ipynb", "output_path": "/tmp/elsewhere/x.ipynb"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    src = tmp_path / "x.ipynb"
    src.write_text(json.dumps(nb))
    dst = publish(src, root)
    assert dst == root / "reports" / "notebooks" / "x.ipynb"
    text = dst.read_text()
    assert str(tmp_path) not in text and "/tmp/elsewhere" not in text
    out = json.loads(text)
    assert out["cells"][0]["outputs"][0]["text"] == ["wrote reports/tables/t.csv\n", "cwd .\n"]
    assert out["metadata"]["papermill"]["output_path"] == "reports/notebooks/x.ipynb"
    assert not list((root / "reports" / "notebooks").glob(".*"))  # no temp file left


def test_publish_names_a_bad_file(tmp_path):
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.ipynb"):
        publish(bad, tmp_path)


def test_publish_leaves_out_progress_bars(tmp_path):
    """A run's progress (widgets, tqdm's stderr lines) shows while it runs, never in the report."""
    from publish_notebook import strip_progress

    widget = {
        "output_type": "display_data",
        "data": {"application/vnd.jupyter.widget-view+json": {}, "text/plain": "0%"},
    }
    bar = {"output_type": "stream", "name": "stderr", "text": "epoch 3:  40%|████      | 4/10 [00:01<00:02]\r"}
    warning = {"output_type": "stream", "name": "stderr", "text": "UserWarning: something real\n"}
    table = {"output_type": "execute_result", "data": {"text/plain": "hit@1 87.64"}}
    nb = {"cells": [{"cell_type": "code", "outputs": [widget, bar, warning, table]}], "metadata": {"widgets": {}}}
    out = strip_progress(nb)
    assert out["cells"][0]["outputs"] == [warning, table] and "widgets" not in out["metadata"]


def test_links_written_from_notebooks_resolve_from_the_published_copy(tmp_path):
    """A notebook links "../reports/tables/t.md" from notebooks/; its copy in reports/notebooks/ must
    link "../tables/t.md" (and "../../docs/..."), or every link of the copy a reader opens is dead."""
    from publish_notebook import relink

    text = "[t](../reports/tables/t.md), [k](../docs/glossary.md#kk), ![f](../reports/figures/f.png), [w](https://x.org/../a)"
    assert (
        relink(text)
        == "[t](../tables/t.md), [k](../../docs/glossary.md#kk), ![f](../figures/f.png), [w](https://x.org/../a)"
    )
    root = tmp_path / "checkout"
    for page in ("reports/tables/t.md", "docs/glossary.md"):
        (root / page).parent.mkdir(parents=True, exist_ok=True)
        (root / page).write_text("x")
    nb = {
        "cells": [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": ["See [t](../reports/tables/t.md)\n", "and [k](../docs/glossary.md)."],
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    src = tmp_path / "x.ipynb"
    src.write_text(json.dumps(nb))
    dst = publish(src, root)
    (t, k) = re.findall(r"\]\(([^)]+)\)", "".join(json.loads(dst.read_text())["cells"][0]["source"]))
    assert (dst.parent / t).resolve() == (root / "reports/tables/t.md").resolve()
    assert (dst.parent / k).resolve() == (root / "docs/glossary.md").resolve()
