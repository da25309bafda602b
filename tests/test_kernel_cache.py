"""The compiled kernels' build cache is keyed by source content, not by the checkout's path."""

from orderlib.concepts.compiled import W2G_SOURCE
from orderlib.kernels import SOURCE, build_location


def test_build_dir_follows_content_not_path(tmp_path):
    a, b = tmp_path / "clone_a" / SOURCE.name, tmp_path / "clone_b" / SOURCE.name
    for p in (a, b):
        p.parent.mkdir()
        p.write_bytes(SOURCE.read_bytes())
    assert build_location(a) == build_location(b) == build_location(SOURCE)  # two checkouts share one build
    b.write_bytes(SOURCE.read_bytes() + b"\n// changed\n")
    assert build_location(b)[1] != build_location(a)[1]  # an edited kernel builds beside, not over
    name, build_dir, copy = build_location(W2G_SOURCE)
    assert copy.parent == build_dir and copy.name == W2G_SOURCE.name
    assert name.isidentifier() and name != build_location(SOURCE)[0]
