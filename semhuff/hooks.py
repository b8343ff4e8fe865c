"""Training-time hooks: code that runs between chunks while no worker is inside a kernel.

A ``Hook`` gets a ``HookContext`` at the start and end of training, at the start and end of every
epoch, and, when its ``every_words`` is set, every K input words: at the first chunk boundary
at or after each multiple of K words (in-vocabulary tokens handed to the kernels, before
down-sampling, counted over the whole ``train()`` call). Before a hook runs the trainer waits
until every chunk in flight is finished, so the weights are quiescent: a hook may read them,
write them, or change the output layer (e.g. re-assign a tree), and the next chunk sees the
result. With ``workers=1`` and a seed, hook points and hence results are reproducible. A hook
whose K is below a chunk's words can ask for smaller chunks (``Hook.max_chunk_words``: the
self-organized layers' re-assignment does on a small corpus); chunks are otherwise unchanged.

The context is deliberately narrow: the input vectors, the output layer, the vocabulary counts,
the progress, and the chunks of ids trained since the hook's previous call (as many words as
the hook's ``recent_words`` asks for, newest last).
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Callable, Deque, List, Optional, Sequence

import numpy as np


class Hook:
    """Override what you need. ``every_words``: K for ``on_words`` (None: never).
    ``recent_words``: how many of the latest input words ``on_words`` wants in
    ``context.recent_chunks``. ``max_chunk_words``: the chunks this run cuts the corpus into
    hold at most about this many input words (for an ``on_words`` that must run every K words
    with K below the default chunk)."""

    every_words: Optional[int] = None
    recent_words: int = 0
    # Input words a chunk may hold at most (None: any), read once after ``on_train_begin``
    # (which may set it). Hooks run between chunks, so a K below a chunk's words is only
    # honoured when the chunks are cut to it; only a hook that asks gets smaller chunks, so
    # every other run keeps its chunking, its speed and its results.
    max_chunk_words: Optional[int] = None

    def on_train_begin(self, context: "HookContext") -> None:
        pass

    def on_epoch_begin(self, context: "HookContext") -> None:
        pass

    def on_words(self, context: "HookContext") -> None:
        pass

    def on_epoch_end(self, context: "HookContext") -> None:
        pass

    def on_train_end(self, context: "HookContext") -> None:
        pass


@dataclass
class HookContext:
    """What a hook sees. ``vectors()`` and the layer's arrays are the live training weights on
    the host (a device backend copies them back first); call ``layer_changed()`` after changing
    the layer's arrays so a device backend can upload them again."""

    epoch: int                      # 0-based epoch in progress (the last one at train end)
    epochs: int
    words_done: int                 # input words finished in this train() call
    total_words: int                # input words this train() call will train
    alpha: float                    # the learning rate at this point
    counts: np.ndarray              # vocabulary counts, by word id (read-only)
    layer: object                   # the output layer (``OutputLayer``)
    loss: float                     # summed nll of the epoch so far (nats)
    predictions: int                # predictions of the epoch so far
    recent_chunks: List = field(default_factory=list)  # ``encode.Chunk``s, oldest first
    keep_prob: np.ndarray = None    # down-sampling keep probability, by word id
    sg: bool = True                 # the architecture and window the kernels run with
    window: int = 5
    cbow_mean: bool = True
    chunk_words: int = 0            # input words a chunk holds, about (hooks run between chunks)
    _vectors: Callable[[], np.ndarray] = None
    _layer_changed: Callable[[], None] = None

    @property
    def progress(self) -> float:
        return self.words_done / self.total_words if self.total_words else 1.0

    @property
    def loss_per_prediction(self) -> float:
        return self.loss / self.predictions if self.predictions else float("nan")

    def vectors(self) -> np.ndarray:
        return self._vectors()

    def layer_changed(self) -> None:
        self._layer_changed()


def _every(hook: Hook) -> int:
    k = hook.every_words
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"{type(hook).__name__}.every_words must be a positive integer, got {k!r}")
    return int(k)


class HookSchedule:
    """Which hooks are due, and the recent chunks they asked to see."""

    def __init__(self, hooks: Sequence[Hook]):
        self.hooks = list(hooks)
        self.next_at = {id(h): _every(h) for h in self.hooks if h.every_words is not None}
        self.keep_words = max((h.recent_words for h in self.hooks), default=0)
        self.recent: Deque = collections.deque()
        self._recent_words = 0

    def due(self, words: int) -> List[Hook]:
        """The hooks whose next boundary is at or before ``words``; their boundaries move on."""
        out = []
        for hook in self.hooks:
            at = self.next_at.get(id(hook))
            if at is None and hook.every_words:  # K set by the hook's on_train_begin
                at = self.next_at[id(hook)] = _every(hook)
            if at is not None and words >= at:
                out.append(hook)
                self.next_at[id(hook)] = (words // hook.every_words + 1) * hook.every_words
        return out

    def resume(self, words: int) -> None:
        """Continue a run whose hooks due at ``words`` have run (a checkpoint's position):
        each hook's next boundary is its first multiple of K after ``words``. The recent
        chunks start empty."""
        for hook in self.hooks:
            if hook.every_words:
                self.next_at[id(hook)] = (words // hook.every_words + 1) * hook.every_words

    def remember(self, chunk) -> None:
        if not self.keep_words:
            return
        self.recent.append(chunk)
        self._recent_words += len(chunk.ids)
        while self.recent and self._recent_words - len(self.recent[0].ids) >= self.keep_words:
            self._recent_words -= len(self.recent.popleft().ids)

    def take_recent(self) -> list:
        chunks = list(self.recent)
        self.recent.clear()
        self._recent_words = 0
        return chunks

    def call(self, method: str, context: HookContext, hooks: Optional[Sequence[Hook]] = None) -> None:
        for hook in self.hooks if hooks is None else hooks:
            getattr(hook, method)(context)
