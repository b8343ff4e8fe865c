"""The language model: embedding -> one-layer LSTM -> dropout -> any output layer of
``semhuff.lm`` (the self-organized HSM paper's model, Shen et al. §4: a one-layer LSTM whose
output layer is the thing compared)."""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import nn


class LSTMLanguageModel(nn.Module):
    """``forward(ids, targets, state)`` -> (the output layer's ``LayerOutput``, the new state);
    ``hidden(ids, state)`` -> (the LSTM's outputs, state), for timing the output layer apart.
    ``sparse_embedding``: the embedding's gradient as a sparse tensor (Adagrad / SGD take it;
    only the batch's rows then change, as the tree layers' sparse rows)."""

    def __init__(self, n_words: int, output: nn.Module, emb: int = 256, hidden: int = 256,
                 dropout: float = 0.0, sparse_embedding: bool = True):
        super().__init__()
        self.embedding = nn.Embedding(n_words, emb, sparse=sparse_embedding)
        self.lstm = nn.LSTM(emb, hidden, num_layers=1, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.output = output
        nn.init.uniform_(self.embedding.weight, -0.1, 0.1)

    def hidden(self, ids: torch.Tensor, state: Optional[Tuple[torch.Tensor, torch.Tensor]] = None):
        out, state = self.lstm(self.embedding(ids), state)
        return self.dropout(out), state

    def forward(self, ids, targets, state=None):
        out, state = self.hidden(ids, state)
        return self.output(out, targets), state
