"""Small builders the LM layer tests share: a Zipf-shaped vocabulary and random weights."""
import numpy as np
import torch

from semhuff.vocab import Vocab


def zipf_vocab(n: int) -> Vocab:
    """``n`` words w0, w1, ... with counts 1000 / rank (at least 1), frequency-sorted."""
    counts = np.maximum((1000 / np.arange(1, n + 1)).astype(np.int64), 1)
    return Vocab([f"w{i}" for i in range(n)], counts, int(counts.sum()))


def randomise(layer, scale=0.5, seed=0):
    """Every parameter of ``layer`` drawn from N(0, scale^2) (a trained-looking layer)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).to(p) * scale)
    return layer
