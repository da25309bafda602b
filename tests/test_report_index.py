"""reports/README.md: generated from the reports present, current, and strict about unlisted ones."""
import json

import pytest

from orderlib.tools import report_index as R


def test_committed_index_is_current():
    assert (R.reports_dir() / "README.md").read_text() == R.render()


def test_unlisted_or_missing_reports_are_errors(tmp_path):
    (tmp_path / "reports" / "tables").mkdir(parents=True)
    (tmp_path / "reports" / "figures").mkdir()
    meta = {"git_commit": "0123456789abcdef", "preset": "full", "created": "2026-11-23T12:00:00+0000"}
    (tmp_path / "reports" / "tables" / "oe_table3_snli.meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="oe_table3_roc.png is missing"):
        R.render(tmp_path)
    (tmp_path / "reports" / "figures" / "oe_table3_roc.png").write_bytes(b"png")
    text = R.render(tmp_path)
    assert "| `oe_table3_snli` |" in text and "| 0123456 | 2026-11-23 |" in text and "oe_table2" not in text
    (tmp_path / "reports" / "tables" / "made_up.meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="made_up.meta.json has no entry"):
        R.render(tmp_path)
