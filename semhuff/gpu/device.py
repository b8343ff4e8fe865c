"""``--device cuda``: the device, its backends, and the session of the *batched* form, which owns
the weights on the GPU and trains them in batches of pairs (p-tHSM), with the numba.cuda or
the CuPy backend. The default form, one block a sentence, is ``sentence_session``.

Importing this module imports neither ``numba.cuda`` nor CuPy: ``CudaDevice()`` loads the
backend, and a missing package or the absence of a usable GPU is a one-sentence ``DeviceError``
right there (before any corpus is read).

Per chunk (``GpuSession.train_chunk``), in the trainer's worker thread:

1. the CPU generates the chunk's pairs with the sentence loop's ``PAIRS`` body (``pairs.py``:
   the CPU's exact down-sampling, reduced windows and learning-rate decay, nogil Numba), in
   parallel with the other workers;
2. under the session's lock (one stream, one submitter at a time): copy the pairs to the device,
   run the layer's program on batches of ``batch_pairs`` pairs, read the chunk's loss back.

So while one thread feeds the GPU, the others generate the next chunks' pairs and the reader
thread tokenises the corpus: generation and reading overlap the GPU work (``docs/gpu.md``).
"""
from __future__ import annotations

import importlib
import importlib.util
import threading
import time
from typing import Optional

import numpy as np

from ..cpu_session import CpuSession
from ..errors import DeviceError, OptionError
from .pairs import Pairs, PairSource
from .sentences import MAX_SENTENCE_WORDS
from .programs import program_for

# name -> (module, class, what to install): loaded only when asked for
BACKENDS = {
    "numba": ("semhuff.gpu.numba_kernels", "NumbaBackend", "numba-cuda"),
    "cupy": ("semhuff.gpu.cupy_kernels", "CupyBackend", "CuPy (cupy-cuda12x or cupy-cuda13x)"),
}
INSTALL_HINT = "install semhuff[cuda] on a machine with an NVIDIA GPU"


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def load_backend(name: str, blocks: int = 0):
    """The backend object called ``name``; a ``DeviceError`` saying why it is unusable here."""
    module_name, class_name, package = BACKENDS[name]
    if name == "numba" and importlib.util.find_spec("numba_cuda") is None:
        # without numba-cuda, numba.cuda is numba's own deprecated target: it imports, then
        # fails deep inside a session (no get_current_device in its simulator)
        raise DeviceError(f"--device cuda --backend numba: {package} is not installed; "
                          f"{INSTALL_HINT}")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
        return cls(blocks) if name == "numba" else cls()
    except ImportError as exc:
        raise DeviceError(f"--device cuda --backend {name}: {package} is not installed "
                          f"({_one_line(exc)}); {INSTALL_HINT}") from None
    except Exception as exc:  # no driver, no device, a broken install: one sentence, no traceback
        raise DeviceError(f"--device cuda: no CUDA GPU is usable here ({name}: "
                          f"{_one_line(exc)}); {INSTALL_HINT}") from None


MODES = ("sentence", "batched")


class CudaDevice:
    """``make_device("cuda", backend, mode=, ...)``. Two forms (docs/gpu.md):

    * ``mode="sentence"`` (the default with numba): a block walks a sentence in word2vec's
      order (``sentence_session``); ``blocks`` the grid of a launch (N blocks, each walking
      every N-th sentence; 0, the default: one block a sentence, a chunk's ~2,000 at once:
      on an H200 as good as 32-512 blocks, WS353 / SimLex / analogy within 0.015, and 1.5-17x
      faster, docs/gpu.md), ``updates`` "atomic" (the default: every block's change of a row
      lands) or "plain" (read-modify-write: concurrent changes may be lost), ``sentence_words`` the
      longest sentence a block walks (longer ones are cut: word2vec.c's 1,000 by default),
      ``chunk_words`` the fewest raw words a launch takes
      (``sentence_session.DEFAULT_CHUNK_WORDS``);
    * ``mode="batched"`` (the only form of the CuPy backend): pairs made on the CPU, trained in
      synchronous batches of ``batch_pairs`` (p-tHSM); ``damping`` the stale-sum damping of
      rows many pairs of a batch touch (off only for experiments: large batches diverge without
      it); ``blocks`` the grid (0: 32 per multiprocessor).

    A setting of the other form is refused by name, never silently unused."""

    name = kind = "cuda"
    backends = tuple(BACKENDS)
    modes = MODES
    score_on = "cpu"  # held-out scoring (exact float64) runs on the CPU, after to_host()
    DEFAULT_BATCH_PAIRS = 8192
    DEFAULT_BLOCKS = 0
    UPDATES = ("atomic", "plain")
    _MODE_OPTIONS = {"sentence": ("sentence_words", "chunk_words", "updates"),
                     "batched": ("batch_pairs", "damping")}

    def __init__(self, backend=None, mode: Optional[str] = None, batch_pairs: Optional[int] = None,
                 damping: Optional[bool] = None, blocks: Optional[int] = None,
                 sentence_words: Optional[int] = None, chunk_words: Optional[int] = None,
                 updates: Optional[str] = None):
        given_object = not (backend is None or isinstance(backend, str))
        name = backend.name if given_object else (backend or "numba")
        if not given_object and name not in BACKENDS:
            raise OptionError(f"unknown backend {name!r} for device 'cuda'; available: "
                              f"{', '.join(BACKENDS)}")
        if mode is None:
            mode = "sentence" if name == "numba" else "batched"
        if mode not in MODES:
            raise OptionError(f"unknown device mode {mode!r}; available: {', '.join(MODES)}")
        if mode == "sentence" and name != "numba":
            raise OptionError("the sentence-per-block form runs on the numba backend only; the "
                              "CuPy backend trains the batched form (device mode 'batched')")
        given = {"batch_pairs": batch_pairs, "damping": damping, "updates": updates,
                 "sentence_words": sentence_words, "chunk_words": chunk_words}
        for other, names in self._MODE_OPTIONS.items():
            for option in names:
                if other != mode and given[option] is not None:
                    raise OptionError(f"{option} is a setting of the {other} form; this device "
                                      f"runs the {mode} form (device mode {other!r} to use it)")
        self.mode = mode
        self.batch_pairs = _positive("batch_pairs", batch_pairs, self.DEFAULT_BATCH_PAIRS)
        damping = True if damping is None else damping
        if not isinstance(damping, (bool, np.bool_)):
            raise OptionError(f"damping must be true or false, got {damping!r}")
        self.damping = bool(damping)
        self.blocks = _positive("blocks", blocks, self.DEFAULT_BLOCKS if mode == "sentence" else 0,
                                zero_ok=True)
        self.updates = updates or "atomic"
        if self.updates not in self.UPDATES:
            raise OptionError(f"updates must be one of {', '.join(self.UPDATES)}, got {updates!r}")
        self.sentence_words = _positive("sentence_words", sentence_words, MAX_SENTENCE_WORDS)
        self.chunk_words = _positive("chunk_words", chunk_words, 0, zero_ok=True)
        # a backend object: the tests' host twin of the batched form
        self.backend = backend if given_object else load_backend(name, self.blocks)

    def open(self, syn0: np.ndarray, layer, workers: int):
        if self.mode == "sentence":
            from .sentence_session import SentenceSession
            return SentenceSession(self, syn0, layer, workers)
        return GpuSession(self, syn0, layer, workers)


def _positive(name, value, default, zero_ok=False):
    if value is None:
        return default
    if not isinstance(value, (int, np.integer)) or value < (0 if zero_ok else 1):
        raise OptionError(f"{name} must be an integer >= {0 if zero_ok else 1}, got {value!r}")
    return int(value)


class DevicePairs:
    """The device copy of a chunk's pairs: buffers that grow as needed and are reused."""

    def __init__(self, backend):
        self.backend = backend
        self._buffers = {}
        self.dummy_starts = backend.upload(np.zeros(1, np.int64))
        self.host: Optional[Pairs] = None

    def _put(self, name, host):
        buf = self._buffers.get(name)
        if buf is None or buf.shape[0] < len(host):
            buf = self.backend.empty(max(int(len(host) * 1.25), 1024), host.dtype)
            self._buffers[name] = buf
        return self.backend.put(buf, host)

    def load(self, pairs: Pairs) -> "DevicePairs":
        self.host = pairs
        self.inputs = self._put("inputs", pairs.inputs)
        self.starts = None if pairs.starts is None else self._put("starts", pairs.starts)
        self.targets = self._put("targets", pairs.targets)
        self.rates = self._put("rates", pairs.rates)
        return self

    @property
    def nbytes(self) -> int:
        return sum(int(b.nbytes) for b in self._buffers.values())


class GpuSession:
    """The weights live on the device from ``open`` to ``close``; ``to_host`` copies them back
    into the model's arrays (the trainer calls it before hooks and at the end)."""

    def __init__(self, device: CudaDevice, syn0: np.ndarray, layer, workers: int):
        if layer.word_stats is not None:
            raise DeviceError("per-word statistics (word_stats) are counted by the CPU kernels "
                              "only; train with device='cpu'")
        self.syn0 = syn0
        self.layer = layer
        self.backend = device.backend
        self.batch_pairs = device.batch_pairs
        self.damping = device.damping
        # generation threads: each generates its chunk's pairs in parallel, then waits its turn
        # at the device (the lock); so up to 2 x workers chunks are in flight
        self.concurrency = max(1, int(workers))
        self.program = program_for(layer, self.backend.name)
        self._lock = threading.Lock()
        self._pair_source = PairSource(syn0.shape[1])
        self._pairs = DevicePairs(self.backend)
        self._scorer = None
        self.stats = {"device": self.backend.device_name(), "backend": self.backend.name,
                      "pairs": 0, "batches": 0, "chunks": 0, "device_seconds": 0.0,
                      "peak_memory_bytes": 0, "model_bytes": 0}
        self.d_syn0 = self.backend.upload(syn0)
        self._upload_layer()

    def _upload_layer(self) -> None:
        layer = self.layer
        self.d_weights = self.backend.upload(layer.weights)
        self.program.upload(self)
        reserve = getattr(self.backend, "reserve", None)
        if reserve is not None:
            try:
                reserve(self.batch_pairs, self.program.width, self.syn0.shape[1],
                        layer.weights.shape[0], self.syn0.shape[0])
            except ValueError as exc:
                raise DeviceError(f"{layer.describe()}: {exc}") from None
        self.stats["model_bytes"] = int(self.syn0.nbytes + layer.weights.nbytes)
        self._note_memory()

    def _note_memory(self) -> None:
        used = self.backend.memory_in_use()
        self.stats["peak_memory_bytes"] = max(self.stats["peak_memory_bytes"], used)

    # -- the session interface (devices.py) -------------------------------------------------------
    def warm_up(self, plan, score: bool = False) -> float:
        """Compile the pair generator (CPU, Numba's disk cache) and the device kernels (the
        first launch compiles them), on an empty chunk: no weight changes."""
        if score:
            return self._cpu_scorer().warm_up(plan, score=True)
        started = time.perf_counter()
        empty = self._pair_source.generate(plan, np.zeros(0, np.int32), np.zeros(0, np.int64),
                                           0, 1)
        with self._lock:
            pairs = self._pairs.load(empty)
            self.backend.begin_chunk()
            self.program.train_batch(self, plan, pairs, 0, 0, 1)
            self.backend.take_loss()
        return time.perf_counter() - started

    def train_chunk(self, plan, chunk, words_before: int, seed):
        pairs = self._pair_source.generate(plan, chunk.ids, chunk.bounds, words_before, seed)
        with self._lock:
            started = time.perf_counter()
            device_pairs = self._pairs.load(pairs)
            self.backend.begin_chunk()
            step = self.batch_pairs
            for p0 in range(0, pairs.n, step):
                self.program.train_batch(self, plan, device_pairs, p0, min(step, pairs.n - p0),
                                         seed)
            loss = self.backend.take_loss()  # waits for the device
            stats = self.stats
            stats["device_seconds"] += time.perf_counter() - started
            stats["pairs"] += pairs.n
            stats["batches"] += -(-pairs.n // step)
            stats["chunks"] += 1
            self._note_memory()
        return loss, pairs.n, pairs.trained

    def _cpu_scorer(self):
        """Scoring runs on the CPU kernels (exact float64) over the host arrays."""
        if self._scorer is None:
            self.to_host()
            self._scorer = CpuSession(self.syn0, self.layer, self.concurrency)
        return self._scorer

    def score_chunk(self, plan, chunk, part: int = 0):
        return self._cpu_scorer().score_chunk(plan, chunk, part)

    def to_host(self) -> None:
        with self._lock:
            self.backend.download(self.d_syn0, self.syn0)
            self.backend.download(self.d_weights, self.layer.weights)
            self.program.to_host(self)

    def layer_changed(self) -> None:
        """A hook changed the layer's arrays on the host: upload them (weights included)."""
        with self._lock:
            self._upload_layer()
        self._scorer = None

    def close(self) -> None:
        self.d_syn0 = self.d_weights = None
        self._pairs = None
        self._scorer = None
