"""What every language-model output layer shares: ``torch.nn.AdaptiveLogSoftmaxWithLoss``'s
interface, so that swapping layers is a one-line change for the model using them.

* ``forward(input, target)`` -> ``LayerOutput(output, loss)``: ``output`` the log-probability
  of each target (the target's shape), ``loss`` their mean negative log-likelihood (nats);
* ``log_prob(input)`` -> ``(N, V)``: the whole log-distribution, exact;
* ``predict(input)`` -> ``(N,)``: the most probable word;
* ``after_step(optimizer=None)``: called after each optimizer step; a layer that re-organizes
  itself does it here and returns what it did (a dict), the others return None;
* ``describe()``: one line for logs.

``input`` may have leading dimensions (e.g. ``(batch, time, D)``) with ``target`` of the same
leading shape; they are flattened, and ``output`` takes the target's shape back.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Optional, Tuple

import torch
from torch import nn

from ..errors import OptionError

LayerOutput = namedtuple("LayerOutput", ["output", "loss"])  # torch's _ASMoutput, same fields


def flatten(layer: nn.Module, input: torch.Tensor, target: Optional[torch.Tensor] = None
            ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``input`` as (N, in_features) and ``target`` as (N,) long, or an OptionError."""
    if input.shape[-1:] != (layer.in_features,):
        raise OptionError(f"input's last dimension must be in_features = {layer.in_features}, "
                          f"got shape {tuple(input.shape)}")
    flat = input.reshape(-1, layer.in_features)
    if target is None:
        return flat, None
    if target.shape != input.shape[:-1]:
        raise OptionError(f"target's shape {tuple(target.shape)} must be input's without its "
                          f"last dimension, {tuple(input.shape[:-1])}")
    return flat, target.reshape(-1).long()


class LMOutputLayer(nn.Module):
    """Base of the layers here: subclasses give ``target_log_prob(h, target)`` ((N, D), (N,) ->
    (N,)) and ``full_log_prob(h)`` ((N, D) -> (N, V)); ``forward``, ``log_prob`` and
    ``predict`` follow."""

    in_features: int
    n_classes: int

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> LayerOutput:
        h, t = flatten(self, input, target)
        if t.numel() and (int(t.min()) < 0 or int(t.max()) >= self.n_classes):
            raise OptionError(f"targets must be word ids in 0..{self.n_classes - 1}")
        output = self.target_log_prob(h, t)
        return LayerOutput(output.reshape(target.shape), -output.mean())

    def log_prob(self, input: torch.Tensor) -> torch.Tensor:
        h, _ = flatten(self, input)
        return self.full_log_prob(h).reshape(*input.shape[:-1], self.n_classes)

    def predict(self, input: torch.Tensor) -> torch.Tensor:
        return self.log_prob(input).argmax(dim=-1)

    def after_step(self, optimizer: Optional[torch.optim.Optimizer] = None) -> Optional[dict]:
        """A fixed layer has nothing to do after an optimizer step."""
        return None

    def cluster_log_prob(self, h: torch.Tensor, target: torch.Tensor) -> Optional[torch.Tensor]:
        """log P(c(w) | h) of each target for a layer with clusters (the cluster and in-cluster
        perplexities of the held-out report); None for a layer without."""
        return None

    def describe(self) -> str:  # pragma: no cover - every layer overrides it
        return type(self).__name__

    # subclass API
    def target_log_prob(self, h: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def full_log_prob(self, h: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


def check_sizes(in_features, n_classes, least: int = 2) -> Tuple[int, int]:
    for name, value, low in (("in_features", in_features, 1), ("n_classes", n_classes, least)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise OptionError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(in_features), int(n_classes)
