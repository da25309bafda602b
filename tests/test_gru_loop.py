"""The CPU GRU loop of the sentence encoder gives what PyTorch's packed GRU gives."""

import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence

from orderlib.encoders.sentence import GRUSentenceEncoder, gru_last_hidden


def _packed(gru, x, lengths):
    return gru(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False))[1][0]


@pytest.mark.parametrize("lengths", [[5, 1, 3, 5, 2, 4], [3, 3, 3], [1], [2, 7, 1, 7, 4, 6, 3]])
def test_gru_loop_matches_packed_gru_values_and_gradients(lengths):
    g = torch.Generator().manual_seed(len(lengths))
    gru = nn.GRU(6, 8, batch_first=True)
    with torch.no_grad():
        for p in gru.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    lengths = torch.tensor(lengths)
    x = torch.randn(len(lengths), int(lengths.max()) + 2, 6, generator=g, requires_grad=True)  # padded past max
    w = torch.randn(len(lengths), 8, generator=g)
    ours, ref = gru_last_hidden(gru, x, lengths), _packed(gru, x, lengths)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-6)
    params = [x, *gru.parameters()]
    for a, b in zip(torch.autograd.grad((ours * w).sum(), params), torch.autograd.grad((ref * w).sum(), params)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_gru_recurrence_backward_is_the_exact_gradient():
    """The hand-written backward (W_hh gradient as one product over all steps) against finite
    differences in float64, with rows finishing at different steps."""
    from orderlib.encoders.sentence import GRURecurrence

    g = torch.Generator().manual_seed(3)
    sizes, d = [4, 4, 3, 1], 5  # 4 sequences of lengths 4, 3, 3, 2 ... packed: rows per step
    gi = torch.randn(sum(sizes), 3 * d, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3 * d, d, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3 * d, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda gi, w, b: GRURecurrence.apply(gi, w, b, sizes), (gi, w, b))


def test_encoder_ignores_padding_and_keeps_the_input_order():
    torch.manual_seed(0)
    enc = GRUSentenceEncoder(20, 4, 5, absolute=False)
    tokens = torch.tensor([[3, 4, 5, 0], [7, 0, 0, 0], [3, 4, 5, 9]])
    out = enc(tokens, torch.tensor([3, 1, 4]))
    alone = enc(tokens[:1, :3], torch.tensor([3]))  # the first sentence without padding or neighbours
    torch.testing.assert_close(out[:1], alone)
    assert not torch.allclose(out[0], out[2])  # the 4th token of the last sentence is read


def test_gru_loop_refuses_what_it_does_not_compute():
    with pytest.raises(ValueError, match="one-layer"):
        gru_last_hidden(nn.GRU(3, 4, num_layers=2, batch_first=True), torch.zeros(1, 2, 3), torch.tensor([2]))
