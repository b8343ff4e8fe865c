"""The GPU path (``semhuff.gpu``) without a GPU.

* The numba.cuda kernels run in Numba's CUDA simulator (``conftest.py`` sets
  ``NUMBA_ENABLE_CUDASIM=1`` before numba is imported; every CUDA thread is a Python thread, so
  the models are tiny). The CuPy program runs on NumPy (``HostArrays``, the host twin) and, where
  CuPy and a GPU are present, on CuPy. All are compared with ``naive.minibatch``, the float64
  reference of the batch update, for the same pairs.
* ``--device cuda`` on a machine without a GPU: a one-line ``DeviceError`` / exit code 2.

Tolerance of the comparisons: the kernels keep float32 weights and sum in float32 (in another
order on a GPU, with fused multiply-adds and the device's expf/log1pf), the reference is float64:
``ATOL`` = 2e-5 of the largest weight, about 100x float32's rounding of the values involved,
while a wrong sign, a missing or doubled update, or a different batching changes the result by
more than 1e-3 of the update (asserted below for the batching and the damping).
"""
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

import naive
from semhuff import Word2Vec
from semhuff.devices import Plan, make_device
from semhuff.encode import Chunk
from semhuff.errors import DeviceError, OptionError
from semhuff.gpu import device as gpu_device
from semhuff.schedule import Schedule
from semhuff.gpu.cupy_kernels import HostArrays
from semhuff.gpu.device import CudaDevice
from semhuff.gpu.noise import noise_matrix
from semhuff.gpu.pairs import PairSource
from semhuff.layers.hs import HierarchicalSoftmax
from semhuff.layers.ns import NegativeSampling
from semhuff.trees.huffman import build_huffman

SIMULATED = bool(numba.core.config.ENABLE_CUDASIM)
# The numba backend's kernels and the CUDA simulator they run in here come with numba-cuda (the
# cuda extra; CI installs it). Without it numba.cuda is numba's own deprecated target, whose
# simulator lacks parts the backend uses (get_current_device): those tests skip, the rest run.
NUMBA_CUDA = importlib.util.find_spec("numba_cuda") is not None
DIM = 8
COUNTS = np.array([9, 7, 5, 4, 3, 2])
IDS = np.array([0, 3, 1, 4, 1, 2, 5, 0, 2, 3, 1, 0], np.int32)   # word 1 repeats in a window
BOUNDS = np.array([7, 12], np.int64)
NEGATIVE = 3
ATOL = 2e-5
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _layer(kind, seed=1):
    rng = np.random.default_rng(seed)
    if kind == "hs":
        layer = HierarchicalSoftmax(build_huffman(COUNTS))
    else:
        layer = NegativeSampling(NEGATIVE)
        layer.set_noise(COUNTS)
    layer.allocate(len(COUNTS), DIM)
    layer.weights[:] = rng.standard_normal(layer.weights.shape) * 0.5
    return layer


def _copy(layer):
    return type(layer).from_state(layer.config(), {k: v.copy() for k, v in layer.arrays().items()})


def _syn0(seed=2):
    return (np.random.default_rng(seed).standard_normal((len(COUNTS), DIM)) * 0.5).astype(np.float32)


def _plan(sg, mean=True):
    # no down-sampling; the reduced windows and alpha decay come from the PAIRS loop
    return Plan(sg=sg, keep_thr=np.full(len(COUNTS), 0xFFFFFFFF, np.uint32), window=2,
                reduce_window=True, schedule=Schedule(0.2, 0.05, len(IDS)),
                cbow_mean=mean)


def _numba_backend():
    if not NUMBA_CUDA:
        pytest.skip("numba-cuda is not installed (the cuda extra)")
    if not SIMULATED:
        from numba import cuda
        if not cuda.is_available():
            pytest.skip("no CUDA GPU and the CUDA simulator is off")
    return gpu_device.load_backend("numba", blocks=2)


def _cupy_backend():
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed")
    try:
        return gpu_device.load_backend("cupy")
    except DeviceError as exc:
        pytest.skip(f"CuPy has no usable GPU here: {exc}")


BACKENDS = {"numba": _numba_backend, "host": HostArrays, "cupy": _cupy_backend}


def _train_on_device(backend, layer, syn0, plan, batch_pairs, damping, seed=7):
    device = CudaDevice(backend=backend, mode="batched", batch_pairs=batch_pairs, damping=damping)
    session = device.open(syn0, layer, 1)
    session.warm_up(plan)
    loss, pairs, trained = session.train_chunk(plan, Chunk(IDS, BOUNDS, len(IDS)), 0, seed)
    session.to_host()
    session.close()
    assert trained == len(IDS) and pairs == session.stats["pairs"]
    return loss, pairs


def _reference(kind, layer, syn0, plan, batch_pairs, damping, seed=7):
    """The same pairs (the PAIRS loop, same seed), batch by batch through naive.minibatch."""
    pairs = PairSource(DIM).generate(plan, IDS, BOUNDS, 0, seed)
    if plan.sg:
        items = [([int(pairs.inputs[p])], int(pairs.targets[p]), float(pairs.rates[p]))
                 for p in range(pairs.n)]
    else:
        items = [(pairs.inputs[pairs.starts[p]:pairs.starts[p + 1]].tolist(),
                  int(pairs.targets[p]), float(pairs.rates[p])) for p in range(pairs.n)]
    syn0, out, loss = syn0.astype(np.float64), layer.weights.astype(np.float64), 0.0
    for p0 in range(0, len(items), batch_pairs):
        batch = items[p0:p0 + batch_pairs]
        if kind == "hs":
            outputs = naive.hs_outputs(naive.paths(layer.tree.parent, layer.tree.branch,
                                                   len(COUNTS)))
        else:
            outputs = naive.ns_outputs(noise_matrix(np, p0, len(batch), NEGATIVE, seed,
                                                    layer.alias_thr, layer.alias_idx))
        syn0, out, batch_loss = naive.minibatch(syn0, out, batch, outputs, mean=plan.cbow_mean,
                                                clip=kind == "hs", damping=damping)
        loss += batch_loss
    return syn0, out, loss, len(items)


CASES = {"hs-sg": ("hs", True, True), "hs-cbow-mean": ("hs", False, True),
         "hs-cbow-sum": ("hs", False, False), "ns-sg": ("ns", True, True),
         "ns-cbow": ("ns", False, True)}


@pytest.mark.parametrize("backend", ["numba", "host", "cupy"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("batch_pairs,damping", [(5, True), (1000, False)],
                         ids=["batches-of-5-damped", "one-batch-undamped"])
def test_batch_update_matches_float64_reference(backend, case, batch_pairs, damping):
    kind, sg, mean = CASES[case]
    layer, syn0, plan = _layer(kind), _syn0(), _plan(sg, mean)
    exp0, exp1, exp_loss, n_pairs = _reference(kind, layer, syn0, plan, batch_pairs, damping)
    trained_layer, got0 = _copy(layer), syn0.copy()
    loss, pairs = _train_on_device(BACKENDS[backend](), trained_layer, got0, plan, batch_pairs,
                                   damping)
    assert pairs == n_pairs and (batch_pairs >= 1000 or n_pairs > 2 * batch_pairs)
    assert loss == pytest.approx(exp_loss, rel=1e-5)
    for got, before, expected in ((got0, syn0, exp0), (trained_layer.weights, layer.weights, exp1)):
        assert np.abs(expected - before).max() > 1e-2  # it learned something
        np.testing.assert_allclose(got, expected, rtol=0, atol=ATOL * np.abs(expected).max())


@pytest.mark.parametrize("kind", ["hs", "ns"])
def test_batching_and_damping_change_the_reference(kind):
    """The comparisons above can tell batch sizes and the damping apart: the reference itself
    moves by far more than the tolerance when either changes."""
    layer, syn0, plan = _layer(kind), _syn0(), _plan(True)
    base = _reference(kind, layer, syn0, plan, 1000, False)
    for batch_pairs, damping in ((5, False), (1000, True)):
        other = _reference(kind, layer, syn0, plan, batch_pairs, damping)
        change = np.abs(base[1] - layer.weights).max()
        assert np.abs(other[1] - base[1]).max() > 1e-3 * change


def test_one_pair_batches_are_word2vec_updates():
    """With one pair per batch, the batch update is word2vec's per-pair HS update
    (naive.hs_predictor; the exact sigmoid, scores kept inside the clip), the damping included:
    it leaves rows one entry touches alone."""
    layer, syn0 = _layer("hs"), _syn0() * 0.2
    paths = naive.paths(layer.tree.parent, layer.tree.branch, len(COUNTS))
    exp0, exp1 = syn0.astype(np.float64), layer.weights.astype(np.float64)
    predict = naive.hs_predictor(paths, 0.1)
    for r, w in [(0, 3), (3, 0), (1, 4), (4, 1), (1, 1)]:
        err, _ = predict(exp0[r], w, exp1)
        exp0[r] += err
    got0, got1 = syn0.astype(np.float64), layer.weights.astype(np.float64)
    for r, w in [(0, 3), (3, 0), (1, 4), (4, 1), (1, 1)]:
        got0, got1, _ = naive.minibatch(got0, got1, [([r], w, 0.1)], naive.hs_outputs(paths),
                                        damping=True)
    np.testing.assert_allclose(got0, exp0, atol=1e-12)
    np.testing.assert_allclose(got1, exp1, atol=1e-12)


def test_noise_words_are_the_same_on_device_and_host():
    """The numba kernel's noise draws equal the vectorised host draw, and follow the
    unigram^0.75 distribution of the alias table."""
    layer = _layer("ns")
    session = CudaDevice(backend=_numba_backend(), mode="batched", batch_pairs=64).open(
        _syn0(), layer, 1)
    plan = _plan(True)
    pairs = session._pairs.load(PairSource(DIM).generate(plan, IDS, BOUNDS, 0, 9))
    rows, labels, counts = session.backend.ns_targets(session.program.arrays, pairs, 3, 8, 9)
    rows, counts = session.backend.to_numpy(rows), session.backend.to_numpy(counts)
    noise = noise_matrix(np, 3, 8, NEGATIVE, 9, layer.alias_thr, layer.alias_idx)
    for q in range(8):
        target = int(pairs.host.targets[3 + q])
        expected = [target] + [int(z) for z in noise[q] if z != target]
        assert rows[q, :counts[q]].tolist() == expected
    draws = noise_matrix(np, 0, 40_000, 5, 12345, layer.alias_thr, layer.alias_idx).ravel()
    p = COUNTS ** 0.75 / (COUNTS ** 0.75).sum()
    freq = np.bincount(draws, minlength=len(COUNTS)) / draws.size
    np.testing.assert_allclose(freq, p, atol=0.01)


# -- the session through the API ---------------------------------------------------------------------

SENTENCES = [["a", "b", "c", "a", "d"], ["b", "c", "e", "a"], ["d", "a", "b", "f", "c"]] * 2
TINY = dict(vector_size=DIM, window=2, min_count=1, sample=0, epochs=2, workers=1, seed=3,
            progress=False, chunk_words=12)


@pytest.fixture
def host_backend(monkeypatch):
    """The host twin registered as a backend of --device cuda for the length of a test."""
    monkeypatch.setitem(gpu_device.BACKENDS, "host", ("semhuff.gpu.cupy_kernels", "HostArrays", "-"))
    monkeypatch.setattr(CudaDevice, "backends", tuple(gpu_device.BACKENDS))


@pytest.mark.parametrize("loss", ["hs", "ns"])
def test_numba_simulator_and_host_twin_train_the_same_model(host_backend, loss):
    """Word2Vec(device="cuda") end to end (pairs from the corpus, chunks, batches, to_host):
    the numba.cuda kernels and the CuPy program on NumPy give the same vectors."""
    _numba_backend()
    options = {"mode": "batched", "batch_pairs": 16, "blocks": 2}
    negative = {"negative": 2} if loss == "ns" else {}
    sim = Word2Vec(SENTENCES, loss=loss, **negative, device="cuda", backend="numba",
                   device_options=options, **TINY)
    host = Word2Vec(SENTENCES, loss=loss, **negative, device="cuda", backend="host",
                    device_options={"batch_pairs": 16}, **TINY)
    report = sim.reports[0]
    assert report.device_stats["pairs"] == sum(e.pairs for e in report.epochs) > 16
    assert report.device_stats["batches"] > report.device_stats["chunks"] > 1
    np.testing.assert_allclose(sim.syn0, host.syn0, atol=ATOL * np.abs(host.syn0).max())
    np.testing.assert_allclose(sim.layer.weights, host.layer.weights,
                               atol=ATOL * np.abs(host.layer.weights).max())
    assert report.epochs[0].loss == pytest.approx(host.reports[0].epochs[0].loss, rel=1e-5)


def test_gpu_trained_model_saves_exports_and_scores_like_any(host_backend, tmp_path):
    """Same model file and exports; the device is saved with the model but not needed to load,
    export or score it (scoring runs on the CPU)."""
    model = Word2Vec(SENTENCES, device="cuda", backend="host",
                     device_options={"batch_pairs": 4}, **TINY)
    assert np.isfinite(model.syn0).all() and model.reports[0].epochs[-1].loss > 0
    model.save(tmp_path / "m.npz")
    params = json.loads(str(np.load(tmp_path / "m.npz")["meta"]))["params"]
    assert (params["device"], params["backend"], params["device_options"]) == \
        ("cuda", "host", {"batch_pairs": 4})
    gpu_device.BACKENDS.pop("host")  # as on a machine where that backend is missing
    back = Word2Vec.load(tmp_path / "m.npz", progress=False)
    np.testing.assert_array_equal(back.syn0, model.syn0)
    assert (back.device, back.backend) == ("cuda", "host")
    assert back.wv.most_similar("a", topn=2)
    assert model.save_vectors(str(tmp_path / "v.txt")) == "text"
    scored = back.score(SENTENCES)
    cpu = Word2Vec.load(tmp_path / "m.npz", progress=False)
    cpu.device, cpu.backend, cpu.device_options = "cpu", None, {}
    assert scored.nll == pytest.approx(cpu.score(SENTENCES).nll, rel=1e-12)


def test_hooks_see_the_device_weights_and_can_replace_the_layers(host_backend):
    """to_host() before hooks, layer_changed() uploads what a hook changed."""
    from semhuff.hooks import Hook

    class Probe(Hook):
        every_words = 10

        def __init__(self):
            self.moved = []

        def on_words(self, ctx):
            self.moved.append(float(np.abs(ctx.vectors() - first).max()))

    model = Word2Vec(device="cuda", backend="host", **TINY)
    model.build_vocab(SENTENCES)
    first = model.syn0.copy()
    probe = Probe()
    model.train(SENTENCES, hooks=[probe])
    assert probe.moved and probe.moved[-1] > 0

    session = model._session()
    model.layer.weights[:] = 0.5
    session.layer_changed()
    model.layer.weights[:] = 0.0
    session.to_host()
    assert np.all(model.layer.weights == 0.5)
    session.close()


# -- options and errors ------------------------------------------------------------------------------

def test_device_options_are_checked():
    with pytest.raises(OptionError, match="no backend 'cupy'"):
        make_device("cpu", "cupy")
    with pytest.raises(OptionError, match="do not apply to device 'cpu'"):
        make_device("cpu", batch_pairs=10)
    with pytest.raises(OptionError, match="batch_pairs"):
        make_device("cuda", "numba", mode="batched", batch_pairs=0)
    with pytest.raises(OptionError, match="damping"):
        make_device("cuda", "numba", mode="batched", damping="yes")
    with pytest.raises(OptionError, match="unknown device"):
        Word2Vec(device="tpu")
    layer = _layer("hs")
    layer.track_word_stats(len(COUNTS))
    with pytest.raises(DeviceError, match="word_stats"):
        CudaDevice(backend=HostArrays()).open(_syn0(), layer, 1)


def _without_gpu(code):
    """Run ``code`` in a fresh interpreter with the simulator off; skip where a GPU is usable."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    probe = subprocess.run([sys.executable, "-c", "from numba import cuda; "
                            "raise SystemExit(0 if cuda.is_available() else 1)"],
                           env=env, capture_output=True, text=True)
    if probe.returncode == 0:
        pytest.skip("a CUDA GPU is usable here")
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def test_cuda_without_a_gpu_is_one_clear_error():
    out = _without_gpu("""
        from semhuff import Word2Vec
        from semhuff.errors import DeviceError
        try:
            Word2Vec(device="cuda")
        except DeviceError as exc:
            print(exc)
        """)
    assert out.returncode == 0, out.stderr
    message = out.stdout.strip()
    assert "\\n" not in message and message.startswith("--device cuda: ")
    assert "no CUDA GPU is usable here" in message or "not installed" in message
    assert "semhuff[cuda]" in message


def test_cli_device_cuda_without_a_gpu_exits_2(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c d\n" * 20)
    out = _without_gpu(f"""
        import sys
        from semhuff.cli.train import main
        sys.exit(main([{str(corpus)!r}, "-o", {str(tmp_path / 'v.txt')!r}, "--device", "cuda",
                       "--backend", "numba", "--min-count", "1", "-q"]))
        """)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("semhuff-train: error: --device cuda")
    assert not (tmp_path / "v.txt").exists()


def test_cupy_backend_missing_is_one_clear_error():
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here")
    with pytest.raises(DeviceError, match=r"^--device cuda --backend cupy: CuPy .* is not "
                                          r"installed .*semhuff\[cuda\]"):
        make_device("cuda", "cupy")


def test_importing_semhuff_loads_no_gpu_package():
    code = ("import sys, semhuff, semhuff.model, semhuff.devices, semhuff.gpu.device, "
            "semhuff.cli.train; print([m for m in sys.modules if m.startswith(('numba.cuda', "
            "'cupy'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_kernels_compile_to_ptx_for_an_h100():
    """Numba's real CUDA compiler (not the simulator) types and compiles every kernel for sm_90.
    Needs NVVM from a CUDA toolkit (``numba-cuda[cu12]``), not a GPU; skips without it.
    ``SEMHUFF_PTX_PYTHON`` may name another interpreter that has the toolkit."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    python = os.environ.get("SEMHUFF_PTX_PYTHON", sys.executable)
    out = subprocess.run([python, os.path.join(REPO, "tests", "gpu_ptx_check.py"), REPO], env=env,
                         capture_output=True, text=True, timeout=600)
    if out.returncode == 3:
        pytest.skip(out.stdout.strip()[:200])
    assert out.returncode == 0, out.stdout + out.stderr


def test_pair_generation_overlaps_the_device(monkeypatch):
    """Trainer threads generate their chunks' pairs in parallel while one of them holds the
    device; device sections never overlap (one stream). Generation and the device are made slow
    with sleeps, so the timing does not depend on the machine's load."""
    import threading
    import time
    from semhuff.gpu.pairs import PairSource as Source

    spans, lock = [], threading.Lock()
    real_generate = Source.generate

    def slow_generate(self, *args):
        time.sleep(0.15)
        return real_generate(self, *args)

    class SlowDevice(HostArrays):
        def take_loss(self):
            start = time.perf_counter()
            time.sleep(0.15)
            with lock:
                spans.append((start, time.perf_counter()))
            return super().take_loss()

    monkeypatch.setattr(Source, "generate", slow_generate)
    layer, plan = _layer("hs"), _plan(True)
    session = CudaDevice(backend=SlowDevice()).open(_syn0(), layer, 2)
    session.warm_up(plan)
    spans.clear()
    chunk = Chunk(IDS, BOUNDS, len(IDS))
    started = time.perf_counter()
    threads = [threading.Thread(target=session.train_chunk, args=(plan, chunk, 0, s))
               for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    spans.sort()
    assert len(spans) == 4 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    assert elapsed < 0.8 * 4 * 0.3  # serial: 1.2 s; overlapped: about 0.75 s


def test_a_layer_can_bring_its_own_gpu_program():
    """``OutputLayer.gpu_program`` replaces the built-in program (the plug point of the planned
    class softmax): the session uploads it, runs it per batch and asks it back to the host."""
    from semhuff.gpu.programs import BinaryOutputs, GpuProgram

    class Counting(GpuProgram):
        def __init__(self, layer):
            self.inner = BinaryOutputs(layer, "hs")
            self.calls = {"upload": 0, "train_batch": 0, "to_host": 0}

        def upload(self, session):
            self.calls["upload"] += 1
            self.inner.upload(session)
            self.width = self.inner.width

        def train_batch(self, session, plan, pairs, p0, n, seed):
            self.calls["train_batch"] += 1
            self.inner.train_batch(session, plan, pairs, p0, n, seed)

        def to_host(self, session):
            self.calls["to_host"] += 1

    class OwnProgram(HierarchicalSoftmax):
        def gpu_program(self, backend):
            self.program = Counting(self)
            return self.program

    base = _layer("hs")
    layer = OwnProgram(base.tree)
    layer.allocate(len(COUNTS), DIM)
    layer.weights[:] = base.weights
    syn0, plan = _syn0(), _plan(True)
    loss, pairs = _train_on_device(HostArrays(), layer, syn0, plan, 5, True)
    calls = layer.program.calls
    assert calls["upload"] == 1 and calls["to_host"] == 1
    assert calls["train_batch"] == 1 + -(-pairs // 5)  # warm-up + the batches
    expected = _reference("hs", base, _syn0(), plan, 5, True)
    np.testing.assert_allclose(layer.weights, expected[1], atol=ATOL * np.abs(expected[1]).max())


@pytest.mark.parametrize("backend", ["numba", "host"])
@pytest.mark.parametrize("kind", ["hs", "ns"])
def test_scores_beyond_six(backend, kind):
    """Large weights put scores beyond +-6: HS gives those nodes no update (word2vec, the CPU
    kernels), NS keeps the exact sigmoid; the reference with the other rule differs."""
    layer, syn0, plan = _layer(kind), _syn0() * 4, _plan(True)
    layer.weights *= 4
    rule = kind == "hs"

    def reference(clip):
        pairs = PairSource(DIM).generate(plan, IDS, BOUNDS, 0, 7)
        items = [([int(pairs.inputs[p])], int(pairs.targets[p]), float(pairs.rates[p]))
                 for p in range(pairs.n)]
        outputs = (naive.hs_outputs(naive.paths(layer.tree.parent, layer.tree.branch, len(COUNTS)))
                   if kind == "hs" else
                   naive.ns_outputs(noise_matrix(np, 0, len(items), NEGATIVE, 7, layer.alias_thr,
                                                 layer.alias_idx)))
        return naive.minibatch(syn0, layer.weights, items, outputs, clip=clip, damping=True)

    expected, other = reference(rule), reference(not rule)
    assert np.abs(expected[1] - other[1]).max() > 1e-3 * np.abs(expected[1] - layer.weights).max()
    trained, got0 = _copy(layer), syn0.copy()
    _train_on_device(BACKENDS[backend](), trained, got0, plan, 1000, True)
    np.testing.assert_allclose(trained.weights, expected[1], rtol=0,
                               atol=ATOL * np.abs(expected[1]).max())
    np.testing.assert_allclose(got0, expected[0], rtol=0, atol=ATOL * np.abs(expected[0]).max())


@pytest.mark.parametrize("options,message", [
    (dict(loss="hs-self-organized"), "has no GPU program"),
    (dict(loss="class"), "cannot run on device 'cuda'")])
def test_clustered_layers_have_no_batched_form(host_backend, options, message):
    """Their cluster statistic is gathered by the CPU bodies and the sentence kernel (the
    self-organized tree: tests/test_gpu_sentences.py); the batched form says so in one line
    instead of training without it."""
    with pytest.raises(DeviceError, match=message):
        Word2Vec(SENTENCES, device="cuda", backend="host", **{**TINY, **options})


def test_dask_refuses_the_gpu(host_backend, lee_path):
    with pytest.raises(OptionError, match="cannot be combined with --dask"):
        Word2Vec(lee_path, device="cuda", backend="host", dask="local:1", progress=False)
