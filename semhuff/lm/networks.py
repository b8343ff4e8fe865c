"""The language models the LM trainer trains, by name (``LM_NETWORKS``, ``register_lm_network``;
``semhuff-lm --arch``): embedding -> one recurrent layer -> dropout -> any output layer of
``semhuff.lm``: an LSTM as in the self-organized HSM paper (Shen et al. §4) or a GRU as in the
p-tHSM poster (Jiang et al.), ``RecurrentLanguageModel`` with its ``CELL``; ``transformer.py``
the Transformer. In each the output layer is the thing compared.

A network class takes ``(n_words, output, emb=, hidden=, dropout=, **options)`` (``output`` the
output layer, kept as ``self.output``; its inputs are ``hidden`` wide; ``options`` the ones it
declares in ``OPTIONS``, as the output layers do: ``semhuff-lm`` makes their flags) and has
``embedding`` (its input embeddings), ``hidden(ids, state) -> (outputs (batch, time, hidden),
state)`` (``state`` None, a tensor or a tuple of tensors, which the trainer detaches between
batches: ``map_state``) and ``forward(ids, targets, state) -> (the output layer's LayerOutput,
state)``: ``LanguageModel``. A ``--plugin`` module adds one with ``@register_lm_network("name")``.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple, Type

import torch
from torch import nn

from ..errors import OptionError
from ..options import Option, check_settings, declared_by_owner
from . import _moved

LM_NETWORKS: Dict[str, Type[nn.Module]] = {}
DEFAULT_NETWORK = "lstm"  # semhuff-lm's --arch when none is named


class LanguageModel(Protocol):
    """What the trainer, the evaluation and the generators use of a network."""

    embedding: nn.Embedding
    output: nn.Module

    def hidden(self, ids: torch.Tensor, state=None): ...

    def forward(self, ids: torch.Tensor, targets: torch.Tensor, state=None): ...


def map_state(state, fn: Callable[[torch.Tensor], torch.Tensor]):
    """``fn`` applied to a recurrent state's tensors: (h, c) for an LSTM, h for a GRU, None for
    a network that carries none."""
    if state is None:
        return None
    if torch.is_tensor(state):
        return fn(state)
    return type(state)(map_state(x, fn) for x in state)


def detach_state(state):
    """The recurrent state cut from the graph (between batches, in a checkpoint)."""
    return map_state(state, torch.Tensor.detach)


def register_lm_network(name: str):
    """Class decorator: make a language-model class available as ``LMSettings(arch=name)`` and
    ``semhuff-lm --arch name``."""
    def register(cls):
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise TypeError("register_lm_network decorates torch.nn.Module subclasses")
        if not callable(getattr(cls, "hidden", None)):
            raise TypeError(f"{cls.__name__} lacks hidden(ids, state) (an LM network has "
                            f"hidden and forward)")
        if LM_NETWORKS.get(name, cls) is not cls:
            raise ValueError(f"LM network name {name!r} is taken by {LM_NETWORKS[name]!r}")
        LM_NETWORKS[name] = cls
        return cls
    return register


def network_options(cls) -> Tuple[Option, ...]:
    """The settings network class ``cls`` takes beyond ``(emb, hidden, dropout)``."""
    return tuple(getattr(cls, "OPTIONS", ()))


def declared_lm_network_options() -> Dict[str, Tuple[Option, List[str]]]:
    """Every registered network's options by name: the declaration and the networks taking it."""
    return declared_by_owner(LM_NETWORKS, network_options)


def check_lm_network_settings(name: str, settings: Dict[str, Any]) -> Dict[str, Any]:
    """``settings`` for network ``name``, validated by its declarations (``OPTIONS``); one it
    does not take is an ``OptionError`` naming it."""
    return check_settings(f"the {name} network", network_options(lm_network_class(name)),
                          settings)


def recurrent_cells() -> Dict[str, Type[nn.Module]]:
    """Each registered recurrent network's cell (its ``CELL``) by name."""
    return {name: cls.CELL for name, cls in LM_NETWORKS.items() if hasattr(cls, "CELL")}


def lm_network_class(name: str) -> Type[nn.Module]:
    try:
        return LM_NETWORKS[name]
    except (KeyError, TypeError):
        raise OptionError(f"arch must be one of {', '.join(sorted(LM_NETWORKS))}, got "
                          f"{name!r}") from None


class RecurrentLanguageModel(nn.Module):
    """``forward(ids, targets, state)`` -> (the output layer's ``LayerOutput``, the new state);
    ``hidden(ids, state)`` -> (the recurrent layer's outputs, state), for timing the output
    layer apart. ``CELL``: the recurrent layer's class (a subclass's), kept as ``rnn``.
    ``sparse_embedding``: the embedding's gradient as a sparse tensor (Adagrad / SGD take it;
    only the batch's rows then change, as the tree layers' sparse rows)."""

    CELL: Type[nn.Module] = nn.LSTM

    def __init__(self, n_words: int, output: nn.Module, emb: int = 256, hidden: int = 256,
                 dropout: float = 0.0, sparse_embedding: bool = True, cell: Optional[str] = None):
        super().__init__()
        cell_class = self.CELL
        if cell is not None:  # the former way to a GRU
            warnings.warn(f"{type(self).__name__}(cell=...) is now the network of that name, "
                          f"lm_network_class(cell) (the former keyword works for one more "
                          f"release)", DeprecationWarning, stacklevel=2)
            cell_class = lm_network_class(cell).CELL
        self.embedding = nn.Embedding(n_words, emb, sparse=sparse_embedding)
        self.rnn = cell_class(emb, hidden, num_layers=1, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.output = output
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)
        # files saved by earlier versions hold the recurrent layer as "lstm", whatever its cell
        self._register_load_state_dict_pre_hook(_former_rnn_keys)

    @property
    def lstm(self) -> nn.Module:
        warnings.warn("a network's .lstm is now .rnn (the former name works for one more "
                      "release)", DeprecationWarning, stacklevel=2)
        return self.rnn

    def hidden(self, ids: torch.Tensor, state=None):
        x = self.embedding(ids)
        if _cudnn_rnn_in_half(x):
            # CUDA autocast runs cuDNN's RNNs in float16 whatever its dtype (torch's
            # AutocastRNN.cpp casts to kHalf): under bf16 autocast, with no loss scaling, the
            # LSTM's backward overflowed to NaN on an H200 within 3 steps (docs/gpu.md). The
            # cell in float32 instead (decided: exact and always available; the output layer,
            # where the time goes, keeps bf16)
            with torch.autocast(x.device.type, enabled=False):
                out, state = self.rnn(x.float(), _as_float(state))
        else:
            out, state = self.rnn(x, state)
        return self.dropout(out), state

    def forward(self, ids, targets, state=None):
        out, state = self.hidden(ids, state)
        return self.output(out, targets), state


def _cudnn_rnn_in_half(x: torch.Tensor) -> bool:
    """Whether autocast would run the recurrent layer on ``x`` in float16 without being asked
    to: CUDA autocast in another dtype (bf16), cuDNN on."""
    if not (x.is_cuda and torch.backends.cudnn.enabled):
        return False
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4
        return torch.is_autocast_enabled("cuda") and \
            torch.get_autocast_dtype("cuda") != torch.float16
    return torch.is_autocast_enabled() and torch.get_autocast_gpu_dtype() != torch.float16


def _as_float(state):
    """A recurrent state ((h, c), h or None) in float32."""
    if state is None:
        return None
    if torch.is_tensor(state):
        return state.float()
    return tuple(s.float() for s in state)


def _former_rnn_keys(state_dict, prefix, *args) -> None:
    old = prefix + "lstm."
    for key in [k for k in state_dict if k.startswith(old)]:
        state_dict[prefix + "rnn." + key[len(old):]] = state_dict.pop(key)


@register_lm_network("lstm")
class LSTMLanguageModel(RecurrentLanguageModel):
    """The self-organized HSM paper's network: an LSTM."""

    CELL = nn.LSTM


@register_lm_network("gru")
class GRULanguageModel(RecurrentLanguageModel):
    """The p-tHSM poster's network: a GRU."""

    CELL = nn.GRU


__getattr__ = _moved.moved_names(__name__)  # the former names (CELLS)
