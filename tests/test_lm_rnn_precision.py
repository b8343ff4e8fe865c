"""The recurrent networks under bf16 autocast: CUDA autocast runs cuDNN's RNNs in float16
whatever its dtype (torch's AutocastRNN.cpp), which overflowed to NaN in the LSTM's backward
on an H200 (docs/gpu.md); the networks then run the cell in float32. Without a GPU the rule is
forced on (``_cudnn_rnn_in_half``) and checked against the float32 network."""
from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from semhuff.lm import make_output_layer  # noqa: E402
from semhuff.lm import networks  # noqa: E402
from semhuff.lm.networks import GRULanguageModel, LSTMLanguageModel  # noqa: E402


def _model(cls, V=40, H=16):
    torch.manual_seed(0)
    counts = torch.arange(V, 0, -1).tolist()
    layer = make_output_layer("full", H, counts=counts)
    return cls(V, layer, emb=H, hidden=H, sparse_embedding=False)


def test_not_on_a_cpu_tensor():
    x = torch.zeros(2, 3, 4)
    with torch.autocast("cpu", torch.bfloat16):
        assert not networks._cudnn_rnn_in_half(x)


@pytest.mark.parametrize("cls", [LSTMLanguageModel, GRULanguageModel])
def test_the_cell_runs_in_float32_when_autocast_would_halve_it(cls, monkeypatch):
    model = _model(cls)
    reference = copy.deepcopy(model)
    ids = torch.randint(0, 40, (3, 5))
    want, want_state = reference.hidden(ids)  # float32, no autocast
    monkeypatch.setattr(networks, "_cudnn_rnn_in_half", lambda x: True)
    with torch.autocast("cpu", torch.bfloat16):
        got, state = model.hidden(ids)
        # a carried state goes back in (as the trainer's next step), float32 again
        again, _ = model.hidden(ids, state)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    states = state if isinstance(state, tuple) else (state,)
    want_states = want_state if isinstance(want_state, tuple) else (want_state,)
    for s, w in zip(states, want_states):
        torch.testing.assert_close(s, w, rtol=0, atol=0)
    assert again.dtype == torch.float32
    # the gradient flows to the embedding through the float32 cell
    again.sum().backward()
    assert model.embedding.weight.grad is not None
    assert torch.isfinite(model.embedding.weight.grad).all()
