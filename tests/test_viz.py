"""What the notebooks show a reader: tables rounded as cited with blanks, compact configs, figures
with one legend. Display only: the CSVs stay as write_table rounds them."""

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd

from orderlib.reports import rounded
from orderlib.viz import cited, config_table, plot_fact_curves, plot_table1, wide


def test_cited_rounds_as_the_csv_does_and_leaves_missing_cells_blank():
    df = pd.DataFrame({"paper": [53.2, np.nan, None], "ours": [87.5123, 0.745123, 100.0], "n": [10, 10, 10]})
    shown = cited(df)
    assert shown["ours"].tolist() == [87.51, 0.745, 100] and shown["paper"].tolist() == [53.2, "", ""]
    assert shown["n"].tolist() == [10, 10, 10]
    csv = rounded(df)
    assert [c for c in csv["ours"]] == shown["ours"].tolist()  # the same numbers as the report's CSV
    assert df["ours"][0] == 87.5123  # the frame itself is left as it was


def test_wide_keeps_the_order_rows_were_written_in():
    long = pd.DataFrame(
        {
            "method": ["softmax"] * 4 + ["devise"] * 3,
            "metric": ["hit@1", "hit@2", "hit@5", "hit@10", "hit@1", "hit@2", "hit@10"],
            "ours": [86.291, 96.09, 99.65, 100.0, 87.51, 96.41, 100.0],
        }
    )
    t = wide(long)
    assert list(t.columns) == ["hit@1", "hit@2", "hit@5", "hit@10"]  # not text order (hit@1, hit@10, hit@2)
    assert list(t.index) == ["softmax", "devise"] and t.loc["devise", "hit@5"] == ""
    assert t.loc["softmax", "hit@1"] == 86.29
    assert list(wide(long, order=["hit@10", "hit@1", "hp@5"]).columns) == ["hit@10", "hit@1"]


def test_config_table_is_one_short_line_per_setting():
    from orderlib.experiments import oe_wordnet as X

    cfg = X.PRESETS["full"]
    t = config_table(cfg, skip=("models", "methods", "grids"))
    assert len(t) == len(cfg) - 3 and t.loc["seeds", "value"] == "0, 1, 2"
    nested = config_table({"cnn": {"epochs": 8}, "rows": ["a" * 40, "b" * 40]}, width=30)
    assert nested.loc["cnn", "value"] == "epochs=8" and len(nested.loc["rows", "value"]) == 30
    models = X.models_table(cfg)  # Table 1's rows, one line each
    assert list(models.index) == cfg["methods"] and models.loc["word2gauss", "dev_grid"] == "margin 1, 3, 7"
    assert models.loc[X.DOE, "dev_grid"].endswith("lr 0.01, 0.003, 0.001, 0.0005 x gamma 225, 100")


def _one_legend(fig) -> list[str]:
    assert all(ax.get_legend() is None for ax in fig.axes)  # no legend over the data
    (legend,) = fig.legends
    return [t.get_text() for t in legend.get_texts()]


def test_table1_figure_has_a_row_per_setting_and_one_legend():
    from orderlib.experiments import oe_wordnet_tables as X

    settings = ["paper", "clean"]
    per_seed = pd.DataFrame(
        [dict(setting=s, method=m, seed=str(k), ours=80.0 + k) for s in settings for m in X.METHODS[:3] for k in (0, 1)]
    )
    history = pd.DataFrame(
        [
            dict(setting=s, method=m, seed=k, epoch=e, test_accuracy=70.0 + e)
            for s in settings
            for m in X.METHODS[1:3]
            for k in (0, 1)
            for e in range(3)
        ]
    )
    fig = plot_table1(per_seed, history, X.METHODS, {"paper": X.PAPER_TABLE1})
    assert len(fig.axes) == 2 * len(settings)
    assert _one_legend(fig) == [*X.METHODS[:3], "the paper's Table 1"]


def test_sherlock_figure_names_every_method_and_both_line_styles():
    scale = pd.DataFrame(
        [
            dict(protocol=p, method=m, candidates=c, facts=f, K1=1.0)
            for p in ("strict", "implied")
            for m in ("SEM-A", "MV CCA")
            for c in ("all facts", "facts of the image's order")
            for f in (117, 255, 810)
        ]
    )
    per_fact = pd.DataFrame(
        [
            dict(protocol=p, method=m, bin=b, K10=5.0)
            for p in ("strict", "implied")
            for m in ("SEM-A", "ESZSL")
            for b in "01"
        ]
    )
    names = _one_legend(plot_fact_curves(scale, per_fact))
    assert names[:3] == ["SEM-A", "MV CCA", "ESZSL"] and len(names) == 5 and "among all facts" in names[3]


def test_sherlock_figure_gives_eleven_methods_eleven_colours():
    """Notebook 09 plots 11 methods in Figure 7 (with SEM-A on the gloss skip-gram): matplotlib's "C10"
    is "C0" again, so the eleventh would be drawn in SEM-A's colour."""
    from matplotlib.colors import to_hex

    methods = [f"m{i}" for i in range(11)]
    scale = pd.DataFrame([dict(method="m0", candidates="all facts", facts=f, K1=1.0) for f in (117, 810)])
    per_fact = pd.DataFrame([dict(method=m, bin=b, K10=5.0) for m in methods for b in "01"])
    lines = plot_fact_curves(scale, per_fact).axes[1].get_lines()
    assert len(lines) == 11 and len({to_hex(line.get_color()) for line in lines}) == 11
