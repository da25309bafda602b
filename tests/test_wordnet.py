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
