"""The two reference layers: the full softmax and an adapter for torch's adaptive softmax
(Grave et al. 2017), with the extra methods every layer here has."""
from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn

from ..errors import OptionError
from .base import LayerOutput, LMOutputLayer, check_sizes, flatten


class FullSoftmax(LMOutputLayer):
    """``log_softmax(h W^T + b)`` over the whole vocabulary: exact and O(V) per prediction."""

    def __init__(self, in_features: int, n_classes: int, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        self.in_features, self.n_classes = check_sizes(in_features, n_classes)
        self.linear = nn.Linear(self.in_features, self.n_classes, bias=bias, device=device,
                                dtype=dtype)

    def target_log_prob(self, h, target):
        # cross_entropy's fused log-softmax + gather: no (N, V) log-probabilities kept for backward
        logits = self.linear(h)
        return -nn.functional.cross_entropy(logits, target, reduction="none")

    def full_log_prob(self, h):
        return torch.log_softmax(self.linear(h), dim=-1)

    def describe(self) -> str:
        return f"full softmax over {self.n_classes:,} words ({self.in_features} inputs)"


def default_cutoffs(n_classes: int) -> list:
    """A head of the 4% most frequent words, a first tail cluster up to 20% of them, the rest in
    a second: for V ~ 50k that is (2,000, 10,000), the split Grave et al. use for their
    text8-sized vocabularies, and it scales with V. Ids are frequency-sorted, so cutoffs are
    ranks; duplicates (tiny V) are dropped."""
    raw = (round(0.04 * n_classes), round(0.2 * n_classes))
    return sorted({c for c in raw if 1 <= c <= n_classes - 1}) or [1]


class AdaptiveSoftmax(nn.AdaptiveLogSoftmaxWithLoss):
    """``torch.nn.AdaptiveLogSoftmaxWithLoss`` with ``after_step`` / ``describe`` and inputs with
    leading dimensions, as the other layers here. ``cutoffs`` default: ``default_cutoffs``."""

    def __init__(self, in_features: int, n_classes: int, cutoffs: Optional[Sequence[int]] = None,
                 div_value: float = 4.0, head_bias: bool = False, device=None, dtype=None):
        in_features, n_classes = check_sizes(in_features, n_classes)
        cutoffs = default_cutoffs(n_classes) if cutoffs is None else list(cutoffs)
        try:
            super().__init__(in_features, n_classes, cutoffs, div_value=div_value,
                             head_bias=head_bias, device=device, dtype=dtype)
        except ValueError as exc:  # torch's message for bad cutoffs, on one line
            raise OptionError(f"adaptive softmax: {exc} (got cutoffs {cutoffs})") from None

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> LayerOutput:
        h, t = flatten(self, input, target)
        out = super().forward(h, t)
        return LayerOutput(out.output.reshape(target.shape), out.loss)

    def log_prob(self, input: torch.Tensor) -> torch.Tensor:
        h, _ = flatten(self, input)
        return super().log_prob(h).reshape(*input.shape[:-1], self.n_classes)

    def predict(self, input: torch.Tensor) -> torch.Tensor:
        h, _ = flatten(self, input)
        return super().predict(h).reshape(input.shape[:-1])

    def after_step(self, optimizer=None):
        return None

    def cluster_log_prob(self, h, target):
        return None  # its head's classes are not the clusters the report means

    def describe(self) -> str:
        return (f"adaptive softmax over {self.n_classes:,} words, cutoffs {self.cutoffs[:-1]}, "
                f"div_value {self.div_value:g} ({self.in_features} inputs)")
