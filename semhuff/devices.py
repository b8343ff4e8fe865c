"""Where the work runs. A ``Device`` opens a ``Session`` over the model's weights; the trainer and
the scorer only talk to the session:

* ``concurrency``: how many threads may call ``train_chunk`` at once (the CPU: ``workers``
  Hogwild threads sharing the host arrays; a GPU: one stream that owns the weights);
* ``warm_up``: compile or load the kernels before the clock starts, and say how long it took;
* ``train_chunk`` / ``score_chunk``: one chunk of token ids;
* ``to_host``: bring the weights back into the host arrays (for export, ``most_similar``,
  hooks, checkpoints); ``layer_changed``: the layer's arrays changed on the host (a hook
  re-assigned the tree, say), upload them again.

``cpu`` is built in; ``cuda`` (``semhuff.gpu``: numba.cuda or CuPy) is registered below without
importing either (its constructor loads the backend and says in one sentence when it cannot).
A device class lists its ``backends``; ``make_device(name, backend, **options)`` builds it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple, Type

import numpy as np

from .errors import DeviceError, OptionError


@dataclass(frozen=True)
class Plan:
    """What every chunk of one ``train()`` call shares."""

    sg: bool
    keep_thr: np.ndarray   # uint32 down-sampling thresholds by word id (all 0xFFFFFFFF: none)
    window: int
    reduce_window: bool    # word2vec's reduced window (training) or the full window (scoring)
    alpha: float
    min_alpha: float
    total_words: int       # input words of the whole call, for the learning-rate decay
    cbow_mean: bool = True # CBOW: mean of the contexts (word2vec) or their sum (gensim cbow_mean=0)


class CpuSession:
    """Hogwild threads on the host arrays: the kernels release the GIL and update ``syn0`` and
    the layer's weights in place, without locks (word2vec's and gensim's way)."""

    def __init__(self, syn0: np.ndarray, layer, workers: int):
        self.syn0 = syn0
        self.layer = layer
        self.concurrency = int(workers)

    def _kernel(self, plan: Plan, score: bool):
        dim, layer = self.syn0.shape[1], self.layer
        if score:
            return layer.score_kernel(plan.sg, dim, plan.cbow_mean)
        return layer.train_kernel(plan.sg, dim, plan.cbow_mean)

    def warm_up(self, plan: Plan, score: bool = False) -> float:
        """Compile (or load from Numba's disk cache) the kernel; seconds it took (0 when it was
        ready in this process). The call trains on an empty chunk: the same types as a real
        call, so the same compiled code, and no side effect on any weight or statistic."""
        fn = self._kernel(plan, score)
        if fn.signatures:
            return 0.0
        started = time.perf_counter()
        larg = self.layer.score_args(0) if score else self.layer.kernel_args()
        fn(np.zeros(0, np.int32), np.zeros(0, np.int64), self.syn0, self.layer.weights,
           larg, self.layer.stats_array(), plan.keep_thr, 1,
           plan.reduce_window, 0.0, 0.0, 0, 1, np.uint64(1))
        return time.perf_counter() - started

    def train_chunk(self, plan: Plan, chunk, words_before: int, seed: int):
        fn = self._kernel(plan, score=False)
        return fn(chunk.ids, chunk.bounds, self.syn0, self.layer.weights,
                  self.layer.kernel_args(), self.layer.stats_array(), plan.keep_thr, plan.window,
                  plan.reduce_window, plan.alpha, plan.min_alpha, words_before, plan.total_words,
                  np.uint64(seed))

    def score_chunk(self, plan: Plan, chunk, part: int = 0):
        """(summed nll, predictions); ``part=1``: only the cluster part (clustered layers)."""
        fn = self._kernel(plan, score=True)
        nll, pairs, _ = fn(chunk.ids, chunk.bounds, self.syn0, self.layer.weights,
                           self.layer.score_args(part), np.zeros((1, 2)), plan.keep_thr,
                           plan.window, False, 0.0, 0.0, 0, 1, np.uint64(0))
        return nll, pairs

    def to_host(self) -> None:
        """The host arrays are the weights: nothing to do."""

    def layer_changed(self) -> None:
        """Kernels read ``layer.kernel_args()`` per chunk: nothing to do."""

    def close(self) -> None:
        pass


class CpuDevice:
    name = "cpu"
    backends = ("numba",)

    def __init__(self, backend=None, **options):
        if options:
            raise OptionError(f"device option(s) {', '.join(sorted(options))} do not apply to "
                              f"device 'cpu'")

    def open(self, syn0: np.ndarray, layer, workers: int) -> CpuSession:
        return CpuSession(syn0, layer, workers)


DEVICES: Dict[str, Type] = {"cpu": CpuDevice}


def _register_gpu() -> None:
    from .gpu.device import CudaDevice  # imports neither numba.cuda nor cupy
    DEVICES[CudaDevice.name] = CudaDevice


_register_gpu()


def backend_names() -> Tuple[str, ...]:
    """Every backend of every registered device (the CLI's ``--backend`` choices)."""
    return tuple(sorted({b for cls in DEVICES.values() for b in getattr(cls, "backends", ())}))


def check_device_options(name: str, backend: Optional[str] = None) -> None:
    """An unknown device or a backend the device does not have: ``OptionError``."""
    if name not in DEVICES:
        raise OptionError(f"unknown device {name!r}; available: {', '.join(sorted(DEVICES))}")
    backends = getattr(DEVICES[name], "backends", ())
    if backend is not None and backend not in backends:
        raise OptionError(f"device {name!r} has no backend {backend!r}; its backends: "
                          f"{', '.join(backends) or 'none'}")


def make_device(name: str, backend: Optional[str] = None, **options):
    """The device called ``name`` (with ``backend`` and device ``options``, e.g. the GPU's
    ``batch_pairs``); a clear error when it is unknown or unusable here."""
    check_device_options(name, backend)
    if backend is None and not options:  # a device class of a plugin may take no arguments
        return DEVICES[name]()
    return DEVICES[name](backend=backend, **options)


def scoring_device(name: str) -> str:
    """Where a device's models are scored (a GPU session scores on the CPU)."""
    return getattr(DEVICES.get(name), "score_on", name)


def check_layer_device(layer, device) -> None:
    if device.name not in layer.devices:
        raise DeviceError(f"{layer.describe()} cannot run on device {device.name!r} "
                          f"(it runs on: {', '.join(layer.devices)})")
