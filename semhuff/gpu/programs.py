"""What an output layer runs on the GPU for a batch of pairs: its *program*.

The built-in program, ``BinaryOutputs``, covers every layer whose prediction is a set of binary
logistic outputs: hierarchical softmax over any tree (the target's path: padded ``points``,
``codes``, ``lengths`` from ``layer.kernel_args()``) and negative sampling (the target and its
noise words: ``alias_thr``, ``alias_idx``, ``negative``); those two layers return it from their
``gpu_program``. It asks the layer only for its ``kernel_args()`` and ``weights``; nothing here
knows a layer class.

A layer that needs something else on the GPU (the two-level class softmax: a softmax over
~sqrt(V) classes, then over the words of the class) brings its own program:
``OutputLayer.gpu_program(backend)`` returns an object with the interface of ``GpuProgram``
below, and the session runs it. It gets the session (its backend, the
device copies of ``syn0`` and the layer's weights, the options) and the batch of pairs on the
device; it keeps its own device arrays (uploaded in ``upload``, brought back in ``to_host``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import DeviceError

# HS levels whose updates the sentence kernel can keep until a centre's end (the "mixed" order
# keeps 4; "batched", every level, is the CPU's alone)
MAX_DEFERRED = 8


class GpuProgram:
    """The interface a layer's own GPU program implements."""

    width = 1  # output entries per pair (sizes the batch buffers)

    def upload(self, session) -> None:
        """Put the layer's arrays on the device (again after a hook changed them)."""

    def train_batch(self, session, plan, pairs, p0: int, n: int, seed) -> None:
        """Train pairs ``p0 .. p0 + n`` of ``pairs`` (device arrays, ``device.DevicePairs``);
        add their summed nll to the backend's loss."""
        raise NotImplementedError

    def to_host(self, session) -> None:
        """Copy arrays the program changes on the device (besides the weights) to the layer."""


class BinaryOutputs(GpuProgram):
    """HS paths and NS samples: all output logits of a pair at once (p-tHSM), then the
    updates. ``clip``: HS skips a node whose ``|score| >= 6`` (word2vec and the CPU kernels);
    NS, and HS with ``clip="saturate"``, use the exact sigmoid everywhere (docs/gpu.md): the
    CPU's saturated gradient beyond +-6 differs from it by less than 0.0025."""

    def __init__(self, layer, kind: str):
        self.layer = layer
        self.kind = kind
        self.clip = kind == "hs" and not layer.saturates()
        self.arrays = ()

    def upload(self, session) -> None:
        backend = session.backend
        larg = self.layer.kernel_args()
        if self.kind == "hs":
            points, codes, lengths = larg
            self.arrays = (backend.upload(points), backend.upload(codes), backend.upload(lengths))
            self.width = max(1, int(points.shape[1]))
        else:
            alias_thr, alias_idx, negative = larg
            self.arrays = (backend.upload(alias_thr), backend.upload(alias_idx), int(negative))
            self.width = int(negative) + 1

    def train_batch(self, session, plan, pairs, p0, n, seed) -> None:
        backend = session.backend
        make = backend.hs_targets if self.kind == "hs" else backend.ns_targets
        targets = make(self.arrays, pairs, p0, n, seed)
        backend.train(session.d_syn0, session.d_weights, pairs, p0, n, targets, self.clip,
                      bool(plan.cbow_mean or plan.sg), session.damping)


@dataclass(frozen=True)
class ClusterStatistic:
    """The self-organized tree's cluster statistic, gathered on the device: a centre is sampled
    with probability ``sample_thr[w] / 2^32`` and its clusters' log-probabilities go into
    ``q[w]`` (an exponential mean with ``lam[w]``); ``top_row`` and ``top_child`` are the tree's
    cluster part, root first (``layers.self_organized.top_part``). ``q`` lives on the device
    while training and comes back with the weights."""

    q: np.ndarray
    lam: np.ndarray
    sample_thr: np.ndarray
    top_row: np.ndarray
    top_child: np.ndarray


@dataclass(frozen=True)
class SentenceBody:
    """What a layer trains with on the sentence-per-block kernel (``sentence_kernels``), which
    runs the CPU bodies' arithmetic: hierarchical softmax over a tree (``hs``: its padded
    ``points, codes, lengths``; its rows ``hs_weights``; ``top`` levels deferred to a centre's
    end; ``saturate``: the saturated gradient beyond +-6), negative sampling (``ns``: the
    alias table and ``negative``; its rows ``ns_weights``; ``ns_batched``: HogBatch's order),
    or both (HS then NS, word2vec's order for the NS part); with ``statistic``, HS that also
    samples centres for a self-organized tree's cluster statistic. A layer returns one from
    ``sentence_body()``; the session asks for nothing else of it."""

    hs: Optional[tuple] = None
    hs_weights: Optional[np.ndarray] = None
    top: int = 0
    saturate: bool = False
    ns: Optional[tuple] = None
    ns_weights: Optional[np.ndarray] = None
    ns_batched: bool = False
    statistic: Optional[ClusterStatistic] = None

    def __post_init__(self):
        if self.hs is None and self.ns is None:
            raise ValueError("a sentence body needs hierarchical softmax or negative sampling")
        if self.top > MAX_DEFERRED:
            raise DeviceError(f"the GPU defers at most {MAX_DEFERRED} tree levels to a centre's "
                              f"end: hs_order 'word2vec' or 'mixed' there ('batched' is the "
                              f"CPU's)")

    @property
    def negative(self) -> int:
        return int(self.ns[2]) if self.ns is not None else 0

    def weights(self) -> tuple:
        """The host arrays the kernel trains besides the input vectors."""
        return tuple(w for w in (self.hs_weights, self.ns_weights) if w is not None)


def sentence_body_for(layer) -> SentenceBody:
    """The layer's ``sentence_body()``; a ``DeviceError`` when it has none."""
    body = layer.sentence_body()
    if body is None:
        raise DeviceError(f"{layer.describe()} has no sentence kernel on the GPU (train it with "
                          f"--device-mode batched where it has a batch program, or on the CPU)")
    return body


def program_for(layer, backend_name: str) -> GpuProgram:
    """The layer's program (``OutputLayer.gpu_program``): the layer says what it runs."""
    own = layer.gpu_program(backend_name)
    if own is not None:
        return own
    raise DeviceError(f"{layer.describe()} has no GPU program (define gpu_program() on the "
                      f"layer, or train with --device cpu)")
