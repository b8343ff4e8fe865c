"""The language models the LM trainer trains, by name (``LM_NETWORKS``, ``register_lm_network``;
``semhuff-lm --arch``): embedding -> one recurrent layer -> dropout -> any output layer of
``semhuff.lm``: an LSTM as in the self-organized HSM paper (Shen et al. §4) or a GRU as in the
p-tHSM poster (Jiang et al.); in both the output layer is the thing compared.

A network class takes ``(n_words, output, emb=, hidden=, dropout=, **options)`` (``output`` the
output layer, kept as ``self.output``; its inputs are ``hidden`` wide; ``options`` the ones it
declares in ``OPTIONS``, as the output layers do: ``semhuff-lm`` makes their flags) and has ``hidden(ids, state) ->
(outputs (batch, time, hidden), state)`` (``state`` None, a tensor or a tuple of tensors, which
the trainer detaches between batches) and ``forward(ids, targets, state) -> (the output layer's
LayerOutput, state)``. A ``--plugin`` module adds one with ``@register_lm_network("name")``.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Type

import torch
from torch import nn

from ..errors import OptionError
from ..options import Option, check_settings, declared_by_owner

LM_NETWORKS: Dict[str, Type[nn.Module]] = {}


def register_lm_network(name: str):
    """Class decorator: make a language-model class available as ``LMSettings(cell=name)`` and
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


def lm_network_class(name: str) -> Type[nn.Module]:
    try:
        return LM_NETWORKS[name]
    except (KeyError, TypeError):
        raise OptionError(f"cell must be one of {', '.join(sorted(LM_NETWORKS))}, got "
                          f"{name!r}") from None


@register_lm_network("lstm")
class LSTMLanguageModel(nn.Module):
    """``forward(ids, targets, state)`` -> (the output layer's ``LayerOutput``, the new state);
    ``hidden(ids, state)`` -> (the recurrent layer's outputs, state), for timing the output layer apart.
    ``sparse_embedding``: the embedding's gradient as a sparse tensor (Adagrad / SGD take it;
    only the batch's rows then change, as the tree layers' sparse rows)."""

    CELL = nn.LSTM

    def __init__(self, n_words: int, output: nn.Module, emb: int = 256, hidden: int = 256,
                 dropout: float = 0.0, sparse_embedding: bool = True, cell: Optional[str] = None):
        super().__init__()
        self.embedding = nn.Embedding(n_words, emb, sparse=sparse_embedding)
        cell_class = self.CELL if cell is None else CELLS[cell]
        # the attribute keeps its name for either cell, so saved LSTM models still load
        self.lstm = cell_class(emb, hidden, num_layers=1, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.output = output
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)

    def hidden(self, ids: torch.Tensor, state: Optional[Tuple[torch.Tensor, torch.Tensor]] = None):
        out, state = self.lstm(self.embedding(ids), state)
        return self.dropout(out), state

    def forward(self, ids, targets, state=None):
        out, state = self.hidden(ids, state)
        return self.output(out, targets), state


@register_lm_network("gru")
class GRULanguageModel(LSTMLanguageModel):
    """The same model with a GRU (the p-tHSM poster's); its state dict is the LSTM model's
    layout (the recurrent layer is still ``lstm``), so saved GRU models load."""

    CELL = nn.GRU


CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}  # the recurrent cells of the built-in networks
