import json

import numpy as np
import pytest
import torch

from orderlib.data import entailment as E
from orderlib.encoders.sentence import PAD, UNK, GRUSentenceEncoder, Vocab
from orderlib.paths import DataError


def _jsonl(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def _official_fixture(tmp_path):
    d = tmp_path / "snli_1.0"
    d.mkdir()
    recs = [
        {"sentence1": "A man plays a guitar.", "sentence2": "A man plays music.", "gold_label": "entailment"},
        {"sentence1": "A man plays a guitar.", "sentence2": "A woman sleeps.", "gold_label": "contradiction"},
        {"sentence1": "A man plays a guitar.", "sentence2": "The man is famous.", "gold_label": "neutral"},
        {"sentence1": "Kids run.", "sentence2": "Children move.", "gold_label": "-"},
    ]
    for split in ("train", "dev", "test"):
        _jsonl(d / f"snli_1.0_{split}.jsonl", recs)
    return d


def test_official_jsonl_layout_and_label_mapping(tmp_path):
    _official_fixture(tmp_path)
    s = E.load_split("snli_1.0", "dev", tmp_path)
    assert len(s) == 3 and s.labels.tolist() == [0, 2, 1]  # '-' dropped by default
    assert s.positive.tolist() == [True, False, False]  # only entailment is positive
    kept = E.load_split("snli_1.0", "train", tmp_path, no_consensus="negative")
    assert len(kept) == 4 and kept.labels[3] == 3 and not kept.positive[3]
    assert kept.label_counts() == {"entailment": 1, "neutral": 1, "contradiction": 1, "-": 1}


@pytest.mark.parametrize(
    "line,message",
    [
        ('{"sentence1": "a", "sentence2": "b"', "not a JSON object"),
        ('{"sentence1": "a", "gold_label": "entailment"}', "missing field"),
        ('{"sentence1": "a", "sentence2": "b", "gold_label": "maybe"}', "unknown gold_label"),
    ],
)
def test_malformed_jsonl_names_file_and_line(tmp_path, line, message):
    good = {"sentence1": "a", "sentence2": "b", "gold_label": "entailment"}
    p = _jsonl(tmp_path / "snli_1.0_dev.jsonl", [good, line])
    with pytest.raises(DataError, match=rf"snli_1.0_dev.jsonl:2: {message}"):
        E.read_snli_jsonl(p)


@pytest.mark.parametrize(
    "line,message",
    [
        ("a premise\ta hypothesis", "expected 3 tab-separated fields, found 2"),
        ("a premise\ta hypothesis\tentailment", "label must be 0, 1 or 2"),
    ],
)
def test_malformed_tsv_names_file_and_line(tmp_path, line, message):
    p = tmp_path / "dev.tsv"
    p.write_text("x\ty\t0\n" + line + "\n")
    with pytest.raises(DataError, match=rf"dev.tsv:2: {message}"):
        E.read_pairs_tsv(p)


def test_missing_dataset_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("ORDERLIB_DATA", str(tmp_path))
    monkeypatch.setattr(E, "repo_root", lambda: tmp_path / "nowhere" / "repo")
    with pytest.raises(DataError, match="dataset 'snli_1.0' not found; looked in"):
        E.dataset_dir("snli_1.0")
    with pytest.raises(DataError, match="no such file"):
        E.read_pairs_tsv(tmp_path / "absent.tsv")


@pytest.mark.skipif(
    not (E.available("snli") and E.available("sick")), reason="SNLI/SICK not found. " + E.how_to_get("snli", "sick")
)
def test_real_snli_and_sick_splits():
    """The TSV copies where they are, else the official releases: the same pairs ('-' labels dropped)."""
    test = E.load_pairs("snli", "test")
    assert len(test) == 9824
    assert test.label_counts() == {"entailment": 3368, "neutral": 3219, "contradiction": 3237}
    assert round(100 * (1 - test.positive.mean()), 1) == 65.7  # the 2-class majority baseline
    assert len(E.load_pairs("snli", "dev")) == 9842
    assert [len(E.load_pairs("sick", s)) for s in ("train", "dev", "test")] == [4439, 495, 4906]


def test_missing_snli_says_where_to_download_it_and_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ORDERLIB_DATA", str(tmp_path))
    monkeypatch.delenv("ORDERLIB_SHARED_DATA", raising=False)
    monkeypatch.setattr(E, "repo_root", lambda: tmp_path / "nowhere" / "repo")
    with pytest.raises(DataError) as exc:
        E.load_pairs("snli", "test")
    message = str(exc.value)
    assert f"https://nlp.stanford.edu/projects/snli/ and unzip it in {tmp_path} (it holds snli_1.0/)" in message
    assert message.index("snli_1.0.zip") < message.index("ORDERLIB_SHARED_DATA")  # the download first
    assert "put its SICK.txt in" in E.how_to_get("sick") and "zenodo.org/records/2787612" in E.how_to_get("sick")
    assert "ORDERLIB_SHARED_DATA" not in E.how_to_get("snli", root=tmp_path)  # a folder given: only that folder


def test_tokenize_and_holdout():
    assert E.tokenize("The man's cart, corn-on-the-cob.") == ["the", "man", "s", "cart", "corn", "on", "the", "cob"]
    tr, ho = E.holdout_split(100, 0.1, seed=0)
    assert len(ho) == 10 and len(tr) == 90 and not set(tr) & set(ho)
    assert np.array_equal(ho, E.holdout_split(100, 0.1, seed=0)[1])
    assert not np.array_equal(ho, E.holdout_split(100, 0.1, seed=1)[1])


def test_vocab_encode_pads_and_marks_unknown():
    v = Vocab.build([["a", "b", "a"], ["c"]], min_count=2)
    assert v.words == ["<pad>", "<unk>", "a"]
    tok, lens = v.encode([["a", "z", "a"], [], ["a"]])
    assert tok.tolist() == [[2, UNK, 2], [UNK, PAD, PAD], [2, PAD, PAD]] and lens.tolist() == [3, 1, 1]


def test_gru_encoder_ignores_padding_and_is_nonnegative():
    torch.manual_seed(0)
    enc = GRUSentenceEncoder(10, word_dim=4, dim=6)
    tok = torch.tensor([[3, 4, 5, 0, 0], [3, 4, 5, 6, 7]])
    h = enc(tok, torch.tensor([3, 5]))
    assert h.shape == (2, 6) and (h >= 0).all()
    alone = enc(torch.tensor([[3, 4, 5]]), torch.tensor([3]))
    assert torch.allclose(h[0], alone[0], atol=1e-6)  # padding does not change the state
    unit = GRUSentenceEncoder(10, 4, 6, absolute=False, normalize=True)(tok, torch.tensor([3, 5]))
    assert torch.allclose(unit.norm(dim=-1), torch.ones(2), atol=1e-6) and (unit < 0).any()
