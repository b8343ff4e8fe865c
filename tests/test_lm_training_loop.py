"""The LM output layers inside an ordinary PyTorch training loop (issue 34): the loss API of
``nn.CrossEntropyLoss`` (ignore_index, reduction), integer targets only, no read-back to the
host in a steady-state step, mixed precision (autocast, half-precision weights), no autograd
history in the self-organizing statistic (flat memory), deepcopy and state_dict at any point,
clip_grad_norm against torch's, what each optimizer does with sparse gradients, and DDP on
gloo. References: torch's own modules and the layers' exact ``log_prob``."""
import copy
import io
import os
import traceback
import warnings

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import lm_helpers  # noqa: E402
from lm_helpers import randomise  # noqa: E402
from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm import (AdaptiveSoftmax, FullSoftmax, SelfOrganizedSoftmax,  # noqa: E402
                        TreeSoftmax, ClassSoftmax, make_output_layer)
from semhuff.lm.kernels.optimizer_state import (OptimizerError, NonFiniteNorm, check_optimizer,  # noqa: E402
                                    clip_grad_norm)
from semhuff.trees.clusters import default_clusters, frequency_binning  # noqa: E402
from semhuff.trees.huffman import build_huffman  # noqa: E402

D = 8
V = 60

# every layer, the sparse forms included; the self-organizing ones re-assign only when asked
LAYERS = {
    "full": ("full", {}),
    "adaptive": ("adaptive", {}),
    "tree": ("tree", {}),
    "tree sparse": ("tree", {"sparse": True}),
    "class": ("class", {}),
    "class sparse": ("class", {"sparse": True}),
    "self-organized": ("self-organized", {"reassign_every": 10 ** 6}),
    "self-organized sparse": ("self-organized", {"reassign_every": 10 ** 6, "sparse": True}),
    "self-organized-binary": ("self-organized-binary", {"reassign_every": 10 ** 6}),
    "self-organized-binary sparse": ("self-organized-binary",
                                     {"reassign_every": 10 ** 6, "sparse": True}),
}
TREE_LAYERS = {"tree", "tree sparse", "self-organized-binary", "self-organized-binary sparse"}
CLASS_LAYERS = {"class", "class sparse", "self-organized", "self-organized sparse"}


def zipf_vocab(n=V):
    return lm_helpers.zipf_vocab(n)


def build(kind, vocab, **options):
    """The layer by its class (the loss keywords go to the constructors)."""
    counts = vocab.counts
    n_clusters = default_clusters(len(vocab))
    if kind == "full":
        return FullSoftmax(D, len(vocab), **options)
    if kind == "adaptive":
        return AdaptiveSoftmax(D, len(vocab), **options)
    if kind == "tree":
        return TreeSoftmax(D, build_huffman(counts), **options)
    if kind == "class":
        return ClassSoftmax(D, frequency_binning(counts, n_clusters), n_clusters, **options)
    form = "binary" if kind == "self-organized-binary" else "two-level"
    return SelfOrganizedSoftmax(D, counts, n_clusters, form=form, **options)


def make(name, dtype=torch.float64, vocab_size=V, **extra):
    kind, options = LAYERS[name]
    layer = build(kind, zipf_vocab(vocab_size), **{**options, **extra})
    return randomise(layer.to(dtype))


def batch(n=24, dtype=torch.float64, seed=1, vocab_size=V):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, D, generator=g, dtype=dtype),
            torch.randint(0, vocab_size, (n,), generator=g))


# -- 1. the loss API --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(LAYERS))
def test_per_token_losses_are_log_prob_at_the_targets_and_ignored_tokens_drop_out(name):
    h, t = batch()
    t[[2, 5, 6, 17]] = -100
    kept = t != -100
    layers = {r: make(name, reduction=r) for r in ("none", "sum", "mean")}
    lp = layers["none"].log_prob(h).detach()
    want = -lp.gather(1, t.clamp(min=0).unsqueeze(1)).squeeze(1) * kept
    none = layers["none"](h, t)
    assert none.loss.shape == t.shape and none.output.shape == t.shape
    assert torch.allclose(none.loss, want, atol=1e-10)
    assert torch.all(none.loss[~kept] == 0) and torch.all(none.output[~kept] == 0)
    assert torch.allclose(none.output, -want, atol=1e-10)
    assert torch.allclose(layers["sum"](h, t).loss, want.sum(), atol=1e-10)
    assert torch.allclose(layers["mean"](h, t).loss, want[kept].mean(), atol=1e-10)
    # leading dimensions: 'none' gives the target's shape back
    three = layers["none"](h.view(4, 6, D), t.view(4, 6))
    assert three.loss.shape == (4, 6) and torch.allclose(three.loss.reshape(-1), want, atol=1e-10)
    # an ignored position gets no gradient; a kept one does
    x = h.clone().requires_grad_()
    layers["mean"](x, t).loss.backward()
    assert torch.all(x.grad[~kept] == 0) and torch.all(x.grad[kept].abs().sum(1) > 0)


def test_the_full_softmax_is_cross_entropy_loss_with_its_ignore_index_and_reductions():
    h, t = batch()
    t[[0, 3]] = 7  # a padding id inside the vocabulary
    for reduction in ("none", "sum", "mean"):
        layer = make("full", reduction=reduction, ignore_index=7)
        x = h.clone().requires_grad_()
        got = layer(x, t).loss
        ref_x = h.clone().requires_grad_()
        ref = F.cross_entropy(layer.linear(ref_x), t, ignore_index=7, reduction=reduction)
        assert torch.allclose(got, ref, atol=1e-12), reduction
        got.sum().backward()
        ref.sum().backward()
        assert torch.allclose(x.grad, ref_x.grad, atol=1e-12), reduction
    # all ignored: 'mean' is NaN, as CrossEntropyLoss's
    assert torch.isnan(make("tree")(h, torch.full_like(t, -100)).loss)


def test_bad_loss_options_are_one_line_option_errors():
    for options in ({"reduction": "average"}, {"ignore_index": 1.5}, {"ignore_index": True}):
        for name in ("full", "adaptive", "tree", "class", "self-organized"):
            with pytest.raises(OptionError) as info:
                make(name, **options)
            assert "\n" not in str(info.value)


@pytest.mark.parametrize("form", ["self-organized", "self-organized-binary"])
def test_the_statistic_skips_ignored_tokens(form):
    h, t = batch(30)
    t[[1, 4, 9, 10, 22]] = -100
    kept = t != -100
    extra = {"statistic_rows": None} if form.endswith("binary") else {}
    with_ignored = make(form, **extra)
    only_kept = make(form, **extra)
    with_ignored(h, t)
    # the same lam as the padded batch's (its "interval" unit is the batch size)
    only_kept.lam.copy_(with_ignored.lam)
    only_kept._lam_for = int(kept.sum())
    only_kept(h[kept], t[kept])
    assert not torch.equal(with_ignored.q, make(form, **extra).q)  # it learnt something
    assert torch.allclose(with_ignored.q, only_kept.q, atol=1e-12)
    assert torch.allclose(with_ignored.sums, only_kept.sums, atol=1e-10)
    assert with_ignored.tokens == only_kept.tokens == int(kept.sum())


# -- 2. targets and read-backs ----------------------------------------------------------------------

@pytest.mark.parametrize("name", list(LAYERS))
def test_float_bool_and_out_of_range_targets_are_one_line_errors(name):
    layer = make(name)
    h, t = batch(6)
    for bad in (t.double() + 0.7, t > 3, torch.tensor([0, 1, 2, V, 3, 4]),
                torch.tensor([0, 1, -2, 3, 4, 5])):
        with pytest.raises(OptionError) as info:
            layer(h, bad)
        assert "\n" not in str(info.value)
    layer(h, t.int())  # any integer dtype is a word id


READ_BACKS = ("item", "__int__", "__float__", "__bool__", "__index__", "tolist", "numpy")


def count_read_backs(step):
    """Run ``step`` with every way of reading a tensor's values into Python patched; returns
    the files of the calls (a CPU run stands in for a device: each is a sync there)."""
    seen = []
    originals = {name: getattr(torch.Tensor, name) for name in READ_BACKS}

    def spy(name):
        original = originals[name]

        def patched(self, *args, **kwargs):
            caller = traceback.extract_stack(limit=2)[0]
            seen.append((name, os.path.basename(caller.filename), caller.lineno))
            return original(self, *args, **kwargs)
        return patched

    try:
        for name in READ_BACKS:
            setattr(torch.Tensor, name, spy(name))
        step()
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
    return seen


@pytest.mark.parametrize("bucketed", [False, True], ids=["static-paths", "cpu-buckets"])
@pytest.mark.parametrize("name", list(LAYERS))
def test_a_steady_state_step_reads_nothing_back_to_the_host(name, bucketed, monkeypatch):
    """The tree layers' static path form (off the CPU, under torch.compile) reads nothing back;
    CPU eager keeps the bucketed form, whose read-backs (free on the CPU) are all in paths.py's
    gather (the decision and its figures: docs/lm.md)."""
    from semhuff.lm.kernels import paths
    monkeypatch.setattr(paths, "BUCKETS_ON_CPU", bucketed)
    layer = make(name, dtype=torch.float32)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    h, t = batch(32, dtype=torch.float32)
    t[3] = -100

    def step():
        opt.zero_grad()
        layer(h, t).loss.backward()
        opt.step()
        layer.after_step(opt)

    step()  # warm-up: first-batch set-up (the statistic's lam, the optimizer's state)
    if name in CLASS_LAYERS:  # the CPU's Numba kernels read their inputs (CPU-only: free)
        assert {s[1] for s in count_read_backs(step)} == {"clusters_numba.py"}
        from semhuff.lm.kernels import clusters_numba as numba_clusters
        monkeypatch.setattr(numba_clusters, "ENABLED", False)  # the loop: a device's form
    seen = count_read_backs(step)
    outside = [s for s in seen if s[1] not in ("paths.py", "clusters_torch.py")]
    assert not outside, outside
    if name in CLASS_LAYERS:  # the per-cluster loop's one documented read-back a batch
        assert [s[:2] for s in seen] == [("tolist", "clusters_torch.py")], seen
    elif bucketed and name in TREE_LAYERS:
        assert seen and {s[1] for s in seen} == {"paths.py"}, seen
    else:
        assert seen == [], seen


# -- 3. mixed precision -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(LAYERS))
def test_autocast_bfloat16_forward_backward_within_1e_2_of_float32(name):
    layer = randomise(make(name, dtype=torch.float32), scale=0.3)
    h, t = batch(32, dtype=torch.float32)
    reference = layer(h, t).loss.item()

    def run():
        x = h.clone().requires_grad_()
        layer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = layer(x, t)
        out.loss.backward()
        return out, x

    out, x = run()
    assert out.output.dtype == torch.float32
    assert abs(out.loss.item() - reference) <= 1e-2 * abs(reference)
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for p in layer.parameters():
        assert p.grad is not None and torch.isfinite(p.grad.to_dense()).all()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lp = layer.log_prob(h)
    assert torch.allclose(lp.exp().sum(1), torch.ones(len(t)), atol=1e-3)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", list(LAYERS))
def test_half_precision_weights_backward_and_log_prob(name, dtype):
    single = randomise(make(name, dtype=torch.float32), scale=0.3)
    half = copy.deepcopy(single).to(dtype)
    h, t = batch(32, dtype=torch.float32)

    def run():
        x = h.to(dtype).requires_grad_()
        out = half(x, t)
        out.loss.backward()
        return out, x, half.log_prob(h.to(dtype))

    out, x, lp = run()
    assert out.output.dtype == torch.float32 and lp.dtype == torch.float32
    assert torch.isfinite(x.grad.float()).all() and x.grad.float().abs().sum() > 0
    for p in half.parameters():
        assert p.grad is not None and p.grad.dtype == dtype
    assert torch.allclose(lp.exp().sum(1), torch.ones(len(t)), atol=1e-3)
    reference = single(h, t).loss.item()
    assert abs(out.loss.item() - reference) <= 2e-2 * abs(reference)
    assert torch.equal(half.predict(h.to(dtype)), lp.argmax(1))


class LSTMLM(torch.nn.Module):
    def __init__(self, layer, vocab_size=V):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab_size, D, sparse=True)
        self.lstm = torch.nn.LSTM(D, D, batch_first=True)
        self.output = layer

    def forward(self, ids, target):
        h, _ = self.lstm(self.embedding(ids))
        return self.output(h, target)


@pytest.mark.parametrize("name", list(LAYERS))
def test_an_lstm_lm_trains_under_autocast(name):
    torch.manual_seed(0)
    model = LSTMLM(randomise(make(name, dtype=torch.float32), scale=0.3))
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(0, V, (4, 10), generator=g)
    ids[0, -2:] = -100  # padded targets
    inputs, target = ids.clamp(min=0), ids.roll(-1, 1)
    reference = model(inputs, target).loss.item()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(inputs, target).loss
        loss.backward()
        opt.step()
        model.output.after_step(opt)
        return loss.item()

    first = step()
    assert abs(first - reference) <= 1e-2 * abs(reference)
    losses = [step() for _ in range(15)]
    assert losses[-1] < first


# -- 4. no autograd history in the statistic, flat memory -------------------------------------------

@pytest.mark.parametrize("name", [n for n in LAYERS if n.startswith("self")])
def test_the_statistic_keeps_no_autograd_history(name):
    layer = make(name)
    h, t = batch()
    out = layer(h.requires_grad_(), t)
    assert layer.q.grad_fn is None and not layer.q.requires_grad
    assert layer.sums.grad_fn is None
    out.loss.backward()
    assert all(b.grad_fn is None for b in layer.buffers())


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux's /proc")
@pytest.mark.parametrize("name", list(LAYERS))
def test_memory_is_flat_over_2000_steps(name):
    import gc
    n_words = 200
    layer = make(name, dtype=torch.float32, vocab_size=n_words)
    opt = torch.optim.SGD(layer.parameters(), lr=0.05)
    h, t = batch(32, dtype=torch.float32, vocab_size=n_words)

    def steps(n):
        for _ in range(n):
            opt.zero_grad()
            layer(h, t).loss.backward()
            opt.step()
            layer.after_step(opt)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small steps: threads would only contend
    try:
        steps(200)
        gc.collect()
        before = resident_bytes()
        steps(2000)
        gc.collect()
        grown = resident_bytes() - before
    finally:
        torch.set_num_threads(threads)
    # the leak of issue 34 kept every step's graph hanging from q
    assert grown < 4 * 2 ** 20, f"{grown / 2 ** 20:.1f} MB more after 2,000 steps"


# -- 5. deepcopy and state_dict at any point --------------------------------------------------------

def pickled(module):
    """``torch.save(model)`` (the whole module, pickled) and ``torch.load`` back."""
    buffer = io.BytesIO()
    torch.save(module, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


@pytest.mark.parametrize("name", list(LAYERS))
def test_torch_save_of_the_whole_layer_gives_the_same_layer(name):
    """Users save whole models (``torch.save(model)``) and spawned processes pickle them: every
    layer pickles (its state-dict hooks included) and comes back the same, trained or not."""
    layer = make(name)
    opt = torch.optim.SGD(layer.parameters(), lr=0.2)
    h, t = batch()
    back = pickled(layer)
    assert torch.equal(back.log_prob(h), layer.log_prob(h))
    layer(h, t).loss.backward()
    opt.step()
    if name.startswith("self"):
        layer.reassign(opt)
    back = pickled(layer)
    assert torch.equal(back.log_prob(h), layer.log_prob(h))
    assert torch.equal(back(h, t).loss, layer(h, t).loss)
    assert back.state_dict().keys() == layer.state_dict().keys()


@pytest.mark.parametrize("name", list(LAYERS))
def test_deepcopy_at_any_point_gives_the_same_layer(name):
    layer = make(name)
    opt = torch.optim.SGD(layer.parameters(), lr=0.2)
    h, t = batch()

    def same(copied):
        assert torch.equal(copied.log_prob(h), layer.log_prob(h))
        assert torch.equal(copied.predict(h), layer.predict(h))
        a, b = copied(h, t), layer(h, t)  # (the statistic of both moves alike)
        assert torch.equal(a.output, b.output) and torch.equal(a.loss, b.loss)
        if name.startswith("self"):
            assert torch.equal(copied.q, layer.q)

    same(copy.deepcopy(layer))
    out = layer(h, t)
    same(copy.deepcopy(layer))  # after a forward (a graph hanging from the outputs)
    out.loss.backward()
    same(copy.deepcopy(layer))  # after backward (gradients, sparse ones included)
    opt.step()
    layer.log_prob(h)
    same(copy.deepcopy(layer))  # after log_prob (its cached path matrices)
    layer.predict(h)
    same(copy.deepcopy(layer))
    if name.startswith("self"):
        layer.reassign(opt)
        same(copy.deepcopy(layer))  # after a re-assignment
    # a copy trains as the original does
    twin = copy.deepcopy(layer)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.2)
    for model, o in ((layer, opt), (twin, twin_opt)):
        o.zero_grad()
        model(h, t).loss.backward()
        o.step()
    same(twin)


@pytest.mark.parametrize("name", list(LAYERS))
def test_state_dict_round_trip_after_training(name):
    layer = make(name)
    opt = torch.optim.SGD(layer.parameters(), lr=0.2)
    h, t = batch()
    for _ in range(3):
        opt.zero_grad()
        layer(h, t).loss.backward()
        opt.step()
    if name.startswith("self"):
        layer.reassign(opt)
    fresh = randomise(make(name), seed=5)
    fresh.load_state_dict(layer.state_dict())
    assert torch.equal(fresh.log_prob(h), layer.log_prob(h))
    assert torch.equal(fresh(h, t).output, layer(h, t).output)


# -- 6. clip_grad_norm ------------------------------------------------------------------------------

def sparse_and_dense_models(seed=0):
    """An embedding (sparse=True / False) and the tree layer (sparse / dense), same weights."""
    def model(sparse):
        torch.manual_seed(seed)
        emb = torch.nn.Embedding(V, D, sparse=sparse).double()
        out = make("tree sparse" if sparse else "tree")
        return torch.nn.ModuleDict({"emb": emb, "out": out})
    return model(True), model(False)


def backward_both(models, scale=50.0):
    ids = torch.tensor([3, 3, 3, 7, 7, 11, 3, 20])  # repeated rows in the sparse gradient
    t = torch.tensor([1, 5, 5, 9, 2, 2, 40, 1])
    for m in models:
        (m["out"](m["emb"](ids), t).loss * scale).backward()


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_clip_grad_norm_equals_torch_on_the_dense_equivalents(norm_type):
    sparse, dense = sparse_and_dense_models()
    backward_both((sparse, dense))
    assert sparse["emb"].weight.grad.is_sparse and not sparse["emb"].weight.grad.is_coalesced()
    total = clip_grad_norm(sparse.parameters(), 0.5, norm_type)
    reference = torch.nn.utils.clip_grad_norm_(dense.parameters(), 0.5, norm_type)
    assert total.item() == pytest.approx(reference.item(), rel=1e-12) and total > 0.5
    for a, b in zip(sparse.parameters(), dense.parameters()):
        assert torch.allclose(a.grad.to_dense(), b.grad, atol=1e-12)


def test_clip_grad_norm_takes_a_single_tensor_and_says_when_the_norm_is_not_finite():
    sparse, dense = sparse_and_dense_models()
    backward_both((sparse, dense))
    weight = sparse["emb"].weight
    total = clip_grad_norm(weight, 1e-3)
    reference = torch.nn.utils.clip_grad_norm_(dense["emb"].weight, 1e-3)
    assert total.item() == pytest.approx(reference.item(), rel=1e-12) and total > 1e-3
    assert torch.allclose(weight.grad.to_dense(), dense["emb"].weight.grad, atol=1e-15)
    assert torch.linalg.vector_norm(weight.grad.to_dense()) == pytest.approx(1e-3, rel=1e-3)
    dense["out"].weight.grad[0, 0] = float("nan")
    with pytest.raises(NonFiniteNorm) as info:
        clip_grad_norm(dense.parameters(), 1.0, error_if_nonfinite=True)
    assert "\n" not in str(info.value) and isinstance(info.value, RuntimeError)
    assert torch.isnan(clip_grad_norm(dense.parameters(), 1.0))  # the default: scale anyway


def test_torch_clip_grad_norm_handles_sparse_gradients_now():
    """torch 2.14's clip_grad_norm_ clips sparse gradients (the docs said it could not): the
    same total norm and gradients as on the dense equivalents."""
    sparse, dense = sparse_and_dense_models()
    backward_both((sparse, dense))
    total = torch.nn.utils.clip_grad_norm_(sparse.parameters(), 0.5)
    reference = torch.nn.utils.clip_grad_norm_(dense.parameters(), 0.5)
    assert total.item() == pytest.approx(reference.item(), rel=1e-12)
    for a, b in zip(sparse.parameters(), dense.parameters()):
        assert torch.allclose(a.grad.to_dense(), b.grad, atol=1e-12)


# -- 7. optimizers with sparse gradients ------------------------------------------------------------

OPTIMIZERS = {
    "Adam": lambda p: torch.optim.Adam(p, lr=0.05),
    "AdamW": lambda p: torch.optim.AdamW(p, lr=0.05),
    "RMSprop": lambda p: torch.optim.RMSprop(p, lr=0.01),
    "SGD": lambda p: torch.optim.SGD(p, lr=0.5),
    "SGD momentum": lambda p: torch.optim.SGD(p, lr=0.2, momentum=0.9),
    "SGD weight_decay": lambda p: torch.optim.SGD(p, lr=0.5, weight_decay=1e-4),
    "Adagrad": lambda p: torch.optim.Adagrad(p, lr=0.5),
    "Adagrad weight_decay": lambda p: torch.optim.Adagrad(p, lr=0.5, weight_decay=1e-4),
    "SparseAdam": lambda p: torch.optim.SparseAdam(p, lr=0.05),
}
# what each does (torch 2.14): "trains", or the words the one-line error must contain
EXPECTED = {
    ("Adam", True): ("SGD", "Adagrad", "SparseAdam", "sparse=False"),
    ("AdamW", True): ("SGD", "Adagrad", "SparseAdam", "sparse=False"),
    ("RMSprop", True): ("SGD", "Adagrad", "SparseAdam", "sparse=False"),
    ("SGD weight_decay", True): ("weight_decay=0", "sparse=False"),
    ("Adagrad weight_decay", True): ("weight_decay=0", "sparse=False"),
    ("SparseAdam", False): ("dense", "Adam"),
}


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("name", ["tree", "self-organized-binary"])
def test_each_optimizer_trains_or_fails_in_one_line_saying_what_to_use(name, optimizer, sparse):
    layer = make(name + (" sparse" if sparse else ""), dtype=torch.float32)
    opt = OPTIMIZERS[optimizer](layer.parameters())
    h, t = batch(32, dtype=torch.float32)
    expected = EXPECTED.get((optimizer, sparse), "trains")
    if expected == "trains":
        check_optimizer(opt, layer)  # passes at construction
        before = layer(h, t).loss.item()
        for _ in range(5):
            opt.zero_grad()
            layer(h, t).loss.backward()
            opt.step()
        assert layer(h, t).loss.item() < before
        return
    with pytest.raises(OptimizerError) as at_construction:
        check_optimizer(opt, layer)
    layer(h, t).loss.backward()
    with pytest.raises(OptimizerError) as at_step:  # without the check: at the first step
        opt.step()
    for info in (at_construction, at_step):
        message = str(info.value)
        assert "\n" not in message and isinstance(info.value, RuntimeError)
        assert all(word in message for word in expected), message


def test_the_check_sees_sparse_embeddings_and_leaves_other_optimizers_alone():
    model = LSTMLM(make("tree", dtype=torch.float32))
    with pytest.raises(OptimizerError):  # the embedding's sparse gradient
        check_optimizer(torch.optim.Adam(model.parameters()), model)
    sparse = [model.embedding.weight]
    rest = [p for p in model.parameters() if p is not model.embedding.weight]
    check_optimizer(torch.optim.SparseAdam(sparse), model)  # the recipe: one of each
    check_optimizer(torch.optim.Adam(rest), model)
    # a plain dense model: the step hook lets any optimizer through
    plain = torch.nn.Linear(3, 1)
    opt = torch.optim.Adam(plain.parameters())
    plain(torch.randn(4, 3)).sum().backward()
    opt.step()


# -- 8. DDP ------------------------------------------------------------------------------------------

ORGANIZING = ("self-organized", "self-organized-binary", "organized-tree")


def _ddp_worker(rank, world, init, form, steps, results):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        torch.manual_seed(0)  # the same start on every rank
        organizing = dict(reassign_every=3, freq_budget=0.3) if form in ORGANIZING else {}
        layer = make_output_layer(form, D, zipf_vocab(), sparse=True, seed=3, **organizing)
        model = LSTMLM(layer)
        ddp = DDP(model, broadcast_buffers=False)
        opt = torch.optim.Adagrad(model.parameters(), lr=0.3)
        g = torch.Generator().manual_seed(100 + rank)  # each rank its own data
        infos = []
        for _ in range(steps):
            ids = torch.randint(0, V, (4, 12), generator=g)
            opt.zero_grad()
            ddp(ids, ids.roll(-1, 1)).loss.backward()
            opt.step()
            info = layer.after_step(opt)
            if info is not None:
                infos.append(info["changed_share"])
        state = {k: v.detach().clone() for k, v in model.state_dict().items()
                 if torch.is_tensor(v)}
        clusters = layer.tail_cluster if form == "organized-tree" else \
            getattr(layer, "cluster_of", None)
        organized = {"q": layer.q.clone(), "clusters": clusters.clone()} \
            if form in ORGANIZING else {}
        results[rank] = {"state": state, "infos": infos, **organized}
    except Exception as exc:  # sent back whole: the parent's assertion shows it
        results[rank] = {"error": "".join(traceback.format_exception(exc))}
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("form", ["tree", "class"] + list(ORGANIZING))
def test_ddp_on_gloo_with_sparse_gradients_keeps_the_ranks_identical(form, tmp_path):
    import torch.multiprocessing as mp
    if not torch.distributed.is_available():
        pytest.skip("torch.distributed is not available")
    manager = mp.Manager()
    results = manager.dict()
    init = f"file://{tmp_path / 'rendezvous'}"
    mp.spawn(_ddp_worker, args=(2, init, form, 6, results), nprocs=2, join=True)
    got = [results[0], results[1]]
    for r in got:
        assert "error" not in r, r["error"]
    a, b = got
    if form in ORGANIZING:
        assert len(a["infos"]) == 2  # re-assigned at steps 3 and 6, the last: q just reduced
        assert a["infos"] == b["infos"] and any(share > 0 for share in a["infos"])
        assert torch.equal(a["clusters"], b["clusters"]) and torch.equal(a["q"], b["q"])
    for key in a["state"]:
        assert torch.equal(a["state"][key], b["state"][key]), key


def test_reduce_statistic_averages_q_and_adds_the_sums():
    layers = [make("self-organized", dtype=torch.float32) for _ in range(2)]
    for seed, layer in enumerate(layers):
        layer(*batch(20, dtype=torch.float32, seed=seed))
    q = (layers[0].q + layers[1].q) / 2
    sums = layers[0].sums + layers[1].sums
    tokens = layers[0].tokens + layers[1].tokens
    snapshot = [{k: [t.clone() for t in v] for k, v in l.statistic_tensors().items()}
                for l in layers]

    def fake_all_reduce(i):  # sums a tensor over the two "ranks" from the snapshot
        def reduce(tensor):
            for kind in ("mean", "sum"):
                for j, own in enumerate(layers[i].statistic_tensors()[kind]):
                    if own is tensor:
                        tensor.copy_(snapshot[0][kind][j] + snapshot[1][kind][j])
        return reduce

    for i, layer in enumerate(layers):
        assert layer.reduce_statistic(fake_all_reduce(i), world_size=2)
    for layer in layers:
        assert torch.allclose(layer.q, q) and torch.allclose(layer.sums, sums)
        assert layer.tokens == tokens
    assert not make("self-organized").reduce_statistic()  # no process group: nothing to do


# -- torch.compile: no recompilation from batch to batch ------------------------------------------

@pytest.mark.parametrize("name", list(LAYERS))
def test_compiled_loss_equals_eager_and_stops_compiling_after_the_first_batches(name):
    """20 batches of varying targets through ``torch.compile``: the loss equals eager, and no
    graph is compiled after the first 5 (the class layers' per-cluster loop, traced, compiled
    one graph a batch; it runs eagerly now, behind one graph break)."""
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    layer = make(name, dtype=torch.float32)
    body = torch.nn.Linear(D, D)

    def loss_of(x, t):
        return layer(torch.tanh(body(x)), t).loss

    dynamo.reset()
    counters.clear()
    compiled = torch.compile(loss_of)
    warm = None
    for i in range(20):
        x, t = batch(32, dtype=torch.float32, seed=100 + i)
        got = compiled(x, t)
        got.backward()
        if i == 4:
            warm = counters["stats"]["unique_graphs"]
        if i % 7 == 0:
            assert torch.allclose(got.detach(), loss_of(x, t).detach(), rtol=1e-5, atol=1e-6)
    assert counters["stats"]["unique_graphs"] == warm, dict(counters["stats"])
    dynamo.reset()
