"""benchmarks/standing/compute_floor.py: the FLOP it divides by the GEMM peak are the step's real products."""

import json

import pandas as pd
import pytest


def _item_cnn_flops(batch=128, side=32, width=32, channels=3, classes=10) -> int:
    """One training step of ItemCNN by hand: a conv's forward, weight gradient and input gradient
    each cost 2 x its multiply-adds; the first conv has no input gradient (the images need none)."""
    convs = [(channels, width, side), (width, 2 * width, side // 2), (2 * width, 4 * width, side // 4)]
    macs = [batch * s * s * cout * cin * 9 for cin, cout, s in convs]
    head = batch * 4 * width * classes
    return 2 * (2 * macs[0] + 3 * macs[1] + 3 * macs[2] + 3 * head)


def test_item_cnn_step_flops_match_a_hand_count(benchmark_module):
    cf = benchmark_module("compute_floor")
    step = cf.make_step("item-cnn")
    assert cf.step_flops(step) == _item_cnn_flops()
    assert cf.step_flops(cf.make_step("item-cnn-nchw")) == _item_cnn_flops()  # same products, other layout


def test_gemm_flops_and_timing(benchmark_module):
    cf = benchmark_module("compute_floor")
    assert cf.step_flops(cf.make_step("gemm-gru")) == 2 * 128 * 1024 * 3072
    assert cf.step_flops(cf.peak_step()) == 2 * 2048**3
    calls = []
    assert cf.seconds_per_call(lambda: calls.append(1), 0.0) >= 0 and len(calls) == 3  # at least three calls


def test_training_minutes_reads_bench_reproduce(monkeypatch, tmp_path, benchmark_module):
    cf = benchmark_module("compute_floor")
    tables = tmp_path / "reports" / "tables"
    tables.mkdir(parents=True)
    pd.DataFrame(
        [
            dict(
                method="02_oe_table3_snli.ipynb",
                metric="training time of its reports' models (min)",
                paper=None,
                ours=54.1,
            ),
            dict(method="02_oe_table3_snli.ipynb", metric="wall time (min)", paper=None, ours=33.2),
            dict(
                method="09_sherlock_facts.ipynb",
                metric="training time of its reports' models (min)",
                paper=None,
                ours=70.8,
            ),
            dict(method="09_sherlock_facts.ipynb", metric="wall time (min)", paper=None, ours=37.2),
            dict(method="01_oe_table1_wordnet.ipynb", metric="wall time (min)", paper=None, ours=68.5),
            dict(method="00_oe_fig2_toy2d.ipynb", metric="wall time (min)", paper=None, ours=0.6),
            dict(method="total", metric="wall time (min)", paper=None, ours=139.5),
        ]
    ).to_csv(tables / "bench_reproduce.csv", index=False)
    (tables / "bench_reproduce.meta.json").write_text(json.dumps({"git_commit": "abc", "notebooks": {}}))
    monkeypatch.setattr(cf, "repo_root", lambda: tmp_path)
    # notebooks whose training one workload's steps fill: their recorded training times, else (Table 1)
    # their wall time times the cores, flagged as not recorded; notebooks that do not train are left out
    got = cf.training_minutes(cores=2)
    assert got == {
        "02_oe_table3_snli.ipynb": (54.1, True),
        "09_sherlock_facts.ipynb": (70.8, True),
        "01_oe_table1_wordnet.ipynb": (pytest.approx(137.0), False),
    }


def test_product_time_share_counts_products_only(benchmark_module):
    import torch

    cf = benchmark_module("compute_floor")
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    assert cf.product_time_share(lambda: a @ b) > 0.9
    assert cf.product_time_share(lambda: (a.exp() + b).sqrt_()) == 0.0
