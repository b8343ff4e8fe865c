"""The language model: embedding -> one recurrent layer -> dropout -> any output layer of
``semhuff.lm``: an LSTM as in the self-organized HSM paper (Shen et al. §4) or a GRU as in the
p-tHSM poster (Jiang et al.); in both the output layer is the thing compared."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn

CELLS = {"lstm": nn.LSTM, "gru": nn.GRU}


class LSTMLanguageModel(nn.Module):
    """``forward(ids, targets, state)`` -> (the output layer's ``LayerOutput``, the new state);
    ``hidden(ids, state)`` -> (the recurrent layer's outputs, state), for timing the output layer apart.
    ``sparse_embedding``: the embedding's gradient as a sparse tensor (Adagrad / SGD take it;
    only the batch's rows then change, as the tree layers' sparse rows)."""

    def __init__(self, n_words: int, output: nn.Module, emb: int = 256, hidden: int = 256,
                 dropout: float = 0.0, sparse_embedding: bool = True, cell: str = "lstm"):
        super().__init__()
        self.embedding = nn.Embedding(n_words, emb, sparse=sparse_embedding)
        # the attribute keeps its name for either cell, so saved LSTM models still load
        self.lstm = CELLS[cell](emb, hidden, num_layers=1, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.output = output
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)

    def hidden(self, ids: torch.Tensor, state: Optional[Tuple[torch.Tensor, torch.Tensor]] = None):
        out, state = self.lstm(self.embedding(ids), state)
        return self.dropout(out), state

    def forward(self, ids, targets, state=None):
        out, state = self.hidden(ids, state)
        return self.output(out, targets), state
