import pytest

from orderlib.data import wordnet as W
from orderlib.paths import DataError


def test_missing_dir_names_path_and_command(tmp_path):
    with pytest.raises(DataError, match=r"not found at .*make data"):
        W.check_wordnet_dir(tmp_path / "nope", "3.1")


def test_incomplete_dir_names_missing_file(tmp_path):
    (tmp_path / "data.noun").write_text("  1 This software and database is being provided ... WordNet 3.0\n")
    with pytest.raises(DataError, match="missing index.noun"):
        W.check_wordnet_dir(tmp_path, "3.0")


def test_malformed_data_file(tmp_path):
    for name in W.REQUIRED:
        (tmp_path / name).write_text("garbage\n")
    with pytest.raises(DataError, match="data.noun is not a WordNet data file"):
        W.check_wordnet_dir(tmp_path, "3.0")


def test_open_wordnet_reports_missing(tmp_path):
    with pytest.raises(DataError, match="WordNet 3.1 not found"):
        W.open_wordnet("3.1", root=tmp_path)


def test_lexnames_format():
    lines = W.lexnames_text().splitlines()
    assert len(lines) == 45
    assert lines[3] == "03\tnoun.Tops\t1" and lines[44] == "44\tadj.ppl\t3"


def test_unknown_version():
    with pytest.raises(ValueError, match="unknown WordNet version"):
        W.wordnet_dir("2.1")


def test_real_wordnet_reads_through_nltk(real_wordnet):
    wn = W.open_wordnet("3.0")
    assert wn.get_version() == "3.0"
    dog = wn.synset("dog.n.01")
    assert "canine.n.02" in {h.name() for h in dog.hypernyms()}
    wn31 = W.open_wordnet("3.1")
    assert wn31.get_version() == "3.1"
    for d in real_wordnet.values():
        assert not any(p.is_symlink() for p in d.iterdir())  # NLTK refuses links


def test_setup_data_cli_rejects_unknown_target(capsys):
    from orderlib.setup_data import main

    with pytest.raises(SystemExit):
        main(["imagenet"])
    assert "unknown target" in capsys.readouterr().err


def test_setup_data_cli_installs_wordnet(real_wordnet, capsys):
    from orderlib.setup_data import main

    assert main([]) == 0
    out = capsys.readouterr().out
    assert "WordNet 3.0" in out and "82,192 noun synsets" in out


def test_noun_graph_built_by_hand_has_no_authors_order():
    g = W.NounGraph(["a", "b"], [[], [0]], "toy", "fp", "toy")
    assert g.nltk_order is None and g.authors_parents is None and g.n_edges == 1


def test_cache_of_another_format_is_not_read(tmp_path):
    import json

    old = tmp_path / "old.json"
    old.write_text(json.dumps({"names": ["a"], "parents": [[]]}))  # format 1: no order fields
    assert W.read_cache(old) is None
    half = tmp_path / "half.json"
    half.write_text('{"format": 2, "names"')
    assert W.read_cache(half) is None
    ok = tmp_path / "ok.json"
    d = {"format": W.CACHE_FORMAT, "names": ["a"], "parents": [[]], "nltk_order": [0], "authors_parents": [[]]}
    ok.write_text(json.dumps(d))
    assert W.read_cache(ok) == d


def test_real_wordnet_keeps_the_authors_order(real_wordnet):
    for version in ("3.1", "3.0"):
        g = W.load_noun_graph(version)
        n = len(g.names)
        assert sorted(g.nltk_order) == list(range(n))
        # NLTK's all_synsets('n') walks data.noun by offset
        assert [g.names[i] for i in g.nltk_order[:5]] == [
            "entity.n.01",
            "physical_entity.n.01",
            "abstraction.n.06",
            "thing.n.12",
            "object.n.01",
        ]
        assert all(sorted(a) == p for a, p in zip(g.authors_parents, g.parents))
        idx = g.index()
        # hypernym south.n.01 before instance hypernym american_state.n.01, not merged by name
        assert [g.names[i] for i in g.authors_parents[idx["alabama.n.01"]]] == ["south.n.01", "american_state.n.01"]
        assert [g.names[i] for i in g.parents[idx["alabama.n.01"]]] == ["american_state.n.01", "south.n.01"]
        assert sum(a != p for a, p in zip(g.authors_parents, g.parents)) == 4
    assert any(f"wordnet-3.1-nouns-v{W.CACHE_FORMAT}-" in p.name for p in (W.data_root() / "cache").iterdir())
