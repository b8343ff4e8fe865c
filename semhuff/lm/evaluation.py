"""Held-out perplexity of a language model (``evaluate``): exact, each layer's own normalised
log-probability of the targets, over the whole text with the hidden state carried along each row
(batches of ``batch`` rows); the cluster and in-cluster perplexity of a layer with clusters
(``cluster_log_prob``). ``semhuff-lm`` reports it after every epoch, ``semhuff-lm score`` on any
text (``generate.score_text``)."""
from __future__ import annotations

import math

import numpy as np
import torch

from .networks import LanguageModel
from .parallel import all_reduce_sum, current_group
from .report import HeldOut
from .settings import autocast
from .token_ids import batchify


def model_device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


@torch.no_grad()
def evaluate(model: LanguageModel, ids: np.ndarray, batch: int = 10, bptt: int = 20,
             precision: str = "fp32") -> HeldOut:
    """Exact held-out perplexity of ``ids`` (the hidden state carried along each row), on the
    model's device; ``precision``: the autocast the run trained under. A text shorter than
    ``batch`` windows (``bptt + 1`` tokens each) is read in fewer rows, none shorter than a
    window: a sentence is one row, every word after the first scored with all the words before
    it (cut into ``batch`` rows it would lose half its words, the rows' first ones)."""
    was_training = model.training
    model.eval()
    device = model_device(model)
    rows = min(batch, max(1, len(ids) // (bptt + 1)))
    data = torch.as_tensor(batchify(ids, rows)).to(device)
    world, rank = current_group()
    if world > 1:  # each rank scores its rows; the sums are added up below
        data = data[rank::world]
    # summed on the device, read back once at the end
    nll = cluster_nll = torch.zeros((), dtype=torch.float64, device=device)
    count = 0
    clustered = None
    state = None
    for t in range(0, data.shape[1] - 1 if len(data) else 0, bptt):
        x, y = data[:, t:t + bptt], data[:, t + 1:t + 1 + bptt]
        x = x[:, :y.shape[1]]
        with autocast(device, precision):
            out, state = model.hidden(x, state)
            h = out.reshape(-1, out.shape[-1])
            target = y.reshape(-1)
            scored = model.output(h, target).output
            part = model.output.cluster_log_prob(h, target)
        nll = nll - scored.double().sum()
        clustered = part is not None
        if clustered:
            cluster_nll = cluster_nll - part.double().sum()
        count += target.numel()
    model.train(was_training)
    nll, cluster_nll = float(nll), float(cluster_nll)
    if world > 1:
        nll, cluster_nll, count, any_clustered = all_reduce_sum(
            [nll, cluster_nll, count, float(bool(clustered))], device)
        count, clustered = int(count), any_clustered > 0
    mean = nll / count
    result = HeldOut(_exp(mean), mean, count)
    if clustered:
        result.cluster_perplexity = _exp(cluster_nll / count)
        result.in_cluster_perplexity = _exp((nll - cluster_nll) / count)
    return result


def _exp(x: float) -> float:
    return math.exp(x) if x < 700 else math.inf
