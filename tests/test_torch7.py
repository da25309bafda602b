import numpy as np
import pytest

from orderlib.data.torch7 import Torch7Generator, init_genrand


def test_first_draws_match_reference_mt19937():
    # mt19937ar.c's init_genrand(5489) (its default seed) starts 3499211612
    assert Torch7Generator(5489).random(1).tolist() == [3499211612]
    assert Torch7Generator(1).random(3).tolist() == [1791095845, 4282876139, 3093770124]


def test_draws_match_numpy_legacy_seeding_past_one_state():
    bits = np.random.MT19937(0)
    bits._legacy_seeding(1)  # numpy's init_genrand(1)
    g = Torch7Generator(1)
    got = np.r_[g.random(700), g.random(1300)]  # crosses two state regenerations, in two calls
    assert got.dtype == np.uint32
    assert np.array_equal(got, bits.random_raw(2000))


def test_init_genrand_key():
    key = init_genrand(1)
    assert key.shape == (624,) and key[0] == 1 and key[1] == (1812433253 * (1 ^ 0) + 1) & 0xFFFFFFFF


def test_manual_seed_resets_the_stream():
    g = Torch7Generator(7)
    first = g.random(5)
    g.random(1000)
    g.manual_seed(7)
    assert np.array_equal(g.random(5), first)
    g.manual_seed(2**32 + 7)  # THRandom_manualSeed keeps the low 32 bits
    assert np.array_equal(g.random(5), first)


def test_rand_is_one_draw_times_two_pow_minus_32_row_major():
    draws = Torch7Generator(3).random(6)
    u = Torch7Generator(3).rand(2, 3)
    assert u.shape == (2, 3) and u.dtype == np.float64
    assert np.array_equal(u.ravel(), draws.astype(np.float64) / 2**32)
    assert ((0 <= u) & (u < 1)).all()


def test_randperm_is_fisher_yates_over_raw_draws():
    n = 10
    draws = Torch7Generator(1).random(n - 1).tolist()
    r = list(range(n))
    for i, d in enumerate(draws):  # THTensor_(randperm): z = random() % (n - i); swap r[i], r[i + z]
        z = d % (n - i)
        r[i], r[i + z] = r[i + z], r[i]
    g = Torch7Generator(1)
    perm = g.randperm(n)
    assert perm.tolist() == r
    # torch.randperm(10) - 1 after torch.manualSeed(1), from torch7 cecaadf's THRandom.c compiled
    assert r == [5, 6, 1, 2, 0, 8, 9, 3, 7, 4]
    assert g.random(1).tolist() == Torch7Generator(1).random(n)[-1:].tolist()  # used n - 1 draws


def test_rand_after_randperm_matches_compiled_torch7():
    g = Torch7Generator(1)
    g.randperm(10)
    assert g.rand(3).tolist() == [0.23608897626399994, 0.09233859553933144, 0.39658072614111006]


def test_randperm_is_a_permutation():
    perm = Torch7Generator(0).randperm(5000)
    assert perm.dtype == np.int64
    assert np.array_equal(np.sort(perm), np.arange(5000))
    assert Torch7Generator(0).randperm(1).tolist() == [0]


def test_bad_arguments():
    with pytest.raises(ValueError, match="strictly positive"):
        Torch7Generator(1).randperm(0)
    with pytest.raises(ValueError, match="negative"):
        Torch7Generator(1).random(-1)
    with pytest.raises(ValueError, match="seed"):
        Torch7Generator(-1)
