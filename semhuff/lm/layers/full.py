"""The two reference layers: the full softmax and an adapter for torch's adaptive softmax
(Grave et al. 2017), with the extra methods every layer here has."""
from __future__ import annotations

import itertools
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import OptionError
from ...options import Option, boolean, int_list, positive_number
from ..kernels.precision import accumulate_dtype
from .base import (LOSS_OPTIONS, Generation, LayerOutput, LMOutputLayer, check_loss_options,
                   check_sizes, finish, flatten, prepare_targets)
from .vocabulary import require_frequency_order


class FullSoftmax(LMOutputLayer):
    """``log_softmax(h W^T + b)`` over the whole vocabulary: exact and O(V) per prediction."""

    # the registry's declarations (registry.py): what make_output_layer and semhuff-lm take
    OPTIONS = LOSS_OPTIONS + (Option("bias", boolean, True, "a bias per word"),)

    @classmethod
    def from_vocab(cls, in_features, vocab, *, seed=1, device=None, dtype=None, **settings):
        return cls(in_features, len(vocab.counts), device=device, dtype=dtype, **settings)

    def __init__(self, in_features: int, n_classes: int, bias: bool = True,
                 device=None, dtype=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__()
        self.in_features, self.n_classes = check_sizes(in_features, n_classes)
        self.set_loss(ignore_index, reduction)
        self.linear = nn.Linear(self.in_features, self.n_classes, bias=bias, device=device,
                                dtype=dtype)

    def target_log_prob(self, h, target, keep=None):
        # cross_entropy's fused log-softmax + gather: no (N, V) log-probabilities kept for
        # backward; half-precision logits are normalised in float32
        logits = self.linear(h)
        logits = logits.to(accumulate_dtype(logits.dtype))
        return -nn.functional.cross_entropy(logits, target, reduction="none")

    def full_log_prob(self, h):
        logits = self.linear(h)
        return torch.log_softmax(logits.to(accumulate_dtype(logits.dtype)), dim=-1)

    def describe(self) -> str:
        return f"full softmax over {self.n_classes:,} words ({self.in_features} inputs)"


def default_cutoffs(n_classes: int) -> list:
    """A head of the 4% most frequent words, a first tail cluster up to 20% of them, the rest in
    a second: for V ~ 50k that is (2,000, 10,000), the split Grave et al. use for their
    text8-sized vocabularies, and it scales with V. Ids are frequency-sorted, so cutoffs are
    ranks; duplicates (tiny V) are dropped."""
    raw = (round(0.04 * n_classes), round(0.2 * n_classes))
    return sorted({c for c in raw if 1 <= c <= n_classes - 1}) or [1]


class AdaptiveSoftmax(Generation, nn.AdaptiveLogSoftmaxWithLoss):
    """``torch.nn.AdaptiveLogSoftmaxWithLoss`` with ``after_step`` / ``describe``, inputs with
    leading dimensions, ``ignore_index`` / ``reduction`` and mixed precision, as the other
    layers here (torch's own fails under float16 autocast, pytorch#44724: its output buffer
    and the half-precision log-probabilities copied into it differ in dtype; here they are
    float32), and ``topk`` / ``sample`` (``Generation``, from the whole distribution; its
    ``predict`` is torch's, which scores a tail only for the rows whose best head entry is
    that tail). ``cutoffs`` default: ``default_cutoffs``. The forward selects each cluster's
    rows with ``nonzero``, as torch's: on an accelerator that is one wait per tail cluster."""

    uses_every_parameter = False  # a tail cluster no target of the batch fell in

    # the registry's declarations (registry.py): what make_output_layer and semhuff-lm take
    OPTIONS = LOSS_OPTIONS + (
        Option("cutoffs", int_list, None, "the ids where the head and each tail cluster end "
               "(default: 4%% and 20%% of V)", metavar="ID,ID"),
        Option("div_value", float, 4.0, "each tail cluster's input projection is this many "
               "times smaller", check=positive_number),
        Option("head_bias", boolean, False, "a bias in the head"))

    @classmethod
    def from_vocab(cls, in_features, vocab, *, seed=1, device=None, dtype=None, **settings):
        require_frequency_order(vocab, "the adaptive softmax (its clusters are id ranges)")
        return cls(in_features, len(vocab.counts), device=device, dtype=dtype, **settings)

    def __init__(self, in_features: int, n_classes: int, cutoffs: Optional[Sequence[int]] = None,
                 div_value: float = 4.0, head_bias: bool = False, device=None, dtype=None,
                 ignore_index: int = -100, reduction: str = "mean"):
        in_features, n_classes = check_sizes(in_features, n_classes)
        ignore_index, reduction = check_loss_options(ignore_index, reduction)
        cutoffs = default_cutoffs(n_classes) if cutoffs is None else list(cutoffs)
        try:
            super().__init__(in_features, n_classes, cutoffs, div_value=div_value,
                             head_bias=head_bias, device=device, dtype=dtype)
        except ValueError as exc:  # torch's message for bad cutoffs, on one line
            raise OptionError(f"adaptive softmax: {exc} (got cutoffs {cutoffs})") from None
        self.ignore_index, self.reduction = ignore_index, reduction

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> LayerOutput:
        h, t = flatten(self, input, target)
        t, keep = prepare_targets(self, t)
        return finish(self.target_log_prob(h, t), keep, target.shape, self.reduction)

    def target_log_prob(self, h: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """torch's forward (the same operations, so the same numbers), without its range check
        (``prepare_targets`` did it on the device) and with the log-probabilities in
        ``accumulate_dtype``."""
        acc = accumulate_dtype(h.dtype, self.head.weight.dtype)
        output = h.new_zeros(target.shape[0], dtype=acc)
        gather_inds = target.new_empty(target.shape[0])
        cutoff_values = [0] + self.cutoffs
        for i in range(len(cutoff_values) - 1):
            low, high = cutoff_values[i], cutoff_values[i + 1]
            rows = ((target >= low) & (target < high)).nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            if i == 0:
                gather_inds.index_copy_(0, rows, target.index_select(0, rows))
            else:
                relative = target.index_select(0, rows) - low
                cluster_output = self.tail[i - 1](h.index_select(0, rows))
                gather_inds.index_fill_(0, rows, self.shortlist_size + i - 1)
                cluster_logprob = F.log_softmax(cluster_output.to(acc), dim=1)
                local = cluster_logprob.gather(1, relative.unsqueeze(1)).squeeze(1)
                output.index_copy_(0, rows, local.to(acc))
        head_logprob = F.log_softmax(self.head(h).to(acc), dim=1)
        return output + head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)

    def log_prob(self, input: torch.Tensor) -> torch.Tensor:
        h, _ = flatten(self, input)
        return self.full_log_prob(h).reshape(*input.shape[:-1], self.n_classes)

    def full_log_prob(self, h: torch.Tensor) -> torch.Tensor:
        """torch's ``_get_full_log_prob`` in ``accumulate_dtype``."""
        acc = accumulate_dtype(h.dtype, self.head.weight.dtype)
        head_logprob = F.log_softmax(self.head(h).to(acc), dim=1)
        out = head_logprob.new_empty((h.shape[0], self.n_classes))
        out[:, :self.shortlist_size] = head_logprob[:, :self.shortlist_size]
        for i, (start, stop) in enumerate(itertools.pairwise(self.cutoffs)):
            cluster_logprob = F.log_softmax(self.tail[i](h).to(acc), dim=1)
            out[:, start:stop] = cluster_logprob + head_logprob[:, self.shortlist_size + i
                                                                ].unsqueeze(1)
        return out

    def predict(self, input: torch.Tensor) -> torch.Tensor:
        h, _ = flatten(self, input)  # torch's (Generation's is the whole distribution's argmax)
        return nn.AdaptiveLogSoftmaxWithLoss.predict(self, h).reshape(input.shape[:-1])

    def after_step(self, optimizer=None):
        return None

    def cluster_log_prob(self, h, target):
        return None  # its head's classes are not the clusters the report means

    def describe(self) -> str:
        return (f"adaptive softmax over {self.n_classes:,} words, cutoffs {self.cutoffs[:-1]}, "
                f"div_value {self.div_value:g} ({self.in_features} inputs)")
