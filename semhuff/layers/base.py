"""``OutputLayer``: the part of the model that turns an input vector into a prediction of a word
(fastText's ``loss.cc`` pattern: each output layer one small class with one job). It owns

* its weights and any other learned or fixed state (a tree, a noise table, statistics), and
  saves / restores all of it through the model file (``config`` + ``arrays`` / ``from_state``);
* its body in the shared sentence loops (``kernels/loop.py``): a built-in body chosen by a
  constant (``body``), or, for a layer defined outside the package, a per-prediction Numba
  function (``custom_body``) with the signature ``body(h, w, weights, larg, alpha, err, state)
  -> (nll, state)``: predict word ``w`` from the input vector ``h``, update ``weights`` (and any
  array of ``larg``, the layer's ``kernel_args()``), write the input's error to ``err``;
* optional per-word statistics (``word_stats``: predictions and summed nll per target word) that
  the kernels accumulate while training;
* training-time hooks it needs (``hooks()``), e.g. a tree that re-learns itself every K words.

Register a new layer with ``@register_output_layer("name")`` (``semhuff.layers``); ``Word2Vec(
loss="name")`` and ``semhuff-train --loss name`` then build it, and ``Word2Vec.load`` restores it.
The settings it takes are declared once in ``OPTIONS`` (``semhuff.options.Option``): they become
``Word2Vec`` keywords (``layer_options={...}``) and ``semhuff-train`` flags, and any other setting
given with this layer is refused by name.
"""
from __future__ import annotations

from typing import ClassVar, Dict, List, Optional, Tuple

import numpy as np

from ..errors import OptionError
from ..kernels import loop
from ..options import Option


class OutputLayer:
    name: ClassVar[str] = ""                 # the registry key (set by register_output_layer)
    body: ClassVar[int] = loop.CUSTOM        # which body the sentence loops run
    normalised: ClassVar[bool] = False       # P(w | h) sums to 1: model.score() is meaningful
    OPTIONS: ClassVar[Tuple[Option, ...]] = ()  # the settings ``create`` takes
    devices: ClassVar[Tuple[str, ...]] = ("cpu",)

    def __init__(self):
        self.weights: Optional[np.ndarray] = None      # (n_rows, dim) float32
        self.word_stats: Optional[np.ndarray] = None   # (V, 2) float64: predictions, nll

    # -- building ------------------------------------------------------------------------------
    @classmethod
    def declared_options(cls) -> Tuple[Option, ...]:
        """Every setting this layer takes (``OPTIONS``; a layer may add others', e.g. its tree
        builders')."""
        return cls.OPTIONS

    @classmethod
    def create(cls, vocab, seed: int = 1, **settings) -> "OutputLayer":
        """A fresh layer for ``vocab`` from the user's settings (checked against
        ``declared_options`` before this is called) and the model's ``seed``."""
        return cls(**settings)

    def n_rows(self, n_words: int) -> int:
        raise NotImplementedError

    def allocate(self, n_words: int, dim: int) -> None:
        # word2vec starts the output layer at zero
        self.weights = np.zeros((self.n_rows(n_words), dim), dtype=np.float32)

    def track_word_stats(self, n_words: int) -> None:
        """Have the kernels accumulate per-word predictions and nll into ``word_stats``."""
        if self.word_stats is None or self.word_stats.shape[0] != n_words:
            self.word_stats = np.zeros((n_words, 2), dtype=np.float64)

    # -- kernels -------------------------------------------------------------------------------
    def kernel_args(self) -> tuple:
        """The layer's own arrays, handed to its body as ``larg`` (read per chunk, so a layer
        may replace them between chunks, e.g. in a hook)."""
        return ()

    def score_args(self, part: int = 0) -> tuple:
        """What the scoring kernel gets as ``larg``; ``part=1`` (clustered layers only): score
        only the cluster part of each prediction."""
        if part:
            raise ValueError(f"{self.describe()} has no clusters to score separately")
        return self.kernel_args()

    def custom_body(self):
        """For ``body == loop.CUSTOM``: the per-prediction Numba function."""
        raise NotImplementedError(f"output layer {self.name!r} defines no body")

    def batch_levels(self) -> int:
        return 0

    def saturates(self) -> bool:
        """Whether the body applies the saturated gradient beyond the sigmoid's clip."""
        return False

    def gpu_program(self, backend: str):
        """For ``devices`` that include "cuda", the batched form (``--device-mode batched``):
        the layer's program (the interface of ``semhuff.gpu.programs.GpuProgram``; HS and NS
        return ``BinaryOutputs``)."""
        return None

    def sentence_body(self):
        """For ``devices`` that include "cuda", the default sentence-per-block form: what the
        device kernel trains (``semhuff.gpu.programs.SentenceBody``), or None: no such form."""
        return None

    def row_updates(self, trained: np.ndarray, counts: np.ndarray) -> Optional[np.ndarray]:
        """The expected number of updates of each output row when each target word was trained
        ``trained[w]`` times (``counts``: the vocabulary's): how Dask weighs the workers' rows
        when it combines them. None
        (the default): the rows cannot be combined row by row (they move, e.g. a tree that
        re-organizes), so the layer does not train on Dask."""
        return None

    HOT_ROWS = 0  # how many rows ``hot_rows`` names by default (measured per layer)
    HOT_MERGE = "sum"  # how the threads' changes to them combine: "sum" or "average"
    # a train() call of at least this many input words is "long": where a layer's best count of
    # private rows changes (HS: more rows, NS batched: rows at all; measured in
    # docs/performance.md, "Private hot rows")
    LARGE_WORDS = 16_000_000

    def hot_row_count(self, total_words: int) -> int:
        """How many private rows for a ``train()`` call over ``total_words`` input words."""
        return self.HOT_ROWS

    def hot_rows(self, counts: np.ndarray, n: int) -> Optional[np.ndarray]:
        """The ``n`` output rows that the most predictions write, which threads keep private
        copies of (``devices.HotRows``), or None: every row shared (the default; a layer whose
        body was not built for private rows, or whose rows move during training)."""
        return None

    def thread_args(self, remap: np.ndarray) -> tuple:
        """``kernel_args()`` for a thread whose private output rows ``remap`` maps (row of
        ``weights`` by output row, ``devices.HotRows``): with ``thread_table()`` the layer's
        arrays and, last, a table of the thread's mapped rows; else the same arrays (the
        kernel maps each row it writes, as NS does its target and noise rows)."""
        return self.kernel_args()

    def thread_table(self) -> bool:
        """Whether ``thread_args`` appends a table of the thread's mapped rows."""
        return False

    def train_kernel(self, sg: bool, dim: int, cbow_mean: bool = True, hot: bool = False,
                     lock: bool = False):
        """The compiled training loop; ``lock``: the variant that takes the input vectors'
        lock factors (``loop.kernel(lock=True)``)."""
        custom = self.custom_body() if self.body == loop.CUSTOM else None
        mode = (loop.OWN_PATHS if self.thread_table() else loop.MAP_ROWS) if hot else 0
        return loop.kernel(sg, dim, self.body, self.batch_levels(), self.word_stats is not None,
                           custom, cbow_mean, self.saturates(), mode, lock)

    def score_kernel(self, sg: bool, dim: int, cbow_mean: bool = True):
        raise OptionError(f"{self.describe()} does not give normalised probabilities, so held-out "
                          f"text cannot be scored (score() needs hierarchical softmax)")

    def stats_array(self) -> np.ndarray:
        return self.word_stats if self.word_stats is not None else loop.no_stats()

    # -- state -----------------------------------------------------------------------------------
    def config(self) -> dict:
        """JSON-able settings: ``cls(**config)`` rebuilds the layer before its arrays return."""
        return {}

    def arrays(self) -> Dict[str, np.ndarray]:
        """Every learned or fixed array of the layer, by name."""
        out = {"weights": self.weights}
        if self.word_stats is not None:
            out["word_stats"] = self.word_stats
        return out

    @classmethod
    def from_state(cls, config: dict, arrays: Dict[str, np.ndarray]) -> "OutputLayer":
        layer = cls(**config)
        layer.load_arrays(arrays)
        return layer

    def load_arrays(self, arrays: Dict[str, np.ndarray]) -> None:
        self.weights = np.ascontiguousarray(arrays["weights"], dtype=np.float32)
        if "word_stats" in arrays:
            self.word_stats = np.ascontiguousarray(arrays["word_stats"], dtype=np.float64)

    def untrained_loss(self, weight: np.ndarray) -> Optional[float]:
        """Loss per prediction (nats) of this layer with every output weight zero, averaged over
        target words with the shares ``weight`` (summing to 1): the line ``semhuff.health``
        measures a failed run against. None: not known (no such check)."""
        return None

    # -- training time ---------------------------------------------------------------------------
    def hooks(self) -> List:
        """Hooks (``semhuff.hooks.Hook``) the layer needs while training."""
        return []

    def describe(self) -> str:
        return self.name
