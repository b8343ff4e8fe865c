"""A decoder-only Transformer language model over any ``semhuff.lm`` output layer
(``semhuff-lm --arch transformer``): token embedding (+ a projection when ``emb != hidden``) +
learned positions -> ``layers`` pre-LayerNorm blocks (``torch.nn.TransformerEncoderLayer``,
``norm_first=True``, causal self-attention, GELU, feed-forward 4 x width) -> a final LayerNorm
-> dropout -> the output layer, the thing compared.

It has ``networks.LanguageModel``'s interface, so the trainer, ``evaluate`` and the generators
take it as they are: ``hidden(ids, state=None) -> (outputs (batch, time, hidden), None)`` and
``forward(ids, targets, state=None) -> (the output layer's LayerOutput, None)``.

Its "state" is always None: no memory is carried from one batch to the next. The trainer cuts
the text into bptt windows and each window is its own context (position 0 starts afresh), in
training and in held-out scoring alike; carrying keys and values across windows
(Transformer-XL) would make positions past ``max_len`` and a different model. Sampling uses a
growing context window instead (``semhuff.lm.generate``).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..errors import OptionError
from ..options import Option
from .networks import register_lm_network


def _at_least_one(value) -> Optional[str]:
    return None if isinstance(value, int) and not isinstance(value, bool) and value >= 1 \
        else "must be an integer >= 1"


@register_lm_network("transformer")
class TransformerLanguageModel(nn.Module):
    """``TransformerLanguageModel(n_words, output, emb=256, hidden=256, layers=2, heads=4,
    dropout=0.0, max_len=512, sparse_embedding=True)``: ``hidden`` is the model's width
    (``heads`` must divide it), ``max_len`` the longest window it takes (the learned positions'
    number). ``sparse_embedding``: the token embedding's gradient as a sparse tensor (Adagrad /
    SGD take it), as in ``RecurrentLanguageModel``; the positions' gradient is dense."""

    # the settings this network takes beyond (emb, hidden, dropout), declared once for the
    # trainer's and semhuff-lm's option handling
    OPTIONS = (
        Option("layers", int, 2, "Transformer blocks", check=_at_least_one),
        Option("heads", int, 4, "attention heads per block (must divide --hidden)",
               check=_at_least_one),
        Option("max_len", int, 512, "the longest context window (learned positions); --bptt "
               "must not exceed it", metavar="TOKENS", check=_at_least_one),
    )

    def __init__(self, n_words: int, output: nn.Module, emb: int = 256, hidden: int = 256,
                 layers: int = 2, heads: int = 4, dropout: float = 0.0, max_len: int = 512,
                 sparse_embedding: bool = True):
        super().__init__()
        for name, value in (("n_words", n_words), ("emb", emb), ("hidden", hidden),
                            ("layers", layers), ("heads", heads), ("max_len", max_len)):
            if _at_least_one(value):
                raise OptionError(f"{name} must be an integer >= 1, got {value!r}")
        if hidden % heads:
            raise OptionError(f"heads ({heads}) must divide the width hidden ({hidden}): each "
                              f"head gets hidden / heads dimensions")
        if not 0 <= dropout < 1:
            raise OptionError(f"dropout must be in [0, 1), got {dropout!r}")
        width = getattr(output, "in_features", hidden)
        if width != hidden:
            raise OptionError(f"the output layer takes {width} inputs, the network gives "
                              f"hidden = {hidden}")
        self.max_len = max_len
        self.embedding = nn.Embedding(n_words, emb, sparse=sparse_embedding)
        self.project = nn.Linear(emb, hidden, bias=False) if emb != hidden else nn.Identity()
        self.position = nn.Embedding(max_len, hidden)
        # blocks made one by one (nn.TransformerEncoder deep-copies one: every block would
        # start from the same weights)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(hidden, heads, 4 * hidden, dropout, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)  # pre-LN blocks leave the residual stream un-normed
        self.dropout = nn.Dropout(dropout)
        self.output = output
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)  # as RecurrentLanguageModel
        nn.init.normal_(self.position.weight, std=0.02)

    def hidden(self, ids: torch.Tensor, state=None):
        """(outputs (batch, time, hidden), None): position t sees ids[:, :t + 1] only."""
        if state is not None:
            raise OptionError("the Transformer LM carries no state between windows; pass "
                              "state=None")
        if ids.dim() != 2:
            raise OptionError(f"ids must be (batch, time), got shape {tuple(ids.shape)}")
        length = ids.shape[1]
        if length > self.max_len:
            raise OptionError(f"a window of {length} tokens is longer than max_len "
                              f"{self.max_len}: lower --bptt or raise --max-len")
        positions = torch.arange(length, device=ids.device)
        x = self.project(self.embedding(ids)) + self.position(positions)
        # True above the diagonal: position t may not attend to t' > t
        mask = torch.ones(length, length, dtype=torch.bool, device=ids.device).triu(1)
        for block in self.blocks:
            x = block(x, src_mask=mask, is_causal=True)
        return self.dropout(self.norm(x)), None

    def forward(self, ids, targets, state=None):
        out, state = self.hidden(ids, state)
        return self.output(out, targets), state
