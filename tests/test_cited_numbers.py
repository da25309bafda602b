"""Every number README.md, docs/ and the notebooks' text cite beside a report id is in that report's
CSV, as rounded."""

import json
from pathlib import Path

import cited_numbers as C

IDS = ["oe_table2_retrieval", "oe_table2_seed_spread", "devise_table1"]


def _repo(tmp_path: Path, page: str) -> Path:
    tables = tmp_path / "reports" / "tables"
    tables.mkdir(parents=True)
    (tables / "oe_table2_retrieval.csv").write_text(
        "method,metric,paper,ours\norder,1k caption R@1,46.7,30.52\norder,1k image R@1,37.9,12.71\n"
    )
    (tables / "oe_table2_seed_spread.csv").write_text(
        "method,metric,statistic,paper,ours\norder,1k caption R@1,mean,,29.92\norder,1k caption R@1,sd,,0.664\n"
        "gemm,fraction of GEMM,,,0.73\n"
    )
    (tmp_path / "README.md").write_text(page)
    return tmp_path


def test_the_committed_pages_cite_numbers_their_reports_hold():
    assert C.problems(pages=C.PAGES + C.NOTEBOOK_PAGES) == []  # README, docs and the notebooks' Markdown


def test_a_row_citing_another_reports_number_fails(tmp_path):
    ok = "| report | row | paper | ours |\n|---|---|---:|---:|\n"
    ok += "| [`oe_table2_seed_spread`](x.md) | caption R@1 | 46.7 | 29.92 ± 0.66 |\n"
    assert C.problems(_repo(tmp_path / "a", ok), ("README.md",)) == [
        "README.md:3: 46.7 is not in oe_table2_seed_spread"
    ]
    wrong = ok.replace("oe_table2_seed_spread", "oe_table2_retrieval")  # the one-seed table: 30.52, not 29.92
    assert C.problems(_repo(tmp_path / "b", wrong), ("README.md",)) == [
        "README.md:3: 29.92 is not in oe_table2_retrieval",
        "README.md:3: 0.66 is not in oe_table2_retrieval",
    ]
    both = ok.replace("[`oe_table2_seed_spread`](x.md)", "`oe_table2_seed_spread`, `oe_table2_retrieval`")
    assert C.problems(_repo(tmp_path / "c", both), ("README.md",)) == []


def test_a_row_without_an_id_takes_the_one_above_and_a_number_must_round_to_the_cited_digits(tmp_path):
    page = (
        "| report | row | ours |\n|---|---|---:|\n| `oe_table2_retrieval` | caption R@1 | 30.5 |\n"
        "| | image R@1 | 12.7 |\n| | image R@1 | 12.8 |\n| | count | 7 |\n"
    )
    assert C.problems(_repo(tmp_path, page), ("README.md",)) == [
        "README.md:5: 12.8 is not in oe_table2_retrieval",
        "README.md:6: 7 is not in oe_table2_retrieval",
    ]


def test_prose_numbers_take_their_paragraphs_or_sections_id_and_markers_exempt_non_results(tmp_path):
    page = (
        "# A page\n\nOrder reaches 30.52 here ([`oe_table2_retrieval`](t.md)),\nand 12.71 on images.\n\n"
        "A later paragraph of the section: 37.9, but 99.99 is wrong.\n\n"
        "## Another section\n\nUnbacked 1.5 here;\na margin of 0.05 <!-- not cited -->\n\n"
        "<!-- not cited: the paper's settings -->\nlr 0.001, clip 2.0\n\n"
        "73% of the GEMM rate (`oe_table2_seed_spread`); WordNet 3.1, Section 4.6 and `1.25` are not cited.\n"
    )
    assert C.problems(_repo(tmp_path, page), ("README.md",)) == [
        "README.md:6: 99.99 is not in oe_table2_retrieval",
        "README.md:10: 1.5 names no report",
    ]


def test_matching_reads_signs_thousands_and_either_rounding_of_an_exact_half():
    assert C.matches("−0.29", [-0.29]) and not C.matches("0.29", [-0.29])
    assert C.matches("1,483.34", [1483.34]) and C.matches("12.9", [12.85]) and C.matches("12.8", [12.85])
    assert not C.matches("12.7", [12.85]) and C.matches("0.66", [0.664]) and not C.matches("0.67", [0.664])


def test_a_list_item_is_a_scope_of_its_own(tmp_path):
    page = (
        "- Caption R@1 reaches 30.52 here,\n  as [`oe_table2_retrieval`](t.md) says.\n"
        "- Image R@1 reaches 12.71,\n  as [`oe_table2_seed_spread`](t.md) does not say.\n"
    )
    assert C.problems(_repo(tmp_path, page), ("README.md",)) == ["README.md:3: 12.71 is not in oe_table2_seed_spread"]


def test_a_notebooks_text_cites_its_own_reports_unless_it_names_others(tmp_path):
    root = _repo(tmp_path, "")
    text = [
        "# Table 2\n\nA margin of 0.05 <!-- not cited -->",
        "## What this shows\n\nOrder reaches 30.52 caption R@1, not 31.02;\n"
        "over seeds 29.92 ± 0.66 (`oe_table2_seed_spread`).",
    ]
    cells = [{"cell_type": "markdown", "source": t} for t in text]
    cells.insert(1, {"cell_type": "code", "source": "x = 0.123", "outputs": []})  # code is not text
    nb = root / "notebooks" / "03_oe_table2_retrieval.ipynb"
    nb.parent.mkdir()
    nb.write_text(json.dumps({"cells": cells}))
    found = C.problems(root, C.NOTEBOOK_PAGES)
    assert len(found) == 1 and found[0].startswith("notebooks/03_oe_table2_retrieval.ipynb:7: 31.02 is not in ")
    assert "oe_table2_retrieval" in found[0]


def _table1(tmp_path: Path, page: str) -> Path:
    tables = tmp_path / "reports" / "tables"
    tables.mkdir(parents=True)
    (tables / "oe_table1_wordnet.csv").write_text(
        "method,metric,paper,ours,sd,split\n"
        "order-embeddings,test accuracy (%),90.6,90.74,0.07,authors\n"
        "transitive closure,test accuracy (%),88.2,88.21,,authors\n"
        "order-embeddings (symmetric),test accuracy (%),84.2,83.83,0.2,authors\n"
        "order-embeddings (symmetric),test accuracy (%),84.2,83.49,0.21,ours\n"
        "order-embeddings (symmetric),dev accuracy (%),,83.84,,authors\n"
        "order-embeddings (bilinear),test accuracy (%),86.3,83.84,0.21,authors\n"
    )
    (tmp_path / "README.md").write_text(page)
    return tmp_path


ROWS = (
    "| report | row, metric | paper | ours | our data |\n|---|---|---:|---:|---|\n"
    "| [`oe_table1_wordnet`](t.md) | order-embeddings, test acc. (%) | 90.6 | 90.74 ± 0.07 | real |\n"
    "| | transitive closure | 88.2 | 88.21 | same |\n"
    "| | order-embeddings (symmetric) | 84.2 | 83.83 ± 0.2 | same |\n"
    "| | order-embeddings (bilinear) | 86.3 | 83.84 ± 0.21 | same |\n"
)


def test_a_row_that_names_a_method_cites_that_methods_values(tmp_path):
    """Each number beside a method is that row's value, not any value of the report: swapping the
    bilinear row's 83.84 ± 0.21 into the symmetric row, or the order-embeddings' 90.74 into the
    closure's, fails (both numbers are elsewhere in the report)."""
    assert C.problems(_table1(tmp_path / "a", ROWS), ("README.md",)) == []
    swapped = ROWS.replace("| 84.2 | 83.83 ± 0.2 |", "| 84.2 | 83.84 ± 0.21 |")
    assert C.problems(_table1(tmp_path / "b", swapped), ("README.md",)) == [
        "README.md:5: 83.84 is not the value of the row it sits in (order-embeddings (symmetric))"
    ]
    paired = ROWS.replace("| 84.2 | 83.83 ± 0.2 |", "| 84.2 | 83.83 ± 0.21 |")  # a mean beside another row's sd
    assert C.problems(_table1(tmp_path / "e", paired), ("README.md",)) == [
        "README.md:5: 83.83 ± 0.21 is not one row's value and sd (order-embeddings (symmetric))"
    ]
    closure = ROWS.replace("| 88.2 | 88.21 |", "| 88.2 | 90.74 |")
    assert C.problems(_table1(tmp_path / "c", closure), ("README.md",)) == [
        "README.md:4: 90.74 is not the value of the row it sits in (transitive closure)"
    ]
    paper = ROWS.replace("| 86.3 | 83.84", "| 84.2 | 83.84")  # the symmetric row's paper number
    assert C.problems(_table1(tmp_path / "d", paper), ("README.md",)) == [
        "README.md:6: 84.2 is not the value of the row it sits in (order-embeddings (bilinear))"
    ]
