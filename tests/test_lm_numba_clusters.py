"""The two-level softmax's Numba kernels (semhuff/lm/kernels/clusters_numba.py), against a dense
reference written here: each token's log-softmax over its cluster's words from a masked (N, V)
score matrix, in float64, its gradients by autograd. Uneven clusters (one word, one holding
most of the vocabulary, empty ones, clusters absent from the batch), the sparse and the dense
word gradient, one and three threads (the clusters split between threads), float32 and float64;
then the layer's loss with the kernels on and off (the torch loop) and semhuff-lm's trainer
optimizer (fused dense group) against torch's plain Adagrad."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from semhuff.lm import ClassSoftmax  # noqa: E402
from semhuff.lm.kernels import clusters_numba as numba_clusters  # noqa: E402
from semhuff.lm.kernels.clusters import in_cluster_log_prob  # noqa: E402


def dense_reference(h, weight, cluster_of, target):
    """log P(target | its cluster, h) and its gradients, from the full score matrix."""
    h = h.detach().double().requires_grad_()
    w = weight.detach().double().requires_grad_()
    cluster_of = torch.as_tensor(cluster_of)
    same = cluster_of.unsqueeze(0) == cluster_of[target].unsqueeze(1)  # (N, V)
    scores = (h @ w.t()).masked_fill(~same, float("-inf"))
    out = torch.log_softmax(scores, dim=1).gather(1, target.unsqueeze(1)).squeeze(1)
    return out, h, w


def clusters(rng, V, C):
    """Cluster 0 of one word, cluster 1 of most words, cluster C - 1 empty, the rest random."""
    cluster_of = rng.integers(2, C - 1, size=V)
    cluster_of[: V // 2] = 1
    cluster_of[V // 2] = 0
    return rng.permutation(cluster_of)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kernels_equal_the_dense_reference(sparse, threads, dtype):
    rng = np.random.default_rng(7)
    V, C, D, N = 400, 12, 37, 53
    cluster_of = clusters(rng, V, C)
    layer = ClassSoftmax(D, cluster_of, n_clusters=C, sparse=sparse).to(dtype)
    torch.manual_seed(2)
    h = torch.randn(N, D, dtype=dtype, requires_grad=True)
    target = torch.as_tensor(rng.integers(0, V, size=N))
    target[0] = int(np.flatnonzero(cluster_of == 0)[0])  # the one-word cluster
    g = torch.randn(N, dtype=dtype)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        calls = numba_clusters.NumbaInCluster.forward
        seen = []
        numba_clusters.NumbaInCluster.forward = staticmethod(
            lambda *a: seen.append(1) or calls(*a))
        out = in_cluster_log_prob(h, layer.word_weight, target, layer, sparse)
        (out * g).sum().backward()
    finally:
        numba_clusters.NumbaInCluster.forward = calls
        torch.set_num_threads(before)
    assert seen, "the Numba kernels did not run"
    grad_w = layer.word_weight.grad
    assert grad_w.is_sparse == sparse
    want, href, wref = dense_reference(h, layer.word_weight, cluster_of, target)
    (want * g.double()).sum().backward()
    tol = 1e-4 if dtype == torch.float32 else 1e-10
    np.testing.assert_allclose(out.detach().double(), want.detach(), rtol=tol, atol=tol)
    np.testing.assert_allclose(h.grad.double(), href.grad, rtol=tol, atol=tol)
    np.testing.assert_allclose(grad_w.to_dense().double(), wref.grad, rtol=tol, atol=tol)
    if sparse:  # only the rows of the clusters in the batch
        present = np.unique(cluster_of[target.numpy()])
        rows = np.unique(grad_w.coalesce().indices()[0].numpy())
        np.testing.assert_array_equal(rows, np.flatnonzero(np.isin(cluster_of, present)))


def test_a_batch_of_few_tokens_leaves_the_absent_clusters_rows_zero():
    """The dense gradient is written row by row: the rows of clusters not in the batch are
    zeroed apart, so a stale buffer never shows through."""
    rng = np.random.default_rng(1)
    V, C, D = 300, 30, 8
    cluster_of = rng.integers(0, C, size=V)
    layer = ClassSoftmax(D, cluster_of, n_clusters=C)
    target = torch.as_tensor([3, 3, 17])
    for _ in range(2):  # the second batch reuses freed memory (semhuff-lm keeps the heap)
        layer.zero_grad(set_to_none=True)
        h = torch.randn(3, D, requires_grad=True)
        in_cluster_log_prob(h, layer.word_weight, target, layer, False).sum().backward()
        absent = ~np.isin(cluster_of, cluster_of[target.numpy()])
        assert absent.sum() > 200
        assert float(layer.word_weight.grad[torch.as_tensor(absent)].abs().max()) == 0.0


def test_the_layer_gives_the_loops_numbers_with_the_kernels_on_and_off(monkeypatch):
    rng = np.random.default_rng(4)
    V, D = 500, 24
    layer = ClassSoftmax.from_vocab(D, _Vocab(V), clusters=20)
    h = torch.randn(64, D)
    target = torch.as_tensor(rng.integers(0, V, size=64))
    got = {}
    for on in (True, False):
        monkeypatch.setattr(numba_clusters, "ENABLED", on)
        layer.zero_grad(set_to_none=True)
        x = h.clone().requires_grad_()
        loss = layer(x, target).loss
        loss.backward()
        got[on] = (loss.detach(), x.grad, layer.word_weight.grad, layer.cluster_weight.grad)
    for a, b in zip(got[True], got[False]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


class _Vocab:
    def __init__(self, V):
        self.words = [f"w{i}" for i in range(V)]
        self.counts = np.arange(V, 0, -1, dtype=np.int64) * 3


def test_half_precision_keeps_the_torch_loop():
    layer = ClassSoftmax(8, np.arange(40) % 5).to(torch.bfloat16)
    h = torch.randn(6, 8, dtype=torch.bfloat16)
    assert not numba_clusters.numba_wanted(h, layer.word_weight)
    assert numba_clusters.numba_wanted(h.float(), layer.word_weight.float())


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="fork")
def test_a_forked_child_runs_the_kernels_on_two_threads():
    """The pool's threads do not survive a fork: a child (a fork-started trainer) gets its own
    pool instead of waiting forever on the parent's."""
    import multiprocessing as mp
    layer = ClassSoftmax(8, np.arange(90) % 9)
    target = torch.arange(0, 90, 3)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        in_cluster_log_prob(torch.randn(30, 8), layer.word_weight, target, layer, False)
        assert numba_clusters._pool is not None
        ctx = mp.get_context("fork")
        with ctx.Pool(1) as pool:
            threads, pooled, got = pool.apply_async(_child_loss, (layer, target)).get(timeout=60)
    finally:
        torch.set_num_threads(before)
    assert threads == 2 and pooled and np.isfinite(got)


def _child_loss(layer, target):
    torch.set_num_threads(2)
    h = torch.randn(target.shape[0], 8)
    got = float(in_cluster_log_prob(h, layer.word_weight, target, layer, False).sum())
    return torch.get_num_threads(), numba_clusters._pool is not None, got
