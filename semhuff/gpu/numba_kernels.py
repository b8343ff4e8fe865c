"""The numba.cuda backend: the p-tHSM batch as three CUDA kernels on one stream.

Importing this module imports ``numba.cuda`` (the ``numba-cuda`` package, or numba's deprecated
built-in target); ``semhuff.gpu.device`` imports it only when ``--device cuda --backend numba`` is
asked for. Under ``NUMBA_ENABLE_CUDASIM=1`` the same kernels run in Numba's CUDA simulator (every
CUDA thread a Python thread), which is how the tests check them on machines without a GPU.

One batch of ``n`` pairs (``docs/gpu.md``):

* ``prepare_hs`` / ``prepare_ns`` (one thread per pair): each pair's output rows and 0/1 labels,
  ``counts[q]`` entries (HS: the target's path; NS: the target and its noise words from the
  counter-based draw in ``noise.py``, one equal to the target dropped). They also clear the
  previous batch's per-row counters.
* ``forward`` (one 32-thread block per pair, threads over the vector dimension): the input vector
  (skip-gram: one row; CBOW: mean or sum of the contexts), the partial dot products of every path
  node at once into shared memory, then one thread per node finishes its logit, gradient and
  loss (p-tHSM: all nodes of a pair in parallel), and the input's error ``sum g_i row_i``.
  Reads only; writes the batch's ``h``, ``err`` and ``g`` buffers and, per row, how many entries
  of the batch touch it and their summed curvature (for the damping).
* ``update`` (one block per pair): ``row_i += g_i * damping * h`` and ``syn0[c] += err *
  damping`` with ``cuda.atomic.add``. Because the update kernel starts after the forward kernel
  has finished, every read of a batch sees the weights as they were before the batch: the result
  is synchronous minibatch SGD with the stale-sum damping (docs/gpu.md), the same as the CuPy
  backend and the float64 reference, up to the order of float additions.

Reductions use shared memory and ``syncthreads`` rather than warp shuffles, which the simulator
cannot run: the tested code is the code that runs on the GPU.
"""
from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numba import cuda  # the name must be ``cuda``: the simulator swaps it in kernels' globals

from .noise import mix32 as _mix32_py


# NumPy names that numba-cuda releases register (or call) and NumPy removed: old name -> the
# function it was an alias of
REMOVED_NUMPY_NAMES = {"row_stack": "vstack", "trapz": "trapezoid", "in1d": "isin"}


def restore_numpy_names() -> None:
    """numba-cuda releases older than the NumPy they run with register overloads of NumPy names
    that NumPy has since removed, at their first kernel compile: ``np.row_stack`` (an H200's
    image, 2026-11-27: every kernel failed with ``AttributeError``) and, in 0.22-0.29 with NumPy
    2.4, ``np.trapz``. Put each back as the alias it was (``REMOVED_NUMPY_NAMES``). Run on
    import: every numba.cuda kernel module of semhuff imports this one."""
    for old, current in REMOVED_NUMPY_NAMES.items():
        if not hasattr(np, old) and hasattr(np, current):
            setattr(np, old, getattr(np, current))


restore_numpy_names()

WARP = 32
LOSS_SLOTS = 256
PREPARE_THREADS = 128
MAX_EXP = 6.0
MAX_WIDTH = 160  # output entries per pair: about 2 x (MAX_WIDTH x 32) floats of shared memory a block

f32 = numba.float32
_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_GOLDEN = np.uint64(0x9E3779B9)

mix32 = cuda.jit(device=True)(_mix32_py)


@cuda.jit(device=True)
def noise_word(counter, key_lo, key_hi, alias_thr, alias_idx):
    """The noise word of a counter: ``noise.noise_words`` for one value."""
    u = mix32((mix32((counter ^ key_lo) & _M32) + key_hi) & _M32)
    v = mix32((u + _GOLDEN) & _M32)
    i = (u * np.uint64(alias_idx.shape[0])) >> _S32
    if v < alias_thr[i]:
        return numba.int64(i)
    return numba.int64(alias_idx[i])


@cuda.jit(device=True)
def clear_counters(out_hits, in_hits, out_curv, in_curv, t, stride):
    """The previous batch's per-row counters (the update kernel has read them)."""
    for i in range(t, out_hits.shape[0], stride):
        out_hits[i] = 0
        out_curv[i] = f32(0.0)
    for i in range(t, in_hits.shape[0], stride):
        in_hits[i] = 0
        in_curv[i] = f32(0.0)


@cuda.jit
def prepare_hs(points, codes, lengths, targets, p0, n, rows, labels, counts, out_hits, in_hits,
               out_curv, in_curv):
    t = cuda.grid(1)
    stride = cuda.gridsize(1)
    clear_counters(out_hits, in_hits, out_curv, in_curv, t, stride)
    for q in range(t, n, stride):
        w = targets[p0 + q]
        m = lengths[w]
        counts[q] = m
        for i in range(m):
            rows[q, i] = points[w, i]
            labels[q, i] = f32(1 - codes[w, i])


@cuda.jit
def prepare_ns(alias_thr, alias_idx, negative, targets, p0, n, key_lo, key_hi, rows, labels,
               counts, out_hits, in_hits, out_curv, in_curv):
    t = cuda.grid(1)
    stride = cuda.gridsize(1)
    clear_counters(out_hits, in_hits, out_curv, in_curv, t, stride)
    for q in range(t, n, stride):
        w = targets[p0 + q]
        rows[q, 0] = w
        labels[q, 0] = f32(1.0)
        m = 1
        base = np.uint64(p0 + q) * np.uint64(negative)
        for k in range(negative):
            z = noise_word(base + np.uint64(k), key_lo, key_hi, alias_thr, alias_idx)
            if z != w:
                rows[q, m] = z
                labels[q, m] = f32(0.0)
                m += 1
        counts[q] = m


@cuda.jit(device=True)
def input_range(starts, sg, p):
    if sg:
        return p, p + 1
    return starts[p], starts[p + 1]


@cuda.jit(device=True)
def damping(hits, curv, on):
    """The stale-sum damping of a row's summed update (docs/gpu.md): ``1 / (1 + C (n - 1) / n)``
    for a row ``n`` entries of the batch touched with summed curvature ``C``."""
    if on and hits > 1:
        return f32(1.0) / (f32(1.0) + curv * f32(hits - 1) / f32(hits))
    return f32(1.0)


@cuda.jit(device=True)
def sigmoid(x):
    if x >= 0:
        return f32(1.0) / (f32(1.0) + math.exp(-x))
    e = math.exp(x)
    return e / (f32(1.0) + e)


@cuda.jit(device=True)
def log_sigmoid(x):
    if x >= 0:
        return -math.log1p(math.exp(-x))
    return x - math.log1p(math.exp(x))


@functools.lru_cache(maxsize=None)
def batch_kernels(dim: int, width: int):
    """``(forward, update)`` for vectors of ``dim`` and at most ``width`` outputs per pair
    (compile-time sizes of the per-thread and shared arrays)."""
    if not 1 <= width <= MAX_WIDTH:
        raise ValueError(f"{width} outputs per pair: the CUDA kernels take 1..{MAX_WIDTH}")
    D, L, KD = int(dim), int(width), (int(dim) + WARP - 1) // WARP
    L1 = L + 1  # shared-array shapes must be compile-time constants

    @cuda.jit
    def forward(syn0, weights, inputs, starts, sg, mean, rates, p0, n, rows, labels, counts,
                clip, h_buf, err_buf, g_buf, out_hits, in_hits, out_curv, in_curv, loss):
        lane = cuda.threadIdx.x
        part = cuda.shared.array((L1, WARP), numba.float32)  # partial dots; row L: |h|^2
        sq = cuda.shared.array((L, WARP), numba.float32)        # partial |row_i|^2
        gs = cuda.shared.array(L, numba.float32)                # g_i
        cs = cuda.shared.array(L, numba.float32)                # the input's curvature, by node
        hl = cuda.local.array(KD, numba.float32)
        el = cuda.local.array(KD, numba.float32)
        nll = 0.0
        for q in range(cuda.blockIdx.x, n, cuda.gridDim.x):
            p = p0 + q
            rate = rates[p]
            a, b = input_range(starts, sg, p)
            acc2 = f32(0.0)
            for k in range(KD):
                d = lane + WARP * k
                acc = f32(0.0)
                if d < D:
                    for c in range(a, b):
                        acc += syn0[inputs[c], d]
                    if mean:
                        acc = acc / f32(b - a)
                hl[k] = acc
                el[k] = f32(0.0)
                acc2 += acc * acc
            part[L, lane] = acc2
            m = counts[q]
            for i in range(m):  # every path node's partial dot product (coalesced row reads)
                r = rows[q, i]
                acc = f32(0.0)
                acc2 = f32(0.0)
                for k in range(KD):
                    d = lane + WARP * k
                    if d < D:
                        x = weights[r, d]
                        acc += hl[k] * x
                        acc2 += x * x
                part[i, lane] = acc
                sq[i, lane] = acc2
            cuda.syncthreads()
            h2 = f32(0.0)
            for j in range(WARP):
                h2 += part[L, j]
            for i in range(lane, m, WARP):  # one thread per node: logit, gradient, loss
                s = f32(0.0)
                r2 = f32(0.0)
                for j in range(WARP):
                    s += part[i, j]
                    r2 += sq[i, j]
                label = labels[q, i]
                f = sigmoid(s)
                g = (label - f) * rate
                if clip and (s >= MAX_EXP or s <= -MAX_EXP):
                    g = f32(0.0)
                nll -= log_sigmoid(s if label > 0.5 else -s)
                gs[i] = g
                g_buf[q, i] = g
                curv = f * (f32(1.0) - f) * rate
                cs[i] = curv * r2
                r = rows[q, i]
                cuda.atomic.add(out_hits, r, numba.int32(1))
                cuda.atomic.add(out_curv, r, curv * h2)
            cuda.syncthreads()
            for i in range(m):  # the input's error: sum over the nodes of g_i * row_i
                r = rows[q, i]
                g = gs[i]
                for k in range(KD):
                    d = lane + WARP * k
                    if d < D:
                        el[k] += g * weights[r, d]
            for k in range(KD):
                d = lane + WARP * k
                if d < D:
                    h_buf[q, d] = hl[k]
                    err_buf[q, d] = el[k]
            pc = f32(0.0)
            for i in range(m):
                pc += cs[i]
            for c in range(a + lane, b, WARP):
                cuda.atomic.add(in_hits, inputs[c], numba.int32(1))
                cuda.atomic.add(in_curv, inputs[c], pc)
            cuda.syncthreads()  # the shared arrays are reused by the block's next pair
        cuda.atomic.add(loss, (cuda.blockIdx.x * WARP + lane) % LOSS_SLOTS, nll)

    @cuda.jit(device=True)
    def add_scaled(matrix, r, scale, source, q, lane):
        """``matrix[r] += scale * source[q]``, this thread's dimensions, atomically."""
        for k in range(KD):
            d = lane + WARP * k
            if d < D:
                cuda.atomic.add(matrix, (r, d), scale * source[q, d])

    @cuda.jit
    def update(syn0, weights, inputs, starts, sg, mean, p0, n, rows, counts, h_buf, err_buf,
               g_buf, out_hits, in_hits, out_curv, in_curv, damp):
        lane = cuda.threadIdx.x
        for q in range(cuda.blockIdx.x, n, cuda.gridDim.x):
            p = p0 + q
            for i in range(counts[q]):
                g = g_buf[q, i]
                if g != 0:
                    r = rows[q, i]
                    add_scaled(weights, r, g * damping(out_hits[r], out_curv[r], damp), h_buf,
                               q, lane)
            a, b = input_range(starts, sg, p)
            share = f32(1.0) if mean else f32(1.0) / f32(b - a)
            for c in range(a, b):
                r = inputs[c]
                add_scaled(syn0, r, share * damping(in_hits[r], in_curv[r], damp), err_buf, q,
                           lane)

    return forward, update


class NumbaBackend:
    """The backend interface (``device.GpuSession`` drives it) on numba.cuda, one stream."""

    name = "numba"

    def __init__(self, blocks: int = 0):
        if not cuda.is_available():
            reason = " ".join(str(cuda.cuda_error() or "no CUDA device").split())
            raise RuntimeError(reason)
        # 32 one-warp blocks per multiprocessor: as many as can be resident at once
        self.blocks = int(blocks) or 32 * self._multiprocessors()
        self._loss = None
        self._work = None

    @staticmethod
    def _multiprocessors() -> int:
        try:
            return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)
        except Exception:  # the simulator's device has no attributes
            return 1

    # -- memory ------------------------------------------------------------------------------------
    def upload(self, host):
        return cuda.to_device(np.ascontiguousarray(host))

    def download(self, dev, out: np.ndarray) -> None:
        dev.copy_to_host(out)

    def to_numpy(self, dev) -> np.ndarray:
        return dev.copy_to_host()

    def empty(self, shape, dtype):
        return cuda.device_array(shape, dtype)

    def put(self, dst, host: np.ndarray):
        view = dst[:len(host)]
        if len(host):
            view.copy_to_device(np.ascontiguousarray(host))
        return view

    def device_name(self) -> str:
        name = getattr(cuda.get_current_device(), "name", "CUDA simulator")
        return name.decode() if isinstance(name, bytes) else str(name)

    def memory_in_use(self) -> int:
        try:
            free, total = cuda.current_context().get_memory_info()
            return int(total - free)
        except Exception:  # the simulator does not track memory
            return 0

    # -- the batch -----------------------------------------------------------------------------------
    def _buffers(self, n: int, width: int, dim: int, n_rows: int, n_words: int):
        key = (width, dim, n_rows, n_words)
        if self._work is None or self._work[0] != key or self._work[1] < n:
            cap = max(n, 1)
            self._work = (key, cap, dict(
                rows=cuda.device_array((cap, width), np.int32),
                labels=cuda.device_array((cap, width), np.float32),
                counts=cuda.device_array(cap, np.int32),
                g=cuda.device_array((cap, width), np.float32),
                h=cuda.device_array((cap, dim), np.float32),
                err=cuda.device_array((cap, dim), np.float32),
                out_hits=cuda.to_device(np.zeros(n_rows, np.int32)),
                in_hits=cuda.to_device(np.zeros(n_words, np.int32)),
                out_curv=cuda.to_device(np.zeros(n_rows, np.float32)),
                in_curv=cuda.to_device(np.zeros(n_words, np.float32))))
        return self._work[2]

    def reserve(self, batch_pairs: int, width: int, dim: int, n_rows: int, n_words: int) -> None:
        self._buffers(batch_pairs, width, dim, n_rows, n_words)
        self._width = width

    def begin_chunk(self) -> None:
        if self._loss is None:
            self._loss = cuda.to_device(np.zeros(LOSS_SLOTS, np.float64))
        else:
            self._loss.copy_to_device(np.zeros(LOSS_SLOTS, np.float64))

    def take_loss(self) -> float:
        return float(self._loss.copy_to_host().sum())

    def _prepare_grid(self, n: int):
        work = self._work[2]
        size = max(n, work["out_hits"].shape[0], work["in_hits"].shape[0])
        return (min(max(1, -(-size // PREPARE_THREADS)), self.blocks * 4), PREPARE_THREADS)

    def hs_targets(self, layer_arrays, pairs, p0, n, seed):
        w = self._work[2]
        points, codes, lengths = layer_arrays
        prepare_hs[self._prepare_grid(n)](points, codes, lengths, pairs.targets, p0, n, w["rows"],
                                          w["labels"], w["counts"], *self._counters())
        return w["rows"], w["labels"], w["counts"]

    def ns_targets(self, layer_arrays, pairs, p0, n, seed):
        from .noise import seed_keys
        w = self._work[2]
        alias_thr, alias_idx, negative = layer_arrays
        key_lo, key_hi = seed_keys(seed)
        prepare_ns[self._prepare_grid(n)](alias_thr, alias_idx, negative, pairs.targets, p0, n,
                                          key_lo, key_hi, w["rows"], w["labels"], w["counts"],
                                          *self._counters())
        return w["rows"], w["labels"], w["counts"]

    def _counters(self):
        w = self._work[2]
        return w["out_hits"], w["in_hits"], w["out_curv"], w["in_curv"]

    def train(self, syn0, weights, pairs, p0, n, targets, clip, mean, damp):
        w = self._work[2]
        rows, labels, counts = targets
        forward, update = batch_kernels(syn0.shape[1], rows.shape[1])
        sg = pairs.starts is None
        starts = pairs.dummy_starts if sg else pairs.starts
        grid = (max(1, min(n, self.blocks)), WARP)
        forward[grid](syn0, weights, pairs.inputs, starts, sg, mean, pairs.rates, p0, n, rows,
                      labels, counts, clip, w["h"], w["err"], w["g"], *self._counters(),
                      self._loss)
        update[grid](syn0, weights, pairs.inputs, starts, sg, mean, p0, n, rows, counts, w["h"],
                     w["err"], w["g"], *self._counters(), bool(damp))
