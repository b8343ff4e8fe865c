"""``--device cuda`` (the default ``sentence`` form): the weights live on the GPU and each chunk is
one launch of the sentence-per-block kernel (``sentence_kernels``), word2vec's updates in
word2vec's order inside every sentence.

Per chunk (``train_chunk``, in one of the trainer's worker threads):

1. on the host: the chunk's sentences cut at ``sentence_words`` (``sentences.split_bounds``)
   and its ids, sentence ends and block seeds copied into one of the session's pinned *slots*;
2. under the session's lock: the slot's upload, the launch (and, for a self-organized tree, the
   launch of its cluster statistic over the centres the first sampled) and the read-back of the
   chunk's results (nll, predictions, words kept, centres sampled), queued on the slot's own
   stream;
3. outside the lock: wait for that stream, read the results.

Only token ids travel (and the sentence ends and seeds, a few KB). There are ``concurrency``
slots and as many worker threads (the trainer keeps one more chunk in flight), so while one
chunk's kernel runs the next chunk is cut, copied, uploaded and launched on another stream, and
the reader thread tokenises the one after: the GPU does not wait for the host between chunks.
The results are read once a chunk.

How many sentences are trained at once is the quality's question (docs/gpu.md, the concurrency
estimate): a launch runs ``blocks`` blocks (each walking every ``blocks``-th sentence of the
chunk), and two launches may overlap, so at most ``2 x blocks`` sentences are in flight. The
session asks the trainer for chunks of at least ``chunk_words`` raw words
(``DEFAULT_CHUNK_WORDS``), so that a block walks several sentences a launch.
"""
from __future__ import annotations

import logging
import os
import queue
import threading
import time

import numpy as np

from ..cpu_session import CpuSession
from ..errors import DeviceError
from ..kernels.common import NLL_BY_CODE, SIGMOID_TABLE
from .programs import sentence_body_for
from .sentences import block_seeds, split_bounds

logger = logging.getLogger(__name__)

DEFAULT_CHUNK_WORDS = 2_000_000
RESULTS = 4  # read back per chunk: summed nll, predictions, words kept, centres sampled


class _Slot:
    """Pinned host buffers, device buffers and a stream for one chunk in flight."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.stream = cuda.stream()
        self.sizes = {}
        self.results = cuda.pinned_array(RESULTS, np.float64)
        self.d_results = cuda.device_array(RESULTS, np.float64)
        self.zeros = cuda.pinned_array(RESULTS, np.float64)
        self.zeros[:] = 0.0
        self.pinned, self.device = {}, {}

    def buffer(self, name: str, n: int, dtype, width: int = 0, host: bool = True):
        """This slot's device buffer ``name`` (and its pinned twin) of at least ``n`` rows:
        grown by a quarter when too small, reused otherwise."""
        if self.sizes.get(name, -1) < n:
            size = max(int(n * 1.25), 64)
            shape = (size, width) if width else size
            if host:
                self.pinned[name] = self.cuda.pinned_array(shape, dtype)
            self.device[name] = self.cuda.device_array(shape, dtype)
            self.sizes[name] = size
        return self.device[name]

    def upload(self, name: str, values: np.ndarray, dtype):
        """``values`` into the pinned buffer, then queued for the device; the device view."""
        n = len(values)
        device = self.buffer(name, n, dtype)
        self.pinned[name][:n] = values
        view = device[:n]
        if n:
            view.copy_to_device(self.pinned[name][:n], stream=self.stream)
        return view


class SentenceSession:
    """The ``Session`` (``semhuff.devices``) of the sentence-per-block form, numba.cuda only."""

    mode = "sentence"
    # threads a block: a warp; the simulator tests run fewer (``SEMHUFF_GPU_LANES``, tests only)
    lanes = None
    # blocks of the statistic's launch (each walking every N-th sampled centre); the tests run
    # one, which observes in the CPU's order
    observe_blocks = 1024

    def __init__(self, device, syn0: np.ndarray, layer, workers: int):
        from . import sentence_kernels
        if layer.word_stats is not None:
            raise DeviceError("per-word statistics (word_stats) are counted by the CPU kernels "
                              "only; train with device='cpu'")
        self._kernels = sentence_kernels
        self.cuda = cuda = sentence_kernels.cuda
        self.lanes = int(self.lanes or os.environ.get("SEMHUFF_GPU_LANES", 0)
                         or sentence_kernels.WARP)
        self.syn0, self.layer = syn0, layer
        self.blocks = int(device.blocks)            # a launch's grid (0: one block a sentence)
        self.atomic = device.updates == "atomic"
        self.sentence_words = int(device.sentence_words)
        self.chunk_words = int(device.chunk_words or DEFAULT_CHUNK_WORDS)
        # chunks launched and waited on at once; one block: one chunk at a time, in the corpus's
        # order, so that it trains the CPU kernel's model (two chunks' threads may swap turns)
        self.concurrency = 1 if self.blocks == 1 else 2
        self._lock = threading.Lock()
        self._slots: "queue.Queue" = queue.Queue()
        for _ in range(self.concurrency):
            self._slots.put(_Slot(cuda))
        self._scorer = None
        self._keep = (None, None)
        self._warned_picks = False
        self.stats = {"mode": self.mode, "device": _device_name(cuda), "backend": "numba",
                      "chunks": 0, "sentences": 0, "blocks": 0, "pairs": 0,
                      "device_seconds": 0.0, "peak_memory_bytes": 0, "model_bytes": 0}
        self.d_syn0 = cuda.to_device(syn0)
        self.d_sig = cuda.to_device(SIGMOID_TABLE)
        self.d_nll = cuda.to_device(NLL_BY_CODE)
        self._dummy = {"rows": cuda.to_device(np.zeros((1, syn0.shape[1]), np.float32)),
                       "int1": cuda.to_device(np.zeros(1, np.int32)),
                       "int2": cuda.to_device(np.zeros((1, 1), np.int32)),
                       "u32": cuda.to_device(np.zeros(1, np.uint32)),
                       "f32": cuda.to_device(np.zeros(1, np.float32)),
                       "q": cuda.to_device(np.zeros((1, 1), np.float32)),
                       "picks": cuda.to_device(np.zeros((1, 2), np.int32))}
        self._upload_layer()

    # -- the layer on the device ------------------------------------------------------------------
    def _upload_layer(self) -> None:
        cuda, dummy = self.cuda, self._dummy
        body = self.body = sentence_body_for(self.layer)
        if body.hs is not None:
            points, codes, lengths = body.hs
            self.d_hs = (cuda.to_device(body.hs_weights), cuda.to_device(points),
                         cuda.to_device(codes), cuda.to_device(lengths))
        else:
            self.d_hs = (dummy["rows"], dummy["int2"], dummy["int2"], dummy["int1"])
        if body.ns is not None:
            alias_thr, alias_idx, _ = body.ns
            self.d_ns = (cuda.to_device(body.ns_weights), cuda.to_device(alias_thr),
                         cuda.to_device(alias_idx))
        else:
            self.d_ns = (dummy["rows"], dummy["u32"], dummy["int1"])
        stat = body.statistic
        self.d_stat = None if stat is None else {
            "q": cuda.to_device(stat.q), "top_row": cuda.to_device(stat.top_row),
            "top_child": cuda.to_device(np.ascontiguousarray(stat.top_child, np.int32))}
        self.stats["model_bytes"] = int(self.syn0.nbytes + sum(w.nbytes for w in body.weights()))
        self._note_memory()

    def _kernel(self, plan):
        b = self.body
        try:
            return self._kernels.sentence_kernel(
                bool(plan.sg), self.syn0.shape[1], int(plan.window), bool(plan.cbow_mean),
                b.hs is not None, int(b.top), bool(b.saturate), b.negative, bool(b.ns_batched),
                self.lanes, self.atomic, b.statistic is not None)
        except ValueError as exc:
            raise DeviceError(f"{self.layer.describe()}: {exc}") from None

    def _keep_thr(self, plan):
        if self._keep[0] is not plan.keep_thr:  # one upload per train() call
            self._keep = (plan.keep_thr, self.cuda.to_device(plan.keep_thr))
        return self._keep[1]

    def _note_memory(self) -> None:
        try:
            free, total = self.cuda.current_context().get_memory_info()
            used = int(total - free)
        except Exception:  # the simulator does not track memory
            used = 0
        self.stats["peak_memory_bytes"] = max(self.stats["peak_memory_bytes"], used)

    # -- the session interface ----------------------------------------------------------------------
    def warm_up(self, plan, score: bool = False) -> float:
        """Compile the kernels for this configuration (their first launch, on no sentence)."""
        if score:
            return self._cpu_scorer().warm_up(plan, score=True)
        started = time.perf_counter()
        self._launch(plan, np.zeros(0, np.int32), np.zeros(0, np.int64), 0, 1, count=False)
        return time.perf_counter() - started

    def train_chunk(self, plan, chunk, words_before: int, seed):
        return self._launch(plan, chunk.ids, chunk.bounds, words_before, seed)

    def _launch(self, plan, ids, bounds, words_before, seed, count=True):
        if plan.lockf is not None:
            raise DeviceError("locked input vectors are trained on the CPU only")
        kernel = self._kernel(plan)
        bounds = split_bounds(bounds, self.sentence_words)
        grid = max(1, len(bounds) if not self.blocks else min(self.blocks, len(bounds)))
        stat = self.body.statistic
        slot = self._slots.get()
        try:
            with self._lock:
                started = time.perf_counter()
                stream = slot.stream
                d_ids = slot.upload("ids", ids, np.int32)
                d_bounds = slot.upload("bounds", bounds, np.int64)
                d_seeds = slot.upload("seeds", block_seeds(seed, grid), np.uint64)
                d_kept = slot.buffer("kept", len(ids), np.int32, host=False)
                slot.d_results.copy_to_device(slot.zeros, stream=stream)
                picks, pick_count, sample_thr, lam = self._pick_buffers(slot, ids, plan.window)
                syn1, points, codes, lengths = self.d_hs
                syn1neg, alias_thr, alias_idx = self.d_ns
                s = plan.schedule
                kernel[grid, self.lanes, stream](
                    d_ids, d_bounds, d_kept, d_seeds, self.d_syn0, syn1, points, codes, lengths,
                    syn1neg, alias_thr, alias_idx, self.d_sig, self.d_nll, self._keep_thr(plan),
                    bool(plan.reduce_window), float(s.alpha), float(s.min_alpha),
                    int(words_before), int(s.total_words), slot.d_results, sample_thr, picks,
                    pick_count)
                if stat is not None:
                    self._observe(slot, plan, picks, pick_count, lam)
                slot.d_results.copy_to_host(slot.results, stream=stream)
            stream.synchronize()
            loss, pairs, trained, sampled = (float(slot.results[0]), int(slot.results[1]),
                                             int(slot.results[2]), int(slot.results[3]))
        finally:
            self._slots.put(slot)
        if stat is not None and sampled > picks.shape[0] and not self._warned_picks:
            self._warned_picks = True
            logger.warning("the cluster statistic kept %d of a chunk's %d sampled centres",
                           picks.shape[0], sampled)
        if count:
            self._record(time.perf_counter() - started, len(bounds), grid, pairs)
        return loss, pairs, trained

    def _pick_buffers(self, slot, ids, window):
        """(picks, pick_count, sample_thr, lam) for the launch: dummies without a statistic; else
        room for 1.5 times the centres the chunk's words sample on average (before
        down-sampling, so more than it will), and this train() call's sampling rates."""
        if self.body.statistic is None:
            return self._dummy["picks"], self._dummy["int1"], self._dummy["u32"], None
        # the layer's rates now: ``prepare`` sets them, and none once it stops gathering
        stat = sentence_body_for(self.layer).statistic
        expected = float(stat.sample_thr[ids].sum(dtype=np.float64)) / 2.0 ** 32
        rows = int(1.5 * expected) + 64
        picks = slot.buffer("picks", rows, np.int32, width=2 + 2 * int(window), host=False)
        pick_count = slot.upload("pick_count", np.zeros(1, np.int32), np.int32)[:1]
        return (picks[:rows], pick_count, slot.upload("sample_thr", stat.sample_thr, np.uint32),
                slot.upload("lam", stat.lam, np.float32))

    def _observe(self, slot, plan, picks, pick_count, lam) -> None:
        """The statistic's launch, after the training launch on the same stream."""
        d = self.d_stat
        n_top = len(self.body.statistic.top_row)
        grid = max(1, min(self.observe_blocks, picks.shape[0]))
        logp = slot.buffer("logp", grid, np.float64, width=max(n_top, 1), host=False)
        observe = self._kernels.observe_kernel(bool(plan.sg), self.syn0.shape[1],
                                               bool(plan.cbow_mean), self.lanes)
        observe[grid, self.lanes, slot.stream](self.d_syn0, self.d_hs[0], picks, pick_count,
                                               d["q"], lam, d["top_row"], d["top_child"],
                                               self.d_nll, logp)
        self._kernels.copy_count[1, 1, slot.stream](pick_count, slot.d_results)

    def _record(self, seconds, sentences, blocks, pairs) -> None:
        with self._lock:
            stats = self.stats
            stats["device_seconds"] += seconds
            stats["chunks"] += 1
            stats["sentences"] += sentences
            stats["blocks"] = max(stats["blocks"], blocks)
            stats["pairs"] += pairs
            self._note_memory()

    def _cpu_scorer(self):
        """Scoring runs on the CPU kernels (exact float64) over the host arrays."""
        if self._scorer is None:
            self.to_host()
            self._scorer = CpuSession(self.syn0, self.layer, 1)
        return self._scorer

    def score_chunk(self, plan, chunk, part: int = 0):
        return self._cpu_scorer().score_chunk(plan, chunk, part)

    def to_host(self) -> None:
        with self._lock:
            self.cuda.synchronize()
            self.d_syn0.copy_to_host(self.syn0)
            body = self.body
            if body.hs is not None:
                self.d_hs[0].copy_to_host(body.hs_weights)
            if body.ns is not None:
                self.d_ns[0].copy_to_host(body.ns_weights)
            if body.statistic is not None:
                self.d_stat["q"].copy_to_host(body.statistic.q)

    def layer_changed(self) -> None:
        """A hook changed the layer's arrays on the host: upload them (weights included)."""
        with self._lock:
            self.cuda.synchronize()
            self._upload_layer()
        self._scorer = None

    def close(self) -> None:
        self.d_syn0 = self.d_hs = self.d_ns = self.d_stat = None
        self._scorer = None


def _device_name(cuda) -> str:
    name = getattr(cuda.get_current_device(), "name", "CUDA simulator")
    return name.decode() if isinstance(name, bytes) else str(name)
