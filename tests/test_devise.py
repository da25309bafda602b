"""DeViSE pieces: hierarchical precision on a hand-built hierarchy, the hinge rank loss on hand
cases, skip-gram vectors on a toy corpus, word-vector files, and the model's two scores."""

import gc
import weakref

import numpy as np
import pytest
import torch

from orderlib.encoders.skipgram import SkipGramConfig, load_word_vectors, train_skipgram
from orderlib.eval.hierarchy import hierarchical_precision, hit_at_k, hops_from, neighbours, ring_set
from orderlib.losses import hinge_rank

# 0 entity; 1 animal -> 0; 2 pet -> 1; 3 canine -> 1; 4 dog -> 2, 3; 5 cat -> 2; 6 rock -> 0;
# 7 wolf -> 3; 8 pebble -> 6
PARENTS = [[], [0], [1], [1], [2, 3], [2], [0], [3], [6]]
ADJ = neighbours(PARENTS)


def test_rings_grow_through_non_candidates_and_keep_whole_rings():
    cand = {4, 5, 7, 8}  # dog, cat, wolf, pebble
    assert ring_set(4, cand, 1, ADJ) == {4}  # ring 0: the true label
    # ring 1 of dog: pet, canine (not candidates); ring 2: animal, cat, wolf -> {dog, cat, wolf}
    assert ring_set(4, cand, 2, ADJ) == {4, 5, 7}
    assert ring_set(4, cand, 3, ADJ) == {4, 5, 7}  # the whole ring 2 is kept
    assert ring_set(4, cand, 4, ADJ) == {4, 5, 7, 8}  # rings 3-5 reach pebble through entity and rock
    assert ring_set(4, cand, 9, ADJ) == cand  # fewer candidates than k in the whole graph: all of them
    assert ring_set(6, {4, 5}, 1, ADJ) == {4, 5}  # the true label need not be a candidate


def test_hierarchical_precision_and_hit_hand_case():
    ranked = np.array([[4, 5, 8, 7], [8, 4, 5, 7]])  # predictions for two dog images
    true = np.array([4, 4])
    hit = hit_at_k(ranked, true, (1, 2))
    assert hit == {"hit@1": 50.0, "hit@2": 100.0}
    hp = hierarchical_precision(ranked, true, [4, 5, 7, 8], ADJ, (2, 4))
    # k=2: set {dog, cat, wolf}: image 1 top-2 {dog, cat} -> 1; image 2 {pebble, dog} -> 0.5
    # k=4: set all four: both 4/4 -> 1
    assert hp == {"hp@2": pytest.approx(0.75), "hp@4": pytest.approx(1.0)}


def test_hops():
    assert hops_from([4], ADJ, 2) == {4: 0, 2: 1, 3: 1, 1: 2, 5: 2, 7: 2}


def test_hinge_rank_hand_cases():
    scores = torch.tensor([[0.5, 0.45, 0.0, 0.48], [0.1, 0.9, 0.2, 0.3]])
    target = torch.tensor([0, 1])
    # image 0: violations 0.1 - 0.5 + s_j for j = 1, 2, 3: 0.05, -0.4, 0.08 -> sum 0.13; image 1: none
    assert hinge_rank(scores, target, 0.1, first_violator=False).item() == pytest.approx(0.13 / 2)
    # first violator: image 0 contributes 0.05 or 0.08 (which one depends on the random order)
    seen = {
        round(hinge_rank(scores, target, 0.1, generator=torch.Generator().manual_seed(s)).item() * 2, 4)
        for s in range(40)
    }
    assert seen == {0.05, 0.08}
    assert hinge_rank(torch.tensor([[1.0, 0.0]]), torch.tensor([0]), 0.1).item() == 0.0


def _toy_corpus(n=600, seed=0):
    """Two topics that never share context words: animals and tools."""
    rng = np.random.default_rng(seed)
    animals, tools = ["dog", "cat", "horse", "cow"], ["hammer", "saw", "drill", "wrench"]
    a_ctx, t_ctx = ["fur", "barn", "milk", "tail", "paw"], ["nail", "wood", "steel", "bolt", "shop"]
    out = []
    for _ in range(n):
        words, ctx = (animals, a_ctx) if rng.random() < 0.5 else (tools, t_ctx)
        out.append(list(rng.choice(words, 2)) + list(rng.choice(ctx, 4)))
    return out


def test_skipgram_puts_same_topic_words_closer_than_other_topic_words():
    wv = train_skipgram(_toy_corpus(), SkipGramConfig(dim=16, window=3, epochs=20, subsample=0, seed=0))
    assert np.allclose(np.linalg.norm(wv.vectors, axis=1), 1, atol=1e-5)
    same = np.mean([wv.similarity("dog", "cat"), wv.similarity("hammer", "saw"), wv.similarity("cow", "horse")])
    other = np.mean([wv.similarity("dog", "saw"), wv.similarity("hammer", "cat"), wv.similarity("cow", "drill")])
    assert same > other + 0.3
    again = train_skipgram(_toy_corpus(), SkipGramConfig(dim=16, window=3, epochs=20, subsample=0, seed=0))
    assert np.array_equal(again.vectors, wv.vectors)  # seeded, one worker: repeatable


def test_devise_scores_dot_and_order():
    from orderlib.encoders.cnn import ItemCNN
    from orderlib.encoders.devise import DeViSE
    from orderlib.penalties import order_violation_matrix

    torch.manual_seed(0)
    cnn = ItemCNN(10, width=4)
    labels = torch.rand(5, 6)
    dot = DeViSE(cnn, 6, "dot")
    e = dot.embed_features(torch.randn(3, cnn.channels))
    assert torch.allclose(dot.scores(e, labels), e @ labels.T)
    order = DeViSE(cnn, 6, "order")
    e = order.embed_features(torch.randn(3, cnn.channels))
    assert (e >= 0).all()
    assert torch.allclose(order.scores(e, labels), -order_violation_matrix(e, labels))
    with pytest.raises(ValueError, match="unknown score"):
        DeViSE(cnn, 6, "cosine")


def test_train_devise_learns_and_leaves_the_given_cnn_alone(toy_items):
    from orderlib.encoders.cnn import CNNConfig
    from orderlib.training.devise import DeViSEConfig, embed_images, rank_labels, train_devise
    from orderlib.training.item_cnn import train_item_cnn

    x, y = toy_items(600)
    hx, hy = toy_items(200, seed=1)
    cnn, _ = train_item_cnn(x, y, hx, hy, CNNConfig(epochs=2, batch=64, width=4), progress=False)
    before = {k: v.clone() for k, v in cnn.state_dict().items()}
    labels = torch.nn.functional.normalize(torch.randn(3, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    model, hist = train_devise(
        cnn, x, y, hx, hy, labels, DeViSEConfig(epochs=4, finetune_epochs=1, batch=64, lr=1e-2), progress=False
    )
    assert hist[-1]["stage"] == "fine-tuned" and len(hist) == 5
    pred = rank_labels(model, embed_images(model, hx), labels, 1)[:, 0]
    assert (pred == hy).mean() > 0.8
    assert all(torch.equal(before[k], v) for k, v in cnn.state_dict().items())  # fine-tuned a copy


def test_image_side_is_kept_per_model_and_images_until_the_parameters_change():
    from orderlib.encoders.cnn import ItemCNN
    from orderlib.encoders.devise import DeViSE
    from orderlib.experiments.devise import image_side
    from orderlib.training.devise import embed_images

    torch.manual_seed(0)
    model = DeViSE(ItemCNN(10, width=4).eval(), 6, "dot")
    images = np.random.default_rng(0).integers(0, 256, (50, 28, 28), dtype=np.uint8)
    first = image_side(model, images)
    assert torch.equal(first, embed_images(model, images))
    assert image_side(model, images.copy()) is first  # same pixels, same model: kept
    other = image_side(model, images[::-1].copy())
    assert torch.equal(other, embed_images(model, images[::-1].copy()))
    with torch.no_grad():
        model.M.weight.add_(1.0)  # a training step changes the model: computed again
    again = image_side(model, images[::-1].copy())
    assert not torch.equal(again, other) and torch.equal(again, embed_images(model, images[::-1].copy()))
    alive = weakref.ref(model)
    del model
    gc.collect()
    assert alive() is None  # image_side keeps no model alive


class Syn:
    """The two things label-vector builders read from an NLTK synset."""

    def __init__(self, lemmas, gloss):
        self._l, self._g = lemmas, gloss

    def lemma_names(self):
        return self._l

    def definition(self):
        return self._g


def test_definition_vectors_bring_synsets_with_related_glosses_together():
    from collections import Counter

    from orderlib.encoders.skipgram import definition_vectors

    corpus = _toy_corpus()
    wv = train_skipgram(corpus, SkipGramConfig(dim=16, window=3, epochs=20, subsample=0, seed=0))
    syns = [
        Syn(["kitten"], "a young cat with fur"),
        Syn(["puppy"], "a young dog with a tail"),
        Syn(["mallet"], "a hammer of wood"),
        Syn(["nothing_known"], "zzz"),
    ]
    vec = definition_vectors(wv, syns, Counter(w for s in corpus for w in s))
    assert vec.shape == (4, 16) and np.allclose(np.linalg.norm(vec[:3], axis=1), 1, atol=1e-5)
    assert vec[0] @ vec[1] > vec[0] @ vec[2] and vec[1] @ vec[0] > vec[1] @ vec[2]


def test_lemma_vectors_from_a_word_vector_file(tmp_path):
    from orderlib.encoders.skipgram import lemma_vectors

    path = tmp_path / "glove.txt"
    path.write_text("gym_shoe 1 0 0\ngym 0 1 0\nshoe 0 0 1\nsandal 0 1 1\nfoot 3 4 0\n")
    wv = load_word_vectors(path)
    vec = lemma_vectors(
        wv,
        [
            Syn(["gym_shoe", "sneaker"], "x"),
            Syn(["tennis_shoe"], "x"),
            Syn(["Sandal"], "x"),
            Syn(["flip-flop"], "worn on the foot"),
            Syn(["zzz"], "qqq"),
        ],
    )
    assert np.allclose(vec[0], [1, 0, 0])  # the phrase itself
    assert np.allclose(vec[1], [0, 0, 1])  # "tennis" unknown: the known part, "shoe"
    assert np.allclose(vec[2], np.array([0, 1, 1]) / np.sqrt(2))  # lemma case folded
    assert np.allclose(vec[3], [0.6, 0.8, 0])  # falls back to the gloss
    assert np.allclose(vec[4], 0)  # nothing known


def test_sense_vectors_follow_every_lemma_and_the_gloss(tmp_path):
    from orderlib.encoders.skipgram import sense_vectors

    # most frequent first, as GloVe files list words: "the" is weighted far below "cloth"
    path = tmp_path / "glove.txt"
    path.write_text("the 0 0 5\njersey 1 0 0\nt-shirt 0 1 0\ncloth 0 0 1\nstate 1 1 0\n")
    wv = load_word_vectors(path)
    jersey_shirt, jersey_state, nothing = sense_vectors(
        wv,
        [Syn(["jersey", "T-shirt", "tee_shirt"], "the cloth"), Syn(["jersey"], "the state"), Syn(["zzz"], "qqq")],
    )
    # lemmas: jersey and t-shirt known, "tee_shirt" has no known part; gloss ~ cloth (SIF-weighted)
    lemma, gloss = np.array([0.5, 0.5, 0]), np.array([0, 0, 1.0])
    weights = [1e-3 / (1e-3 + 1 / (r * np.log(1.78 * 5))) for r in (1, 4)]  # the, cloth
    gloss = (weights[0] * np.array([0, 0, 1.0]) + weights[1] * gloss) / sum(weights)
    want = lemma + gloss
    assert np.allclose(jersey_shirt, want / np.linalg.norm(want), atol=1e-6)
    assert jersey_shirt[1] > 0 and jersey_state[1] > 0 and jersey_shirt @ jersey_state < 0.99  # senses differ
    assert np.allclose(nothing, 0)
    only_lemmas = sense_vectors(wv, [Syn(["jersey", "T-shirt"], "the cloth")], gloss_weight=0)
    assert np.allclose(only_lemmas[0], np.array([1, 1, 0]) / np.sqrt(2))


def test_trained_models_record_their_provenance_and_a_reload_says_loaded(toy_items, tmp_path):
    from orderlib.encoders.cnn import CNNConfig
    from orderlib.reports import git_commit
    from orderlib.training.devise import DeViSEConfig, train_devise
    from orderlib.training.item_cnn import train_item_cnn

    x, y = toy_items(200)
    hx, hy = toy_items(60, seed=1)
    labels = torch.nn.functional.normalize(torch.randn(3, 8, generator=torch.Generator().manual_seed(0)), dim=1)

    def run():
        cnn, _ = train_item_cnn(
            x, y, hx, hy, CNNConfig(epochs=1, batch=64, width=4), progress=False, checkpoint=tmp_path / "cnn.pt"
        )
        model, _ = train_devise(
            cnn,
            x,
            y,
            hx,
            hy,
            labels,
            DeViSEConfig(epochs=2, finetune_epochs=1, batch=64),
            progress=False,
            checkpoint_dir=tmp_path,
        )
        return cnn.provenance, model.provenance

    (cnn1, dev1), (cnn2, dev2) = run(), run()
    assert cnn1["trained_at"] == dev1["trained_at"] == git_commit()
    assert not cnn1["loaded_from_checkpoint"] and not dev1["loaded_from_checkpoint"]
    assert dev1["epochs_run"] == 3 and dev1["train_seconds"] > 0
    assert cnn2["loaded_from_checkpoint"] and dev2["loaded_from_checkpoint"]
    assert dev2["train_seconds"] == dev1["train_seconds"] and dev2["trained_at"] == dev1["trained_at"]
