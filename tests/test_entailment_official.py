"""SNLI 1.0 and SICK as released: SICK.txt's splits, the fallback from TSV copies to the official
release, and the data step's download (from a local file:// archive)."""

import json
import zipfile

import pytest

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


def test_download_release_extracts_the_data_files(tmp_path):
    archive = tmp_path / "snli_1.0.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for s in ("train", "dev", "test"):
            rec = {"sentence1": "A man.", "sentence2": "A person.", "gold_label": "entailment"}
            z.writestr(f"snli_1.0/snli_1.0_{s}.jsonl", json.dumps(rec) + "\n")
        z.writestr("__MACOSX/snli_1.0/._snli_1.0_dev.jsonl", "junk")
        z.writestr("snli_1.0/README.txt", "readme")
    dest = download_release("snli_1.0", tmp_path / "data", url=archive.as_uri())
    assert sorted(p.name for p in dest.iterdir()) == [f"snli_1.0_{s}.jsonl" for s in ("dev", "test", "train")]
    assert load_pairs("snli", "dev", tmp_path / "data").labels.tolist() == [0]
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(broken, "w") as z:
        z.writestr("snli_1.0/snli_1.0_dev.jsonl", "{}")
    with pytest.raises(DataError, match="lacks snli_1.0_train.jsonl"):
        download_release("snli_1.0", tmp_path / "other", url=broken.as_uri())
    assert not (tmp_path / "other" / "snli_1.0").exists()  # nothing half-extracted
