"""``--device cuda`` (the default ``sentence`` mode): the weights live on the GPU and each chunk is
one launch of the sentence-per-block kernel (``sentence_kernels``), word2vec's updates in
word2vec's order inside every sentence.

Per chunk (``train_chunk``, in one of the trainer's worker threads):

1. on the host: the chunk's sentences cut at ``sentence_words`` (``sentences.split_bounds``)
   and its ids and sentence ends copied into one of the session's pinned *slots*;
2. under the session's lock: the slot's upload, the launch and the read-back of the chunk's
   three results (nll, predictions, words kept) queued on the slot's own stream;
3. outside the lock: wait for that stream, read the results.

Only token ids (and the sentence ends, a few KB) travel. There are ``concurrency`` slots and as
many worker threads (the trainer keeps one more chunk in flight), so while one chunk's kernel
runs the next chunk is cut, copied, uploaded and launched on another stream, and the reader
thread tokenises the one after: the GPU does not wait for the host between chunks, and a new
launch's blocks fill the multiprocessors as the last one's finish. The results are read once a
chunk.

A chunk is one launch, and a launch keeps as many blocks busy as it has sentences: the session
asks the trainer for chunks of at least ``chunk_words`` raw words (``DEFAULT_CHUNK_WORDS``, 2,000
sentences of 1,000 words; the trainer's own default is 100,000).
"""
from __future__ import annotations

import os
import queue
import threading
import time

import numpy as np

from ..cpu_session import CpuSession
from ..errors import DeviceError
from ..kernels.common import NLL_BY_CODE, SIGMOID_TABLE
from .programs import sentence_body_for
from .sentences import MAX_SENTENCE_WORDS, block_seeds, split_bounds

DEFAULT_CHUNK_WORDS = 2_000_000


class _Slot:
    """Pinned host buffers, device buffers and a stream for one chunk in flight."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.stream = cuda.stream()
        self.capacity = (-1, -1, -1)  # nothing allocated yet
        self.out = cuda.pinned_array(3, np.float64)
        self.d_out = cuda.device_array(3, np.float64)
        self.zeros = cuda.pinned_array(3, np.float64)
        self.zeros[:] = 0.0

    def fit(self, n_ids: int, n_sentences: int, n_blocks: int) -> None:
        cuda = self.cuda
        ids_cap, sent_cap, block_cap = self.capacity
        if n_ids > ids_cap:
            ids_cap = max(int(n_ids * 1.25), 1024)
            self.ids = cuda.pinned_array(ids_cap, np.int32)
            self.d_ids = cuda.device_array(ids_cap, np.int32)
            self.d_kept = cuda.device_array(ids_cap, np.int32)
        if n_sentences > sent_cap:
            sent_cap = max(int(n_sentences * 1.25), 64)
            self.bounds = cuda.pinned_array(sent_cap, np.int64)
            self.d_bounds = cuda.device_array(sent_cap, np.int64)
        if n_blocks > block_cap:
            block_cap = max(int(n_blocks * 1.25), 64)
            self.seeds = cuda.pinned_array(block_cap, np.uint64)
            self.d_seeds = cuda.device_array(block_cap, np.uint64)
        self.capacity = (ids_cap, sent_cap, block_cap)


class SentenceSession:
    """The ``Session`` (``semhuff.devices``) of the sentence-per-block form, numba.cuda only."""

    mode = "sentence"
    # threads a block: a warp; the simulator tests run fewer (``SEMHUFF_GPU_LANES``, tests only)
    lanes = None

    def __init__(self, device, syn0: np.ndarray, layer, workers: int):
        from . import sentence_kernels
        if layer.word_stats is not None:
            raise DeviceError("per-word statistics (word_stats) are counted by the CPU kernels "
                              "only; train with device='cpu'")
        self._kernels = sentence_kernels
        self.cuda = sentence_kernels.cuda
        self.lanes = int(self.lanes or os.environ.get("SEMHUFF_GPU_LANES", 0)
                         or sentence_kernels.WARP)
        self.syn0, self.layer = syn0, layer
        self.blocks = int(device.blocks)            # a launch's grid (0: one block a sentence)
        self.atomic = device.updates == "atomic"
        self.sentence_words = int(device.sentence_words)
        self.chunk_words = int(device.chunk_words or DEFAULT_CHUNK_WORDS)
        self.concurrency = 2                        # chunks launched and waited on at once
        self.backend_name = "numba"
        self._lock = threading.Lock()
        self._slots: "queue.Queue" = queue.Queue()
        for _ in range(self.concurrency):
            self._slots.put(_Slot(self.cuda))
        self._scorer = None
        self._keep = (None, None)
        self.stats = {"mode": self.mode, "device": _device_name(self.cuda), "backend": "numba",
                      "chunks": 0, "sentences": 0, "blocks": 0, "pairs": 0,
                      "device_seconds": 0.0, "peak_memory_bytes": 0, "model_bytes": 0}
        self.d_syn0 = self.cuda.to_device(syn0)
        self.d_sig = self.cuda.to_device(SIGMOID_TABLE)
        self.d_nll = self.cuda.to_device(NLL_BY_CODE)
        self._dummy_rows = self.cuda.to_device(np.zeros((1, syn0.shape[1]), np.float32))
        self._dummy_int = self.cuda.to_device(np.zeros((1, 1), np.int32))
        self._dummy_u32 = self.cuda.to_device(np.zeros(1, np.uint32))
        self._upload_layer()

    # -- the layer on the device ------------------------------------------------------------------
    def _upload_layer(self) -> None:
        cuda = self.cuda
        body = self.body = sentence_body_for(self.layer)
        if body.hs is not None:
            points, codes, lengths = body.hs
            self.d_hs = (cuda.to_device(body.hs_weights), cuda.to_device(points),
                         cuda.to_device(codes), cuda.to_device(lengths))
        else:
            one = self._dummy_int
            self.d_hs = (self._dummy_rows, one, one, cuda.to_device(np.zeros(1, np.int32)))
        if body.ns is not None:
            alias_thr, alias_idx, _ = body.ns
            self.d_ns = (cuda.to_device(body.ns_weights), cuda.to_device(alias_thr),
                         cuda.to_device(alias_idx))
        else:
            self.d_ns = (self._dummy_rows, self._dummy_u32, cuda.to_device(np.zeros(1, np.int32)))
        self.stats["model_bytes"] = int(self.syn0.nbytes + sum(w.nbytes for w in body.weights()))
        self._note_memory()

    def _kernel(self, plan):
        b = self.body
        try:
            return self._kernels.sentence_kernel(
                bool(plan.sg), self.syn0.shape[1], int(plan.window), bool(plan.cbow_mean),
                b.hs is not None, int(b.top), bool(b.saturate), b.negative, bool(b.ns_batched),
                self.lanes, self.atomic)
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
        """Compile the kernel for this configuration (its first launch, on no sentence)."""
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
        n_sentences = len(bounds)
        grid = max(1, n_sentences if not self.blocks else min(self.blocks, n_sentences))
        slot = self._slots.get()
        try:
            slot.fit(len(ids), n_sentences, grid)
            slot.ids[:len(ids)] = ids
            slot.bounds[:n_sentences] = bounds
            slot.seeds[:grid] = block_seeds(seed, grid)
            s = plan.schedule
            with self._lock:
                started = time.perf_counter()
                stream = slot.stream
                d_ids, d_bounds = slot.d_ids[:len(ids)], slot.d_bounds[:n_sentences]
                d_seeds = slot.d_seeds[:grid]
                if len(ids):
                    d_ids.copy_to_device(slot.ids[:len(ids)], stream=stream)
                if n_sentences:
                    d_bounds.copy_to_device(slot.bounds[:n_sentences], stream=stream)
                d_seeds.copy_to_device(slot.seeds[:grid], stream=stream)
                slot.d_out.copy_to_device(slot.zeros, stream=stream)
                syn1, points, codes, lengths = self.d_hs
                syn1neg, alias_thr, alias_idx = self.d_ns
                kernel[grid, self.lanes, stream](
                    d_ids, d_bounds, slot.d_kept, d_seeds, self.d_syn0, syn1, points, codes,
                    lengths, syn1neg, alias_thr, alias_idx, self.d_sig, self.d_nll,
                    self._keep_thr(plan), bool(plan.reduce_window), float(s.alpha),
                    float(s.min_alpha), int(words_before), int(s.total_words), slot.d_out)
                slot.d_out.copy_to_host(slot.out, stream=stream)
            stream.synchronize()
            loss, pairs, trained = (float(slot.out[0]), int(slot.out[1]), int(slot.out[2]))
        finally:
            self._slots.put(slot)
        if count:
            self._record(time.perf_counter() - started, n_sentences, grid, pairs)
        return loss, pairs, trained

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

    def layer_changed(self) -> None:
        """A hook changed the layer's arrays on the host: upload them (weights included)."""
        with self._lock:
            self.cuda.synchronize()
            self._upload_layer()
        self._scorer = None

    def close(self) -> None:
        self.d_syn0 = self.d_hs = self.d_ns = None
        self._scorer = None


def _device_name(cuda) -> str:
    name = getattr(cuda.get_current_device(), "name", "CUDA simulator")
    return name.decode() if isinstance(name, bytes) else str(name)
