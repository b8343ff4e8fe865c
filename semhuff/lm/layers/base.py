"""What every language-model output layer shares: ``torch.nn.AdaptiveLogSoftmaxWithLoss``'s
interface, with the loss options of ``torch.nn.CrossEntropyLoss``, so that swapping layers is
a one-line change for the model using them.

* ``forward(input, target)`` -> ``LayerOutput(output, loss)``: ``output`` the log-probability
  of each target (the target's shape; 0 where the target is ``ignore_index``), ``loss`` the
  negative log-likelihood (nats) reduced as ``reduction`` says: ``"mean"`` over the targets
  that are not ignored (NaN if all are, as ``CrossEntropyLoss``), ``"sum"``, or ``"none"``
  (per token, the target's shape, 0 at ignored targets);
* ``log_prob(input)`` -> ``(N, V)``: the whole log-distribution, exact;
* ``predict(input)`` -> ``(N,)``: the most probable word;
* ``topk(input, k)`` -> ``(values, indices)``, each ``(N, k)``: the k most probable words and
  their log-probabilities, best first, exact; ``sample(input, temperature=1.0, top_k=None,
  top_p=None, generator=None, exclude=None)`` -> ``(N,)``: a word drawn from the distribution
  as Hugging Face's warpers shape it (``kernels/sampling.py``), exactly (``Generation``: a
  layer's own search where it has one, the whole distribution where not);
* ``after_step(optimizer=None)``: called after each optimizer step; a layer that re-organizes
  itself does it here and returns what it did (a dict), the others return None;
* ``describe()``: one line for logs.

``input`` may have leading dimensions (e.g. ``(batch, time, D)``) with ``target`` of the same
leading shape; they are flattened, and ``output`` takes the target's shape back. Targets are
integer word ids (float or bool targets are an error, not truncated); the range check runs on
the device (``torch._assert_async``), so a steady-state step reads nothing back to the host.

Precision: log-probabilities and losses are float32 when the weights or the input are
bfloat16 / float16 (or under ``torch.autocast``), float64 for float64.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Optional, Tuple

import torch
from torch import nn

from ...errors import OptionError
from ...options import Option, boolean, integer
from ..kernels.sampling import (check_k, check_sampling, drop_excluded, excluded_ids,
                                sample_from_candidates, sample_from_log_prob)

LayerOutput = namedtuple("LayerOutput", ["output", "loss"])  # torch's _ASMoutput, same fields

REDUCTIONS = ("mean", "sum", "none")

# the loss options of torch.nn.CrossEntropyLoss, taken by every built-in layer: for the user's own
# training loops (cli=False), semhuff-lm trains on the mean of every token
LOSS_OPTIONS = (
    Option("ignore_index", int, -100, "a target id that adds no loss and no gradient (padding), "
           "as torch.nn.CrossEntropyLoss", metavar="ID", check=integer, cli=False),
    Option("reduction", str, "mean", "the loss returned: the mean over the targets not "
           "ignored, their sum, or none (one per token)", choices=REDUCTIONS, cli=False),
)
# a declaration several layers share (each layer's OPTIONS lists its own)
SPARSE = Option("sparse", boolean, False, "the output weights' gradient as a sparse tensor of "
                "the rows a batch touched (SGD, Adagrad, SparseAdam then update only those; "
                "semhuff-lm trains the tree forms so unless told --sparse false)")
def check_loss_options(ignore_index, reduction) -> Tuple[int, str]:
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise OptionError(f"ignore_index must be an integer, got {ignore_index!r}")
    if reduction not in REDUCTIONS:
        raise OptionError(f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")
    return int(ignore_index), reduction


def flatten(layer: nn.Module, input: torch.Tensor, target: Optional[torch.Tensor] = None
            ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``input`` as (N, in_features) and ``target`` as (N,) long, or an OptionError."""
    if input.shape[-1:] != (layer.in_features,):
        raise OptionError(f"input's last dimension must be in_features = {layer.in_features}, "
                          f"got shape {tuple(input.shape)}")
    if input.dtype == torch.float64:
        weights = weight_dtype(layer)
        if weights not in (None, torch.float64):  # as torch's own layers refuse it
            name = str(weights).replace("torch.", "")
            raise OptionError(f"the input is float64 and the layer's weights {name}: convert "
                              f"one (input.to(torch.{name}) or layer.double())")
    flat = input.reshape(-1, layer.in_features)
    if target is None:
        return flat, None
    if not torch.is_tensor(target):
        raise OptionError(f"target must be a tensor of word ids, got {type(target).__name__}")
    if target.dtype == torch.bool or target.dtype.is_floating_point or target.dtype.is_complex:
        # long() would silently truncate 1.7 to word 1, or read True as word 1
        raise OptionError(f"targets must be integer word ids, got a {target.dtype} tensor")
    if target.shape != input.shape[:-1]:
        raise OptionError(f"target's shape {tuple(target.shape)} must be input's without its "
                          f"last dimension, {tuple(input.shape[:-1])}")
    return flat, target.reshape(-1).long()


def weight_dtype(layer: nn.Module) -> Optional[torch.dtype]:
    """The dtype of the layer's first floating-point parameter (None without one)."""
    for p in layer.parameters():
        if p.is_floating_point():
            return p.dtype
    return None


def prepare_targets(layer: nn.Module, target: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """(targets with the ignored ones replaced by word 0, the (N,) mask of those kept). The
    range check runs on the device: ``_assert_async`` raises at once on the CPU (turned into an
    OptionError here) and as a device-side assert elsewhere; nothing is read back."""
    keep = target != layer.ignore_index
    safe = torch.where(keep, target, 0)
    if safe.numel():
        message = f"targets must be word ids in 0..{layer.n_classes - 1} or ignore_index"
        try:
            torch._assert_async(((safe >= 0) & (safe < layer.n_classes)).all(), message)
        except RuntimeError:
            raise OptionError(message) from None
    return safe, keep


def finish(output: torch.Tensor, keep: torch.Tensor, shape, reduction: str) -> LayerOutput:
    """``LayerOutput`` from the per-token log-probabilities of the (N,) targets: 0 at ignored
    targets, the loss reduced as asked."""
    output = torch.where(keep, output, 0)
    if reduction == "none":
        loss = -output
    elif reduction == "sum":
        loss = -output.sum()
    else:  # the mean over the kept targets, without reading their number back
        loss = -output.sum() / keep.sum()
    output = output.reshape(shape)
    return LayerOutput(output, loss.reshape(shape) if reduction == "none" else loss)


class Generation:
    """``topk``, ``sample`` and ``predict`` for every layer, exact, from the layer's
    ``full_log_prob(h)`` unless it has faster forms:

    * ``search_topk(h, k)`` -> (values, indices, exact) or None: the k best words by the
      layer's own search (a tree: best-first with pruning; two-level: the best clusters, then
      their words); rows where ``exact`` is False are taken from the whole distribution;
    * ``walk_sample(h, generator)`` -> (N,) words drawn from the distribution itself
      (temperature 1, nothing cut), or None;
    * ``words_log_prob(h, words)`` -> (N,) log P(words[n] | h[n]) without touching any
      training statistic.

    Which form a draw takes: temperature 0 is ``topk``'s best word; with ``top_k`` (up to
    ``SEARCH_LIMIT``) the draw is among ``topk``'s exact candidates, tempered and cut at
    ``top_p`` there; with ``top_p`` alone at temperature 1, among the ``NUCLEUS`` best words
    when they hold ``top_p`` of the mass; at temperature 1 with nothing cut, ``walk_sample``
    (excluded words re-drawn: exact for the renormalised distribution). A temperature other
    than 1 without ``top_k`` needs every word's tempered probability (the tree's subtrees do
    not sum to anything simple under it): the whole distribution."""

    SEARCH_LIMIT = 256  # top_k (+ excluded words) up to which the search is tried
    NUCLEUS = 64        # candidates a top_p draw at temperature 1 looks among first
    REDRAWS = 16        # walks re-drawn for rows that drew an excluded word

    def search_topk(self, h: torch.Tensor, k: int):
        return None

    def walk_sample(self, h: torch.Tensor, generator=None):
        return None

    def words_log_prob(self, h: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        return self.full_log_prob(h).gather(1, words.unsqueeze(1)).squeeze(1)

    @torch.no_grad()
    def topk(self, input: torch.Tensor, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """The ``k`` most probable words of each row of ``input`` and their log-probabilities,
        best first: ``(values, indices)`` of shape ``(*input.shape[:-1], k)``, exact."""
        h, _ = flatten(self, input)
        k = check_k(k, self.n_classes)
        values, indices = self._exact_topk(h, k)
        shape = (*input.shape[:-1], k)
        return values.reshape(shape), indices.reshape(shape)

    def predict(self, input: torch.Tensor) -> torch.Tensor:
        """The most probable word of each row (``topk``'s first)."""
        return self.topk(input, 1)[1].squeeze(-1)

    @torch.no_grad()
    def sample(self, input: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
               top_p: Optional[float] = None, generator: Optional[torch.Generator] = None,
               exclude=None) -> torch.Tensor:
        """A word drawn for each row of ``input``: from the distribution with ``exclude``
        (word ids) removed, divided by ``temperature`` (0: the most probable word), cut to the
        ``top_k`` best and to the nucleus of mass ``top_p`` (``kernels/sampling.py``).
        ``generator``: a ``torch.Generator`` on the input's device (else torch's global
        one)."""
        h, _ = flatten(self, input)
        temperature, top_k, top_p = check_sampling(temperature, top_k, top_p, self.n_classes)
        exclude = excluded_ids(exclude, self.n_classes, h.device)
        if h.shape[0] == 0:
            return torch.zeros(input.shape[:-1], dtype=torch.long, device=h.device)
        words = self._sample(h, temperature, top_k, top_p, generator, exclude)
        return words.reshape(input.shape[:-1])

    def _exact_topk(self, h, k):
        found = self.search_topk(h, k) if k <= self.SEARCH_LIMIT and h.shape[0] else None
        if found is None:
            return self.full_log_prob(h).topk(k, dim=1)
        values, indices, exact = found
        if not bool(exact.all()):  # the rows the search could not settle: their whole row
            rows = (~exact).nonzero().squeeze(1)
            v, i = self.full_log_prob(h[rows]).topk(k, dim=1)
            values[rows], indices[rows] = v.to(values.dtype), i
        return values, indices

    def _sample(self, h, temperature, top_k, top_p, generator, exclude):
        n_out = 0 if exclude is None else exclude.numel()
        if temperature == 0:
            v, i = self._exact_topk(h, min(1 + n_out, self.n_classes))
            return drop_excluded(v, i, exclude, 1)[1][:, 0]
        if top_k is not None and top_k + n_out <= self.SEARCH_LIMIT:
            v, i = self._exact_topk(h, min(top_k + n_out, self.n_classes))
            v, i = drop_excluded(v, i, exclude, top_k)
            return sample_from_candidates(v, i, temperature, top_p, generator)
        if temperature == 1 and top_k is None:
            if top_p is not None:
                words = self._nucleus(h, top_p, generator, exclude)
            else:
                words = self._walked(h, generator, exclude)
            if words is not None:
                return words
        return sample_from_log_prob(self.full_log_prob(h), temperature, top_k, top_p,
                                    exclude, generator)

    def _nucleus(self, h, top_p, generator, exclude):
        """Temperature 1, ``top_p`` alone: among the ``NUCLEUS`` best words of the rows where
        they hold ``top_p`` of the mass (not excluded), the rest from the whole row."""
        n_out = 0 if exclude is None else exclude.numel()
        K = min(self.NUCLEUS + n_out, self.n_classes)
        found = self.search_topk(h, K)
        if found is None:
            return None
        values, indices, exact = found
        total = torch.ones(h.shape[0], dtype=values.dtype, device=h.device)
        for word in ([] if exclude is None else exclude.tolist()):
            total -= self.words_log_prob(h, torch.full_like(indices[:, 0], word)).exp().to(
                total.dtype)
        values, indices = drop_excluded(values, indices, exclude, K - n_out)
        enough = exact & (values.exp().sum(dim=1) >= top_p * total)
        words = torch.empty(h.shape[0], dtype=torch.long, device=h.device)
        rows = enough.nonzero().squeeze(1)
        if rows.numel():
            words[rows] = sample_from_candidates(values[rows], indices[rows], 1.0, top_p,
                                                 generator, total[rows])
        rest = (~enough).nonzero().squeeze(1)
        if rest.numel():
            words[rest] = sample_from_log_prob(self.full_log_prob(h[rest]), 1.0, None, top_p,
                                               exclude, generator)
        return words

    def _walked(self, h, generator, exclude):
        """Temperature 1, nothing cut: ``walk_sample``; a row that drew an excluded word draws
        again (exact for the renormalised distribution), ``REDRAWS`` times, then from its
        whole row."""
        words = self.walk_sample(h, generator)
        if words is None or exclude is None:
            return words
        for _ in range(self.REDRAWS):
            again = torch.isin(words, exclude).nonzero().squeeze(1)
            if again.numel() == 0:
                return words
            words[again] = self.walk_sample(h[again], generator)
        again = torch.isin(words, exclude).nonzero().squeeze(1)
        if again.numel():
            words[again] = sample_from_log_prob(self.full_log_prob(h[again]), 1.0, None, None,
                                                exclude, generator)
        return words


class LMOutputLayer(Generation, nn.Module):
    """Base of the layers here: subclasses give ``target_log_prob(h, target, keep)`` ((N, D),
    (N,), (N,) bool: the targets to learn from -> (N,)) and ``full_log_prob(h)`` ((N, D) ->
    (N, V)), and set ``ignore_index`` and ``reduction`` (``set_loss``); ``forward``,
    ``log_prob`` and ``predict`` follow."""

    in_features: int
    n_classes: int
    ignore_index: int = -100
    reduction: str = "mean"
    # every parameter takes part in every forward (DistributedDataParallel need not look for
    # unused ones: semhuff.lm.parallel.data_parallel); a layer for which it is not so says False
    uses_every_parameter: bool = True

    def set_loss(self, ignore_index: int = -100, reduction: str = "mean") -> None:
        self.ignore_index, self.reduction = check_loss_options(ignore_index, reduction)

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> LayerOutput:
        h, t = flatten(self, input, target)
        t, keep = prepare_targets(self, t)
        return finish(self.target_log_prob(h, t, keep), keep, target.shape, self.reduction)

    def log_prob(self, input: torch.Tensor) -> torch.Tensor:
        h, _ = flatten(self, input)
        return self.full_log_prob(h).reshape(*input.shape[:-1], self.n_classes)

    def after_step(self, optimizer: Optional[torch.optim.Optimizer] = None) -> Optional[dict]:
        """A fixed layer has nothing to do after an optimizer step."""
        return None

    def cluster_log_prob(self, h: torch.Tensor, target: torch.Tensor) -> Optional[torch.Tensor]:
        """log P(c(w) | h) of each target for a layer with clusters (the cluster and in-cluster
        perplexities of the held-out report); None for a layer without."""
        return None

    def sparse_parameters(self) -> list:
        """The parameters whose gradient is sparse (``sparse=True``); see
        ``kernels.optimizer_state.check_optimizer``."""
        return []

    def describe(self) -> str:  # pragma: no cover - every layer overrides it
        return type(self).__name__

    # subclass API
    def target_log_prob(self, h: torch.Tensor, target: torch.Tensor,
                        keep: Optional[torch.Tensor] = None) -> torch.Tensor:
        raise NotImplementedError

    def full_log_prob(self, h: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError


class Cache(dict):
    """Values derived from the layer's state (e.g. sparse path matrices), rebuilt on demand: a
    copy of the layer starts with an empty one (``copy.deepcopy`` cannot copy sparse CSR
    tensors), and pickling leaves it out."""

    def __deepcopy__(self, memo):
        return Cache()

    def __reduce__(self):
        return (Cache, ())

    def derived(self, what, device, make):
        """``make(device)``, kept under ``(what, device)``; ``what`` made for another device
        dropped."""
        key = (what, device)
        if key not in self:
            for old in [k for k in self if k[0] == what]:
                del self[old]  # another device's
            self[key] = make(device)
        return self[key]


def check_sizes(in_features, n_classes, least: int = 2) -> Tuple[int, int]:
    for name, value, low in (("in_features", in_features, 1), ("n_classes", n_classes, least)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise OptionError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(in_features), int(n_classes)


class SparseRows(nn.Embedding):
    """Holds a layer's row weight (``layer.rows.weight``, shown as ``layer.<name>``) so that
    ``DistributedDataParallel`` knows its gradient is sparse when ``sparse=True``: DDP expects
    a sparse gradient only from the parameters of an ``nn.Embedding`` (or ``EmbeddingBag``)
    with ``sparse=True``, and fails on any other ("Cannot access storage of
    SparseTensorImpl"). Never called: the layer computes with ``weight`` itself. The
    ``state_dict`` key stays the layer's own name (``rename_in_state_dict``)."""

    def __init__(self, weight: torch.Tensor, sparse: bool):
        super().__init__(weight.shape[0], weight.shape[1], sparse=bool(sparse), _weight=weight,
                         device=weight.device, dtype=weight.dtype)

    def forward(self, *args):  # pragma: no cover - a holder, not a layer
        raise RuntimeError("SparseRows holds a weight; it is not called")


def rename_in_state_dict(module: nn.Module, inner: str, outer: str) -> None:
    """Save ``module``'s parameter ``inner`` (e.g. "rows.weight") under the key ``outer``
    (e.g. "weight") and load it from there, so that the files of layers that held it directly
    load, and are written, alike."""
    renamed = _RenamedKey(inner, outer)
    module._register_state_dict_hook(renamed.save)
    module._register_load_state_dict_pre_hook(renamed.load)


class _RenamedKey:
    """``rename_in_state_dict``'s two hooks, methods of a module-level class so that a layer
    pickles (``torch.save(model)``, a spawned process's arguments): closures do not."""

    def __init__(self, inner: str, outer: str):
        self.inner, self.outer = inner, outer

    def save(self, module, state_dict, prefix, local_metadata):
        if prefix + self.inner in state_dict:
            state_dict[prefix + self.outer] = state_dict.pop(prefix + self.inner)
        return state_dict

    def load(self, state_dict, prefix, *args):
        if prefix + self.outer in state_dict and prefix + self.inner not in state_dict:
            state_dict[prefix + self.inner] = state_dict.pop(prefix + self.outer)
