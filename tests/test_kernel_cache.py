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


def test_compiled_source_key_ignores_comments_and_names_the_build_flags(tmp_path, monkeypatch):
    """Table 1's checkpoints are keyed by the C++ step's code and flags: a comment edit keeps them, a
    code or flag change retrains."""
    from orderlib import kernels
    from orderlib.concepts.compiled import STEP_SOURCE, source_key

    text = STEP_SOURCE.read_text()
    src = tmp_path / STEP_SOURCE.name
    src.write_text(text)
    base = source_key(src)
    src.write_text("// a new first line\n/* and a block\n   comment */\n" + text.replace("//", "//  reworded:", 3))
    assert source_key(src) == base
    src.write_text(text + "\nstatic int orderlib_probe = 1;\n")
    assert source_key(src) != base
    src.write_text(text)
    monkeypatch.setitem(kernels.EXTRA_FLAGS, STEP_SOURCE.name, ["-fno-math-errno"])  # without -fno-trapping-math
    assert source_key(src) != base
