"""The two-level softmax's Triton kernels (semhuff/lm/kernels/clusters_triton.py) against its
per-cluster loop, under Triton's CPU interpreter (``TRITON_INTERPRET=1``, a subprocess: the
variable must be set before triton is imported). Uneven clusters (a one-word cluster, clusters
larger than a block of rows), widths below and above a block of columns, float32 and bfloat16;
the loss, the input's and both weights' gradients."""
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

CHECK = r"""
import numpy as np, torch
from semhuff.lm import ClassSoftmax
from semhuff.lm.kernels import clusters_triton as triton_clusters, paths_triton as triton_paths
assert triton_paths.available(allow_cpu=True)
calls = []
forward = triton_clusters.TritonInCluster.forward
triton_clusters.TritonInCluster.forward = staticmethod(
    lambda *a: calls.append(1) or forward(*a))

def run(layer, h, target):
    layer.zero_grad(set_to_none=True)
    h = h.detach().clone().requires_grad_()
    loss = layer(h, target).loss
    loss.backward()
    return [loss.detach(), h.grad, layer.word_weight.grad, layer.cluster_weight.grad]

rng = np.random.default_rng(3)
for V, C, D in ((70, 4, 20), (300, 7, 150)):
    cluster_of = rng.integers(1, C, size=V)
    cluster_of[5] = 0  # a cluster of one word
    torch.manual_seed(1)
    for dtype in (torch.float32, torch.bfloat16):
        layer = ClassSoftmax(D, cluster_of).to(dtype)
        h = torch.randn(41, D).to(dtype)
        target = torch.as_tensor(rng.integers(0, V, size=41))
        target[0] = 5
        want = run(layer, h, target)
        n = len(calls)
        triton_paths.FORCE = True
        try:
            got = run(layer, h, target)
        finally:
            triton_paths.FORCE = False
        assert len(calls) == n + 1, "the kernels did not run"
        for a, b in zip(want, got):
            assert a.dtype == b.dtype, (a.dtype, b.dtype)
            tol = 1e-5 if dtype == torch.float32 else 2e-2
            err = float((a.float() - b.float()).abs().max())
            assert err <= tol * max(1.0, float(a.float().abs().max())), (V, dtype, err)
# sparse=True keeps the loop (its gradient holds only the present clusters' rows)
layer = ClassSoftmax(20, rng.integers(0, 4, size=70), sparse=True)
n = len(calls)
triton_paths.FORCE = True
try:
    run(layer, torch.randn(9, 20), torch.as_tensor(rng.integers(0, 70, size=9)))
finally:
    triton_paths.FORCE = False
assert len(calls) == n
print("ok")
"""


def test_triton_in_cluster_kernels_equal_the_loop_under_the_interpreter():
    pytest.importorskip("triton")
    env = dict(os.environ, TRITON_INTERPRET="1", SEMHUFF_NUMBA_CLUSTERS="0")  # against the loop
    done = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
