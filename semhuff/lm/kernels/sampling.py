"""Drawing words from a layer's distribution, the same way for every layer: what ``sample``'s
arguments mean, on a whole distribution (the reference, and every layer's fallback) and on the
exact top candidates a tree or cluster search found (``tree_search``, ``cluster_search``).

The distribution drawn from, as Hugging Face's warpers apply it: the excluded words removed
and the rest renormalised; log-probabilities divided by ``temperature``; only the ``top_k``
most probable words kept; of those, the smallest set of the most probable whose probability
(renormalised) reaches ``top_p``; renormalised. Temperature 0 is the most probable word.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import torch

from ...errors import OptionError


def check_sampling(temperature, top_k, top_p, n_classes: int) -> Tuple[float, Optional[int],
                                                                      Optional[float]]:
    """The arguments checked: a one-line ``OptionError`` for any other."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or \
            not (math.isfinite(temperature) and temperature >= 0):
        raise OptionError(f"temperature must be >= 0 (0: the most probable word), got "
                          f"{temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int)
                              or top_k < 1):
        raise OptionError(f"top_k must be an integer >= 1 or None, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float))
                              or not 0 < top_p <= 1):
        raise OptionError(f"top_p must be in (0, 1] or None, got {top_p!r}")
    top_k = None if top_k is None or top_k >= n_classes else int(top_k)
    top_p = None if top_p is None or top_p >= 1 else float(top_p)
    return float(temperature), top_k, top_p


def check_k(k, n_classes: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n_classes:
        raise OptionError(f"k must be an integer in 1..{n_classes}, got {k!r}")
    return int(k)


def excluded_ids(exclude, n_classes: int, device) -> Optional[torch.Tensor]:
    """``exclude`` (word ids never drawn) as a sorted tensor without repeats, or None."""
    if exclude is None:
        return None
    ids = torch.as_tensor(exclude, dtype=torch.long).reshape(-1).unique()
    if ids.numel() == 0:
        return None
    if int(ids.min()) < 0 or int(ids.max()) >= n_classes:
        raise OptionError(f"exclude must be word ids in 0..{n_classes - 1}")
    if ids.numel() >= n_classes:
        raise OptionError("exclude leaves no word to draw")
    return ids.to(device)


def warped(log_prob: torch.Tensor, temperature: float, top_k: Optional[int],
           top_p: Optional[float], exclude: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(N, K) log-weights of the distribution drawn from (the module's docstring), -inf for the
    words it leaves out, from (N, K) log-probabilities sorted or not (temperature > 0)."""
    x = log_prob
    if exclude is not None:
        x = x.index_fill(1, exclude, -math.inf)
    x = x / temperature
    if top_k is not None and top_k < x.shape[1]:
        kth = x.topk(top_k, dim=1).values[:, -1:]
        x = x.masked_fill(x < kth, -math.inf)
    if top_p is not None:
        order = x.argsort(dim=1, descending=True)
        ranked = x.gather(1, order)
        p = torch.softmax(ranked, dim=1)
        before = p.cumsum(dim=1) - p  # the mass of the more probable words
        drop = before >= top_p
        x = x.scatter(1, order, ranked.masked_fill(drop, -math.inf))
    return x


def draw(log_weight: torch.Tensor, generator: Optional[torch.Generator]) -> torch.Tensor:
    """(N,) one index a row from softmax(log_weight) (rows with some finite entry)."""
    p = torch.softmax(log_weight if log_weight.dtype == torch.float64 else log_weight.float(),
                      dim=1)
    return torch.multinomial(p, 1, generator=generator).squeeze(1)


def sample_from_log_prob(log_prob: torch.Tensor, temperature: float, top_k, top_p,
                         exclude, generator) -> torch.Tensor:
    """(N,) words drawn from whole (N, V) log-probabilities: the reference form."""
    if temperature == 0:
        x = log_prob if exclude is None else log_prob.index_fill(1, exclude, -math.inf)
        return x.argmax(dim=1)
    return draw(warped(log_prob, temperature, top_k, top_p, exclude), generator)


def topk_from_log_prob(log_prob: torch.Tensor, k: int, exclude=None):
    x = log_prob if exclude is None else log_prob.index_fill(1, exclude, -math.inf)
    return x.topk(k, dim=1)


def drop_excluded(values: torch.Tensor, indices: torch.Tensor, exclude, k: int):
    """The first ``k`` of sorted candidates (N, K) that are not ``exclude``d (K >= k + the
    number excluded: enough remain)."""
    if exclude is None:
        return values[:, :k], indices[:, :k]
    out = torch.isin(indices, exclude)
    key = torch.where(out, -math.inf, values)
    order = key.argsort(dim=1, descending=True, stable=True)[:, :k]
    return values.gather(1, order), indices.gather(1, order)


def sample_from_candidates(values: torch.Tensor, indices: torch.Tensor, temperature: float,
                           top_p: Optional[float], generator,
                           total: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(N,) words drawn among candidates (N, K) (their exact log-probabilities ``values``,
    sorted, best first). Either the candidates are the whole kept set (the ``top_k`` of the
    distribution: ``total`` None, renormalised over them), or (``total``: (N,) the probability
    of every word not excluded, temperature 1) a prefix of the ranking holding at least
    ``top_p`` of it, where the nucleus is cut."""
    x = values / temperature
    if top_p is not None:
        if total is None:
            p = torch.softmax(x, dim=1)
        else:
            p = values.exp() / total.unsqueeze(1)
        before = p.cumsum(dim=1) - p
        x = x.masked_fill(before >= top_p, -math.inf)
    return indices.gather(1, draw(x, generator).unsqueeze(1)).squeeze(1)
