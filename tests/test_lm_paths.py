"""The tree softmax's path computation (semhuff.lm.kernels.paths) as a part of any PyTorch training
loop: the static (no read-back) form against the bucketed one and a naive walk, no host
read-back, torch.compile, mixed precision, the top-down full log_prob against the sparse
product, and the Triton kernel under TRITON_INTERPRET=1."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from semhuff.lm import TreeSoftmax  # noqa: E402
from semhuff.lm.kernels import paths  # noqa: E402
from semhuff.lm.kernels.paths import (PathBatch, leaf_matrix, leaf_paths, path_buffers,  # noqa: E402
                              path_scores, paths_log_prob)
from semhuff.trees import make_tree  # noqa: E402
from semhuff.trees.base import Tree  # noqa: E402
from semhuff.trees.clusters import balanced_tree  # noqa: E402
from semhuff.vocab import Vocab  # noqa: E402


def zipf_vocab(n):
    counts = np.maximum((1000 / np.arange(1, n + 1)).astype(np.int64), 1)
    return Vocab([f"w{i}" for i in range(n)], counts, int(counts.sum()))


def chain_tree(n):
    """The deepest tree of n leaves: inner node i has leaf i (bit 0) and inner node i + 1."""
    parent = np.full(2 * n - 1, -1, np.int64)
    branch = np.zeros(2 * n - 1, np.int8)
    parent[:n - 1] = n + np.arange(n - 1)
    parent[n - 1], branch[n - 1] = 2 * n - 2, 1
    parent[n + 1:] = n + np.arange(n - 2)
    branch[n + 1:] = 1
    return Tree(parent, branch, kind="chain")


def semhuff_tree(n, seed=0):
    import scipy.sparse as sp
    sim = sp.random(n, n, density=0.1, random_state=seed, format="csr")
    return make_tree("semhuff", zipf_vocab(n), similarity=(sim + sim.T).tocsr())


def trees():
    return {
        "huffman": make_tree("huffman", zipf_vocab(300)),
        "semhuff": semhuff_tree(120),
        "random": make_tree("random", zipf_vocab(200), seed=3),
        "balanced": balanced_tree(np.random.default_rng(0).permutation(77), "balanced"),
        "chain 41 (depth 40)": chain_tree(41),
        "two words": make_tree("huffman", zipf_vocab(2)),
    }


TREES = trees()


def setup(tree, n=50, d=7, dtype=torch.float64, seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g, dtype=dtype)
    weight = torch.randn(tree.n_words - 1, d, generator=g, dtype=dtype) * 0.5
    target = torch.randint(0, tree.n_words, (n,), generator=g)
    return h, weight, target


def naive_scores(tree, h, weight, target):
    """Node by node: (N, depth) with h[n] . weight[row] along each target's path, 0 past it."""
    out = torch.zeros(len(target), max(int(tree.lengths.max()), 1), dtype=torch.float64)
    for n, w in enumerate(target.tolist()):
        for j in range(tree.lengths[w]):
            out[n, j] = float(h[n].double() @ weight[tree.points[w, j]].double())
    return out


def scores_and_grads(tree, h, weight, target, bucketed, sparse, dtype=None):
    h = h.detach().clone().requires_grad_()
    weight = weight.detach().clone().requires_grad_()
    points, signs, lengths = path_buffers(tree, dtype=weight.dtype)
    batch = PathBatch.gather(points, signs, lengths, target, bucketed=bucketed)
    scores = path_scores(h, weight, batch, sparse, paths.Workspace())
    lp = torch.where(batch.valid, F.logsigmoid(scores * batch.signs.to(scores.dtype)), 0)
    lp.sum().backward()
    grad_w = weight.grad.to_dense() if weight.grad.is_sparse else weight.grad
    return scores, lp.sum(1), h.grad, grad_w


# -- the static form ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(TREES))
@pytest.mark.parametrize("sparse", [False, True])
def test_static_and_bucketed_forms_equal_a_walk_along_each_path(name, sparse):
    tree = TREES[name]
    h, weight, target = setup(tree)
    walk = naive_scores(tree, h, weight, target)
    ref = None
    for bucketed in (True, False):
        scores, lp, gh, gw = scores_and_grads(tree, h, weight, target, bucketed, sparse)
        assert torch.allclose(scores[:, :walk.shape[1]], walk, atol=1e-12)
        assert torch.all(scores[:, walk.shape[1]:] == 0)
        if ref is None:
            ref = (lp, gh, gw)
        else:
            for a, b in zip(ref, (lp, gh, gw)):
                assert torch.allclose(a, b, atol=1e-12)
    # the gradients against autograd through the naive plain form
    hh, ww = h.clone().requires_grad_(), weight.clone().requires_grad_()
    pts, sg, _ = path_buffers(tree, dtype=torch.float64)
    s = (ww[pts[target]] * hh.unsqueeze(1)).sum(-1)
    torch.where(sg[target] != 0, F.logsigmoid(s * sg[target]), 0).sum().backward()
    assert torch.allclose(ref[1], hh.grad, atol=1e-12)
    assert torch.allclose(ref[2], ww.grad, atol=1e-12)


def test_static_sparse_gradient_touches_only_the_paths_rows():
    tree = TREES["huffman"]
    h, weight, target = setup(tree)
    weight = weight.requires_grad_()
    pts, sg, ln = path_buffers(tree, dtype=torch.float64)
    batch = PathBatch.gather(pts, sg, ln, target, bucketed=False)
    path_scores(h, weight, batch, True).sum().backward()
    assert weight.grad.is_sparse
    touched = set(weight.grad.coalesce().indices()[0].tolist())
    on_paths = {int(tree.points[w, j]) for w in target.tolist() for j in range(tree.lengths[w])}
    assert touched == on_paths
    # an optimizer that takes sparse gradients steps on it
    before = weight.detach().clone()
    torch.optim.Adagrad([weight], lr=0.1).step()
    moved = set(torch.nonzero((weight.detach() != before).any(1)).flatten().tolist())
    assert moved <= on_paths and moved


# -- no host read-back ------------------------------------------------------------------------------

READ_BACKS = ("item", "tolist", "__int__", "__float__", "__bool__", "__index__")


def count_read_backs(monkeypatch):
    calls = []
    for name in READ_BACKS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(torch.Tensor, name, counted)
    return calls


@pytest.mark.parametrize("sparse", [False, True])
def test_the_static_form_reads_nothing_back_and_the_bucketed_form_does(monkeypatch, sparse):
    tree = TREES["huffman"]
    h, weight, target = setup(tree, dtype=torch.float32)
    pts, sg, ln = path_buffers(tree, dtype=torch.float32)
    layer = TreeSoftmax(7, tree, sparse=sparse)
    with torch.no_grad():
        layer.weight.copy_(weight)
    x = h.clone().requires_grad_()
    calls = count_read_backs(monkeypatch)
    for bucketed in (False, True):
        calls.clear()
        batch = PathBatch.gather(pts, sg, ln, target, bucketed=bucketed)
        scores = path_scores(x, layer.weight, batch, sparse)
        torch.where(batch.valid, F.logsigmoid(scores * batch.signs), 0).sum().backward()
        if bucketed:
            assert calls, "the counter must see the bucketed form's read-backs"
        else:
            assert calls == []
    # the layer, as it runs off the CPU (the static form), reads nothing back either
    monkeypatch.setattr(paths, "BUCKETS_ON_CPU", False)
    calls.clear()
    layer.target_log_prob(x, target).sum().backward()
    assert calls == []


# -- torch.compile ------------------------------------------------------------------------------

def test_compiled_tree_softmax_equals_eager_with_few_graphs_and_no_break():
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    tree = make_tree("huffman", zipf_vocab(60))
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"body": torch.nn.Linear(5, 8), "out": TreeSoftmax(8, tree)})
    with torch.no_grad():
        model["out"].weight.normal_(0, 0.5)

    def loss_of(x, t):
        return -model["out"].target_log_prob(torch.tanh(model["body"](x)), t).mean()

    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(32, 5, generator=g), torch.randint(0, 60, (32,), generator=g))
               for _ in range(100)]
    explained = dynamo.explain(loss_of)(*batches[0])
    assert explained.graph_break_count == 0, explained.break_reasons
    dynamo.reset()
    counters.clear()
    compiled = torch.compile(loss_of)
    for i, (x, t) in enumerate(batches):
        got = compiled(x, t)
        if i % 33 == 0:  # against eager: the loss and every gradient
            got_grads = torch.autograd.grad(got, list(model.parameters()))
            want = loss_of(x, t)
            want_grads = torch.autograd.grad(want, list(model.parameters()))
            assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
            for a, b in zip(got_grads, want_grads):
                assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
        else:
            got.backward()
    assert counters["stats"]["unique_graphs"] <= 2, dict(counters["stats"])
    dynamo.reset()


def test_compiled_log_prob_equals_eager_without_a_graph_break():
    import torch._dynamo as dynamo

    layer = trained_layer(TREES["semhuff"], d=6)
    h = torch.randn(9, 6)
    want = layer.log_prob(h)  # builds the layer's LeafPaths (numpy, once) outside the graph
    explained = dynamo.explain(layer.log_prob)(h)
    assert explained.graph_break_count == 0, explained.break_reasons
    dynamo.reset()
    assert torch.allclose(torch.compile(layer.log_prob)(h), want, rtol=1e-5, atol=1e-5)
    dynamo.reset()


def test_compiled_sparse_gradient_breaks_the_graph_only_around_the_path_scores():
    """Inductor makes no sparse tensors: with sparse=True the path scores run eagerly (the
    static form) inside the compiled model, the same numbers as eager."""
    import torch._dynamo as dynamo

    tree = make_tree("huffman", zipf_vocab(40))
    layer = trained_layer(tree, d=6)
    layer.sparse = True

    def loss_of(x, t):
        return -layer.target_log_prob(x * 2, t).mean()

    x, t = torch.randn(16, 6), torch.randint(0, 40, (16,))
    explained = dynamo.explain(loss_of)(x, t)
    assert explained.graph_break_count >= 1
    assert all("_eager_static" in str(r.reason) for r in explained.break_reasons)
    dynamo.reset()
    got = torch.compile(loss_of)(x, t)
    got.backward()
    got_grad = layer.weight.grad
    assert got_grad.is_sparse
    layer.weight.grad = None
    want = loss_of(x, t)
    want.backward()
    assert torch.allclose(got, want, rtol=1e-5)
    assert torch.allclose(got_grad.to_dense(), layer.weight.grad.to_dense(), atol=1e-6)
    dynamo.reset()


# -- mixed precision ------------------------------------------------------------------------------

def trained_layer(tree, d=16, seed=0):
    layer = TreeSoftmax(d, tree)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(layer.weight.shape, generator=g) * 0.3)
    return layer


def test_path_scores_of_half_precision_inputs_are_added_up_in_float32():
    tree = TREES["huffman"]
    h, weight, target = setup(tree, n=40, d=256, dtype=torch.float32)
    hb, wb = h.bfloat16(), weight.bfloat16()
    exact = naive_scores(tree, hb.double(), wb.double(), target)  # the bf16 values, in float64
    pts, sg, ln = path_buffers(tree, dtype=torch.bfloat16)
    for bucketed in (True, False):
        batch = PathBatch.gather(pts, sg, ln, target, bucketed=bucketed)
        got = path_scores(hb, wb, batch, False)
        assert got.dtype == torch.float32
        # float32 sums of 256 products: ~1e-6 relative; a bfloat16 sum would be ~1e-2 off
        assert torch.allclose(got[:, :exact.shape[1]].double(), exact, rtol=1e-5, atol=1e-5)


def test_autocast_bfloat16_loss_is_float32s_and_backward_works():
    tree = make_tree("huffman", zipf_vocab(500))
    layer = trained_layer(tree)
    body = torch.nn.Linear(16, 16)
    g = torch.Generator().manual_seed(2)
    x, t = torch.randn(64, 16, generator=g), torch.randint(0, 500, (64,), generator=g)
    want = -layer.target_log_prob(body(x), t).mean()
    for bucketed in (True, False):
        paths.BUCKETS_ON_CPU = bucketed
        try:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                h = body(x)
                assert h.dtype == torch.bfloat16
                got = -layer.target_log_prob(h, t).mean()
        finally:
            paths.BUCKETS_ON_CPU = True
        assert got.dtype == torch.float32
        assert abs(got.item() - want.item()) <= 1e-2 * abs(want.item())
        layer.zero_grad()
        got.backward()
        assert layer.weight.grad.dtype == torch.float32
        assert torch.isfinite(layer.weight.grad).all() and layer.weight.grad.abs().sum() > 0
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lp = layer.log_prob(body(x))
    assert torch.allclose(lp.float().exp().sum(1), torch.ones(64), atol=1e-3)


@pytest.mark.parametrize("sparse", [False, True])
def test_bfloat16_weights_train_and_give_the_whole_distribution(sparse):
    tree = make_tree("huffman", zipf_vocab(500))
    ref = trained_layer(tree)
    layer = TreeSoftmax(16, tree, sparse=sparse)
    layer.load_state_dict(ref.state_dict())
    layer = layer.bfloat16()
    g = torch.Generator().manual_seed(3)
    h, t = torch.randn(64, 16, generator=g), torch.randint(0, 500, (64,), generator=g)
    want = ref.target_log_prob(h.bfloat16().float(), t)
    for bucketed in (True, False):
        paths.BUCKETS_ON_CPU = bucketed
        try:
            x = h.bfloat16().requires_grad_()
            got = layer.target_log_prob(x, t)
            layer.zero_grad()
            (-got.mean()).backward()
        finally:
            paths.BUCKETS_ON_CPU = True
        assert torch.allclose(got.float(), want, rtol=2e-2, atol=2e-2)
        assert layer.weight.grad.dtype == torch.bfloat16 and x.grad.dtype == torch.bfloat16
        assert layer.weight.grad.is_sparse == sparse
        assert torch.isfinite(layer.weight.grad.to_dense().float()).all()
    lp = layer.log_prob(h.bfloat16())
    assert torch.allclose(lp.float().exp().sum(1), torch.ones(64), atol=1e-2)
    # the generic sparse product (the self-organizing layer's cluster paths) in bfloat16
    m = leaf_matrix(tree, dtype=torch.bfloat16)
    got = paths_log_prob(h.bfloat16(), layer.weight, m)
    assert got.dtype == torch.bfloat16  # computed in float32, given back in the inputs' dtype
    assert torch.allclose(got.float(), lp.float(), rtol=1e-2, atol=1e-2)


# -- the whole distribution -----------------------------------------------------------------------

@pytest.mark.parametrize("name", list(TREES))
def test_top_down_log_prob_equals_the_sparse_product(name):
    tree = TREES[name]
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        h, weight, _ = setup(tree, n=20, dtype=dtype)
        want = paths_log_prob(h, weight, leaf_matrix(tree, dtype=dtype))
        with torch.no_grad():
            got = paths_log_prob(h, weight, leaf_paths(tree))
        assert got.shape == (20, tree.n_words) and got.dtype == dtype
        assert torch.allclose(got, want, rtol=tol, atol=tol)
        assert torch.allclose(got.double().exp().sum(1), torch.ones(20, dtype=torch.float64),
                              atol=tol * 10)
    # rows in chunks of 3 through a small workspace, then all at once through the same one
    h, weight, _ = setup(tree, n=20, dtype=torch.float64)
    want = paths_log_prob(h, weight, leaf_matrix(tree, dtype=torch.float64))
    small = leaf_paths(tree)
    small.WORKSPACE = 3 * (tree.n_words - 1)
    with torch.no_grad():
        assert torch.allclose(small.log_prob(h, weight), want, atol=1e-12)
        small.WORKSPACE = 1 << 22
        assert torch.allclose(small.log_prob(h[:7], weight), want[:7], atol=1e-12)
        assert torch.allclose(small.log_prob(h, weight), want, atol=1e-12)
    # with autograd: the same values and the sparse product's gradients
    h, weight, _ = setup(tree, n=20)
    cot = torch.randn(20, tree.n_words, dtype=torch.float64)
    grads = []
    for matrix in (leaf_matrix(tree, dtype=torch.float64), leaf_paths(tree)):
        hh, ww = h.clone().requires_grad_(), weight.clone().requires_grad_()
        (paths_log_prob(hh, ww, matrix) * cot).sum().backward()
        grads.append((hh.grad, ww.grad))
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-10)


def test_tree_layer_log_prob_is_a_walk_along_each_path():
    tree = TREES["semhuff"]
    layer = trained_layer(tree, d=7)
    h = torch.randn(5, 7, dtype=torch.float64)
    lp = layer.double().log_prob(h)
    w = layer.weight.detach()
    for n in range(5):
        for word in (0, 17, tree.n_words - 1):
            want = 0.0
            for j in range(tree.lengths[word]):
                s = float(h[n] @ w[tree.points[word, j]])
                want += -math.log1p(math.exp(-s if tree.codes[word, j] == 0 else s))
            assert abs(float(lp[n, word]) - want) < 1e-12


# -- the Triton kernel --------------------------------------------------------------------------

TRITON_CHECK = r"""
import numpy as np, torch, sys
sys.path.insert(0, {tests!r})
from test_lm_paths import TREES, setup, scores_and_grads
from semhuff.lm.kernels import paths_triton as triton_paths
assert triton_paths.available(allow_cpu=True)
for name, tree in TREES.items():
    h, weight, target = setup(tree, n=37, d=20, dtype=torch.float32, seed=4)
    for sparse in (False, True):
        want = scores_and_grads(tree, h, weight, target, bucketed=False, sparse=sparse)
        triton_paths.FORCE = True
        try:
            got = scores_and_grads(tree, h, weight, target, bucketed=False, sparse=sparse)
        finally:
            triton_paths.FORCE = False
        for a, b in zip(want, got):
            err = float((a - b).abs().max())
            assert err <= 1e-5 * max(1.0, float(a.abs().max())), (name, sparse, err)
# bfloat16 inputs: both add up in float32, so they agree to float32's rounding
tree = TREES["huffman"]
h, weight, target = setup(tree, n=37, d=20, dtype=torch.float32, seed=5)
h, weight = h.bfloat16(), weight.bfloat16()
want = scores_and_grads(tree, h, weight, target, bucketed=False, sparse=False)
triton_paths.FORCE = True
try:
    got = scores_and_grads(tree, h, weight, target, bucketed=False, sparse=False)
finally:
    triton_paths.FORCE = False
assert got[0].dtype == torch.float32 and got[3].dtype == torch.bfloat16
for a, b in zip(want, got):
    assert torch.allclose(a.float(), b.float(), rtol=1e-2, atol=1e-2), "bfloat16"
assert torch.allclose(want[0], got[0], rtol=1e-5, atol=1e-5)
print("ok")
"""


def test_triton_kernel_equals_the_torch_path_under_the_interpreter():
    pytest.importorskip("triton")
    if not os.path.exists(os.path.join(os.path.dirname(paths.__file__), "paths_triton.py")):
        pytest.skip("no Triton kernel")
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", TRITON_CHECK.format(
        tests=os.path.dirname(os.path.abspath(__file__)))], env=env, capture_output=True,
        text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
