"""How the training kernels are compiled (``kernels/compiler.py``) and the pieces that made them
fast: the stack scratch rows, the row prefetch, the call-free log-sigmoid beyond the clip and
the check that keeps the kernels' no-overlap promise. (That every compiled kernel still computes
what the references compute is ``test_kernels.py`` and ``test_naive.py``.)"""
from __future__ import annotations

import math

import numba
import numpy as np
import pytest

from semhuff import Word2Vec
from semhuff.devices import CpuSession, Plan, check_separate
from semhuff.encode import EpochSource
from semhuff.kernels.common import MAX_EXP, log_sigmoid_clipped
from semhuff.schedule import Schedule
from semhuff.kernels.compiler import KernelCompiler, prefetch_row, stack_row


@numba.njit
def _clipped(xs):
    out = np.empty(xs.shape[0])
    for i in range(xs.shape[0]):
        out[i] = log_sigmoid_clipped(xs[i])
    return out


def _libm_log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


def test_log_sigmoid_beyond_the_clip_matches_libm():
    xs = np.concatenate([np.linspace(MAX_EXP, 600.0, 5001), -np.linspace(MAX_EXP, 600.0, 5001)])
    got = _clipped(xs)
    want = np.array([_libm_log_sigmoid(float(x)) for x in xs])
    np.testing.assert_allclose(got, want, rtol=2e-10, atol=0)
    assert _clipped(np.array([800.0]))[0] == 0.0  # underflow: exactly 0, not a NaN
    assert _clipped(np.array([-800.0]))[0] == -800.0


def _sums_of_squares(n):
    row = stack_row(8)
    total = 0.0
    for i in range(n):  # the same slot every iteration: rewritten, never grows the stack
        for d in range(8):
            row[d] = i + d
        for d in range(8):
            total += row[d] * row[d]
    return total


def test_stack_row_holds_a_row():
    fn = numba.njit(pipeline_class=KernelCompiler)(_sums_of_squares)
    n = 1000  # squares below 2**24: exact in float32
    want = sum(float(i + d) ** 2 for i in range(n) for d in range(8))
    assert fn(n) == pytest.approx(want, rel=1e-12)


@numba.njit
def _prefetch_all(rows, order):
    for i in order:
        prefetch_row(rows, i)
    return rows.sum()


def test_prefetch_row_changes_nothing():
    rows = np.arange(37 * 100, dtype=np.float32).reshape(37, 100)
    before = rows.copy()
    view = rows[::2, 3:]  # strided rows, a row not starting on a cache line
    _prefetch_all(rows, np.arange(37)[::-1].copy())
    _prefetch_all(view, np.arange(view.shape[0]))
    np.testing.assert_array_equal(rows, before)


def test_check_separate():
    a, b = np.zeros((4, 3), np.float32), np.zeros(5, np.int32)
    check_separate(a, b, np.zeros(0), ())  # separate buffers (and non-arrays) pass
    with pytest.raises(ValueError, match="must not overlap"):
        check_separate(a, b, a[2])


def test_training_refuses_a_layer_whose_arrays_overlap(monkeypatch):
    sentences = [["a", "b", "c", "a", "b"]] * 20
    model = Word2Vec(vector_size=8, window=2, min_count=1, sample=0, loss="hs", seed=1,
                     workers=1, progress=False)
    model.build_vocab(sentences)
    chunk = next(iter(EpochSource(sentences, model.vocab.index, use_cache=False).epoch()))
    plan = Plan(sg=True, keep_thr=model.vocab.keep_thresholds(0), window=2, reduce_window=True,
                schedule=Schedule(0.025, 0.0001, len(chunk.ids)))
    session = CpuSession(model.syn0, model.layer, 1)
    points, codes, _ = model.layer.kernel_args()
    monkeypatch.setattr(model.layer, "kernel_args", lambda: (points, codes, model.syn0[0]))
    before = model.syn0.copy()
    with pytest.raises(ValueError, match="must not overlap"):
        session.train_chunk(plan, chunk, 0, 1)
    np.testing.assert_array_equal(model.syn0, before)  # refused before anything was written
