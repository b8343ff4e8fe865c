"""The CuPy backend: the p-tHSM batch as array operations (gathers, batched products, scatter-add).

Everything is written against an array module ``xp``: CuPy on a GPU, and NumPy on the host
(``HostArrays``, the "host twin"), so the tests run this very code without a GPU and compare it
with the float64 reference and with the numba.cuda kernels. One batch of ``n`` pairs:

1. targets: each pair's output rows and 0/1 labels, ``(n, L)`` with ``counts`` valid entries per
   pair (HS: the target's path from ``points``/``codes``; NS: the target and its noise words,
   a noise word equal to the target dropped and the rest moved left);
2. forward: input vectors ``h`` (skip-gram: one row; CBOW: mean or sum of the contexts), the
   ``(n, L, D)`` gather of output rows, all logits at once ``s = R h`` (p-tHSM), gradients
   ``g = (label - sigmoid(s)) * rate`` (exact sigmoid; HS: no update where ``|s| >= 6``, as
   word2vec), the inputs' errors ``err = g R``, the loss;
3. update, after every read of the batch: ``scatter_add`` of ``g h`` into the output rows and of
   ``err`` into the input rows, each row's summed update damped by ``1 / (1 + C (n - 1) / n)``
   (the stale-sum damping, ``docs/gpu.md``).
"""
from __future__ import annotations

import numpy as np

from ..numba_cache import numba
from .noise import noise_matrix

MAX_EXP = 6.0


def hs_targets(xp, points, codes, lengths, targets):
    """Rows, labels (``1 - code``) and counts of the targets' tree paths."""
    return points[targets], (1 - codes[targets]).astype(xp.float32), lengths[targets].astype(xp.int32)


def ns_targets(xp, alias_thr, alias_idx, negative, targets, first_pair, seed):
    """The target (label 1) and ``negative`` noise words (label 0) per pair, a noise word equal to
    the target dropped (word2vec), the remaining entries moved left."""
    n = targets.shape[0]
    noise = noise_matrix(xp, first_pair, n, negative, seed, alias_thr, alias_idx)
    rows = xp.concatenate([targets[:, None].astype(xp.int32), noise], axis=1)
    valid = xp.concatenate([xp.ones((n, 1), bool), noise != targets[:, None]], axis=1)
    width = negative + 1
    pos = xp.where(valid, xp.cumsum(valid, axis=1) - 1, width)  # dropped ones go to a spare column
    out_rows = xp.zeros((n, width + 1), xp.int32)
    out_labels = xp.zeros((n, width + 1), xp.float32)
    line = xp.broadcast_to(xp.arange(n)[:, None], rows.shape)
    out_rows[line, pos] = rows
    out_labels[:, 0] = 1.0
    return out_rows[:, :width], out_labels[:, :width], valid.sum(axis=1).astype(xp.int32)


def train(xp, scatter_add, syn0, weights, inputs, starts, rows, labels, counts, rates, clip,
          mean, damping):
    """One batch (``docs/gpu.md``): ``inputs``/``starts`` as ``pairs.Pairs`` for these pairs
    (``starts[0] == 0``, or None for skip-gram), targets as ``hs_targets`` /
    ``ns_targets`` give them. Updates ``syn0`` and ``weights``; returns the summed nll
    (a float64 0-d array)."""
    n, width = rows.shape
    dim = syn0.shape[1]
    if starts is None:
        ctx = inputs
        seg = xp.arange(n)
        h = syn0[ctx]
        k = None
    else:
        ctx = inputs
        k = xp.diff(starts).astype(xp.float32)
        seg = xp.searchsorted(starts[1:], xp.arange(ctx.shape[0]), side="right")
        h = xp.zeros((n, dim), xp.float32)
        scatter_add(h, seg, syn0[ctx])
        if mean:
            h /= k[:, None]
    out = weights[rows]                                   # (n, L, D): every path node at once
    s = xp.matmul(out, h[:, :, None])[:, :, 0]            # (n, L) logits
    valid = xp.arange(width)[None, :] < counts[:, None]
    f = 0.5 * (1.0 + xp.tanh(0.5 * s))                    # the sigmoid, without overflow
    g = (labels - f) * rates[:, None]
    keep = valid & (xp.abs(s) < MAX_EXP) if clip else valid
    g = xp.where(keep, g, 0.0).astype(xp.float32)
    nll = xp.where(valid, xp.logaddexp(0.0, -s * (2.0 * labels - 1.0)), 0.0).sum(dtype=xp.float64)
    err = xp.matmul(g[:, None, :], out)[:, 0, :]          # (n, D)
    if k is not None and not mean:
        err = err / k[:, None]
    flat_rows = rows.reshape(-1)
    if damping:
        curv = xp.where(valid, f * (1.0 - f), 0.0) * rates[:, None]           # (n, L)
        g = g * stale_damping(xp, flat_rows, valid.reshape(-1),
                              (curv * (h * h).sum(-1)[:, None]).reshape(-1),
                              weights.shape[0])[rows]
        per_pair = (curv * (out * out).sum(-1)).sum(1)                        # (n,)
        err = err[seg] * stale_damping(xp, ctx, None, per_pair[seg], syn0.shape[0])[ctx][:, None]
    else:
        err = err[seg]
    sel = xp.flatnonzero(valid.reshape(-1))
    scatter_add(weights, flat_rows[sel], (g[:, :, None] * h[:, None, :]).reshape(-1, dim)[sel])
    scatter_add(syn0, ctx, err.astype(xp.float32))
    return nll


def stale_damping(xp, index, valid, curvature, size):
    """Per row: ``1 / (1 + C (n - 1) / n)``, ``n`` = the entries of the batch that touch it (the
    ``valid`` ones; None: all), ``C`` = their summed ``curvature`` (zero where not valid)."""
    hits = xp.bincount(index, weights=None if valid is None else valid.astype(xp.float64),
                       minlength=size)
    total = xp.bincount(index, weights=curvature, minlength=size)
    return (1.0 / (1.0 + total * (hits - 1.0) / xp.maximum(hits, 1.0))).astype(xp.float32)


class ArrayBackend:
    """The backend interface (``device.GpuSession`` drives it) over an array module."""

    name = "array"
    xp = np

    def scatter_add(self, a, index, values):
        raise NotImplementedError

    # -- memory ------------------------------------------------------------------------------------
    def upload(self, host):
        return self.xp.array(host, copy=True)

    def download(self, dev, out: np.ndarray) -> None:
        out[...] = self.to_numpy(dev)

    def to_numpy(self, dev) -> np.ndarray:
        return np.asarray(dev)

    def empty(self, shape, dtype):
        return self.xp.empty(shape, dtype)

    def put(self, dst, host: np.ndarray):
        """Copy ``host`` into the front of the device buffer ``dst``; return that view."""
        view = dst[:len(host)]
        view[...] = self.xp.asarray(host)
        return view

    def device_name(self) -> str:
        return "host (NumPy)"

    def memory_in_use(self) -> int:
        return 0

    # -- the batch -----------------------------------------------------------------------------------
    def begin_chunk(self) -> None:
        self._loss = self.xp.zeros((), self.xp.float64)

    def take_loss(self) -> float:
        return float(self._loss)

    def hs_targets(self, layer_arrays, pairs, p0, n, seed):
        points, codes, lengths = layer_arrays
        return hs_targets(self.xp, points, codes, lengths, pairs.targets[p0:p0 + n])

    def ns_targets(self, layer_arrays, pairs, p0, n, seed):
        alias_thr, alias_idx, negative = layer_arrays
        return ns_targets(self.xp, alias_thr, alias_idx, negative, pairs.targets[p0:p0 + n], p0,
                          seed)

    def train(self, syn0, weights, pairs, p0, n, targets, clip, mean, damping):
        rows, labels, counts = targets
        if pairs.starts is None:
            inputs, starts = pairs.inputs[p0:p0 + n], None
        else:  # the contexts of these pairs; offsets from the host copy (no device sync)
            s0, s1 = int(pairs.host.starts[p0]), int(pairs.host.starts[p0 + n])
            inputs, starts = pairs.inputs[s0:s1], pairs.starts[p0:p0 + n + 1] - s0
        self._loss += train(self.xp, self.scatter_add, syn0, weights, inputs, starts, rows, labels,
                            counts, pairs.rates[p0:p0 + n], clip, mean, damping)


@numba.njit(cache=True, nogil=True)
def _scatter_rows(a, index, values):
    for j in range(index.shape[0]):
        a[index[j]] += values[j]


class HostArrays(ArrayBackend):
    """The CuPy program on NumPy: the tests' host twin of the CuPy backend (its scatter-add a
    Numba loop, ``np.add.at`` being slow on rows)."""

    name = "host"
    xp = np

    def scatter_add(self, a, index, values):
        _scatter_rows(a, np.ascontiguousarray(index), np.ascontiguousarray(values, a.dtype))


class CupyBackend(ArrayBackend):
    """CuPy on the current CUDA device (whichever ``cupy-cuda1Nx`` build is installed)."""

    name = "cupy"

    def __init__(self):
        import cupy
        import cupyx
        self.xp = cupy
        self._scatter_add = cupyx.scatter_add
        if cupy.cuda.runtime.getDeviceCount() < 1:  # raises when there is no driver
            raise RuntimeError("no CUDA device")

    def scatter_add(self, a, index, values):
        self._scatter_add(a, index, values)

    def to_numpy(self, dev):
        return self.xp.asnumpy(dev)

    def put(self, dst, host):
        view = dst[:len(host)]
        view.set(np.ascontiguousarray(host))
        return view

    def device_name(self) -> str:
        props = self.xp.cuda.runtime.getDeviceProperties(self.xp.cuda.Device().id)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def memory_in_use(self) -> int:
        free, total = self.xp.cuda.runtime.memGetInfo()
        return int(total - free)
