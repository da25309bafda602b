"""SNLI 1.0 and SICK as released: SICK.txt's splits, the fallback from TSV copies to the official
release, and the data step's download (pooch, checked against the archives' SHA-256)."""

import hashlib
import json
import shutil
import zipfile

import pooch
import pytest

from orderlib.data import entailment
from orderlib.data.entailment import available, download_release, load_pairs, read_sick_txt
from orderlib.paths import DataError

HEAD = (
    "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\t"
    "sentence_A_original\tsentence_B_original\tsentence_A_dataset\tsentence_B_dataset\tSemEval_set"
)


def sick_row(i, a, b, label, split):
    return f"{i}\t{a}\t{b}\t{label}\t4.5\tA_entails_B\tB_neutral_A\t{a}\t{b}\tFLICKR\tFLICKR\t{split}"


@pytest.fixture
def sick_file(tmp_path):
    rows = [
        sick_row(1, "A dog runs", "An animal runs", "ENTAILMENT", "TRAIN"),
        sick_row(2, "A man sings", "Nobody sings", "CONTRADICTION", "TRIAL"),
        sick_row(3, "A cat sleeps", "A cat is tired", "NEUTRAL", "TEST"),
        sick_row(4, "Two kids play", "Kids are playing", "ENTAILMENT", "TEST"),
    ]
    path = tmp_path / "sick_official" / "SICK.txt"
    path.parent.mkdir()
    path.write_text(HEAD + "\n" + "\n".join(rows) + "\n")
    return path


def test_sick_txt_splits_and_labels(sick_file):
    test = read_sick_txt(sick_file, "test")
    assert test.hypotheses == ["A cat is tired", "Kids are playing"] and test.labels.tolist() == [1, 0]
    assert read_sick_txt(sick_file, "dev").labels.tolist() == [2]  # TRIAL is SemEval-2014's dev set
    assert read_sick_txt(sick_file, "train").premises == ["A dog runs"]


def test_sick_txt_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "SICK.txt"
    bad.write_text("pair_ID\tsentence_A\n1\tx\n")
    with pytest.raises(DataError, match=r"SICK.txt:1: header lacks column\(s\) sentence_B"):
        read_sick_txt(bad, "test")
    bad.write_text(HEAD + "\n" + sick_row(1, "a", "b", "MAYBE", "TEST") + "\n")
    with pytest.raises(DataError, match=r"SICK.txt:2: unknown entailment_label 'MAYBE'"):
        read_sick_txt(bad, "test")


def test_tsv_copies_first_then_the_official_release(tmp_path, sick_file):
    root = sick_file.parent.parent
    assert available("sick", root) == "sick_official"
    assert load_pairs("sick", "test", root).source.endswith("SICK.txt[TEST]")
    (root / "sick").mkdir()
    (root / "sick" / "test.tsv").write_text("a b\tc d\t0\n")
    assert available("sick", root) == "sick" and len(load_pairs("sick", "test", root)) == 1
    with pytest.raises(DataError, match="neither the TSV copies"):
        load_pairs("snli", "test", root)


def _snli_zip(path, members=("train", "dev", "test")):
    with zipfile.ZipFile(path, "w") as z:
        for s in members:
            rec = {"sentence1": "A man.", "sentence2": "A person.", "gold_label": "entailment"}
            z.writestr(f"snli_1.0/snli_1.0_{s}.jsonl", json.dumps(rec) + "\n")
        z.writestr("__MACOSX/snli_1.0/._snli_1.0_dev.jsonl", "junk")
        z.writestr("snli_1.0/README.txt", "readme")
    return path


def _trust(monkeypatch, name, archive):
    """Make RELEASES hold the test archive's SHA-256 in place of the official one."""
    url, _, members = entailment.RELEASES[name]
    sha = hashlib.sha256(archive.read_bytes()).hexdigest()
    monkeypatch.setitem(entailment.RELEASES, name, (url, f"sha256:{sha}", members))


def test_releases_pin_the_published_sha256():
    for url, known_hash, _ in entailment.RELEASES.values():
        assert url.startswith("https://") and len(known_hash) == len("sha256:") + 64


def test_download_release_extracts_the_data_files(tmp_path, monkeypatch):
    archive = _snli_zip(tmp_path / "snli_1.0.zip")
    _trust(monkeypatch, "snli_1.0", archive)
    dest = download_release("snli_1.0", tmp_path / "data", url=archive.as_uri())
    assert sorted(p.name for p in dest.iterdir()) == [f"snli_1.0_{s}.jsonl" for s in ("dev", "test", "train")]
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["snli_1.0"]  # no staging left
    assert load_pairs("snli", "dev", tmp_path / "data").labels.tolist() == [0]
    broken = _snli_zip(tmp_path / "broken.zip", members=("dev",))
    _trust(monkeypatch, "snli_1.0", broken)
    with pytest.raises(DataError, match="lacks snli_1.0/snli_1.0_train.jsonl"):
        download_release("snli_1.0", tmp_path / "other", url=broken.as_uri())
    assert not any((tmp_path / "other").iterdir())  # nothing half-extracted


def test_download_release_refuses_an_archive_with_another_hash(tmp_path):
    archive = _snli_zip(tmp_path / "snli_1.0.zip")  # not the official bytes
    with pytest.raises(DataError, match=r"hash of downloaded file \(snli_1.0.zip\) does not match the known hash"):
        download_release("snli_1.0", tmp_path / "data", url=archive.as_uri())
    assert not any((tmp_path / "data").iterdir())


def test_download_release_fetches_the_official_url_with_pooch(tmp_path, monkeypatch):
    sick = tmp_path / "SICK.zip"
    rows = [sick_row(1, "A dog runs", "An animal runs", "ENTAILMENT", "TEST")]
    with zipfile.ZipFile(sick, "w") as z:
        z.writestr("SICK.txt", HEAD + "\n" + "\n".join(rows) + "\n")
        z.writestr("readme.txt", "readme")
    fetched = []

    def serve(self, url, output_file, _pooch):  # stands in for pooch's HTTP download
        fetched.append((url, self.kwargs["timeout"]))
        shutil.copyfile(sick, output_file)

    monkeypatch.setattr(pooch.HTTPDownloader, "__call__", serve)
    with pytest.raises(DataError, match=r"zenodo.org/records/2787612/files/SICK.zip: SHA256 hash .*\(SICK.zip\)"):
        download_release("sick_official", tmp_path / "data", timeout=5)
    assert fetched == [("https://zenodo.org/records/2787612/files/SICK.zip", 5)]
    _trust(monkeypatch, "sick_official", sick)
    dest = download_release("sick_official", tmp_path / "data")
    assert [p.name for p in dest.iterdir()] == ["SICK.txt"]
    assert load_pairs("sick", "test", tmp_path / "data").labels.tolist() == [0]
