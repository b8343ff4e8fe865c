"""The GPU's sentence-per-block form (``semhuff.gpu.sentence_kernels``, ``sentence_session``),
without a GPU: the kernel runs in numba-cuda's simulator (``conftest.py``).

The reference is the CPU kernel itself (``kernels/loop.py``), not a third copy: one block over a
chunk draws the CPU kernel's random stream (down-sampling, reduced windows, noise words) and must
train its vectors, for every body the device has. Most cases run blocks of 8 lanes (one
dimension a lane at dim 8; a GPU runs 32: one case does here too), so the simulator's Python
threads stay few.

Tolerance: the device sums a dot product lane by lane and then across lanes, the CPU in LLVM's
vector order, so the float32 results differ by rounding: ``TOL`` = 2e-5 of the largest weight.
The smallest change the tests must see, word2vec's order against the mixed one (4 levels
deferred), moves the weights by more than 100x that (asserted below).
"""
import os

import numba
import numpy as np
import pytest

from conftest import zipf_corpus
from semhuff import Word2Vec
from semhuff.devices import make_device
from semhuff.encode import Chunk
from semhuff.errors import DeviceError, OptionError
from semhuff.gpu.sentences import block_seeds, split_bounds
from semhuff.kernels import loop
from semhuff.kernels.common import NLL_BY_CODE, SIGMOID_TABLE
from semhuff.kernels.common import lcg_next as cpu_lcg_next
from semhuff.kernels.ns import build_alias_table
from semhuff.trees.huffman import build_huffman

sk = pytest.importorskip("semhuff.gpu.sentence_kernels",
                         reason="numba-cuda (the cuda or test extra) is not installed")
cuda = sk.cuda
SIMULATED = bool(numba.core.config.ENABLE_CUDASIM)

D, W, NEG, LANES = 8, 2, 3, 8
SEED = 12345
TOL = 2e-5
IDS, BOUNDS, COUNTS = zipf_corpus(n_tokens=90, vocab=12, n_sentences=4, seed=3)
V = len(COUNTS)
# the kernel's last three arguments (the self-organized statistic's), for layers without it
NO_PICKS = (np.zeros(1, np.uint32), np.zeros((1, 2), np.int32), np.zeros(1, np.int32))


def _keep():
    """Down-sampling on: the three most frequent words kept with probability 0.6."""
    keep = np.full(V, 0xFFFFFFFF, np.uint32)
    keep[:3] = np.uint32(0.6 * 2 ** 32)
    return keep


def _semhuff_tree():
    import scipy.sparse as sp
    from semhuff.trees.semhuff import build_semhuff
    similarity = sp.random(V, V, density=0.3, random_state=1, format="csr")
    return build_semhuff(COUNTS, similarity)


def _chain_tree():
    """Huffman over doubling counts: a chain 11 deep, deeper than a block's 8 lanes score at
    once (the kernel walks it in groups)."""
    return build_huffman(2 ** np.arange(V, 0, -1))


TREES = {"huffman": lambda: build_huffman(COUNTS), "semhuff": _semhuff_tree, "chain": _chain_tree}


def _weights(seed=0):
    rng = np.random.default_rng(seed)
    syn0 = ((rng.random((V, D)) - 0.5) / D).astype(np.float32)
    syn1 = (rng.standard_normal((V - 1, D)) * 0.3).astype(np.float32)
    syn1neg = (rng.standard_normal((V, D)) * 0.3).astype(np.float32)
    return syn0, syn1, syn1neg


def _cpu(case, tree, bounds=BOUNDS):
    """The CPU kernel on the case: (loss, pairs, trained), syn0, syn1, syn1neg."""
    syn0, syn1, syn1neg = _weights()
    hs_arrays = (tree.points, tree.codes, tree.lengths)
    thr, idx = build_alias_table(COUNTS.astype(np.float64) ** 0.75)
    if case["body"] == "hs":
        body, weights, larg, levels = loop.HS, syn1, hs_arrays, case["top"]
    elif case["body"] == "ns":
        body, weights, larg, levels = loop.NS, syn1neg, (thr, idx, NEG), int(case["batched"])
    else:
        body, weights, larg, levels = loop.HS_NS, syn1, (hs_arrays, (thr, idx, NEG), syn1neg), \
            case["top"]
    kernel = loop.kernel(case["sg"], D, body, levels, cbow_mean=case["mean"],
                         saturate=case["saturate"])
    out = kernel(IDS, bounds, syn0, weights, larg, loop.no_stats(), _keep(), W, True, 0.1, 0.01,
                 40, 400, np.uint64(SEED), loop.NO_HOT, loop.NO_HOT)
    return out, syn0, syn1, syn1neg


def _device(case, tree, blocks=1, lanes=LANES, bounds=BOUNDS):
    """The sentence kernel on the case, ``blocks`` blocks of ``lanes`` lanes; plain stores
    where the case says so (else atomic adds)."""
    syn0, syn1, syn1neg = (cuda.to_device(a) for a in _weights())
    thr, idx = build_alias_table(COUNTS.astype(np.float64) ** 0.75)
    hs, neg = case["body"] in ("hs", "hs+ns"), NEG if case["body"] in ("ns", "hs+ns") else 0
    kernel = sk.sentence_kernel(case["sg"], D, W, case["mean"], hs, case["top"],
                                case["saturate"], neg, case["batched"], lanes,
                                not case["plain"])
    out = cuda.to_device(np.zeros(4))
    kernel[blocks, lanes](IDS, bounds, np.zeros_like(IDS), block_seeds(SEED, blocks), syn0, syn1,
                          tree.points, tree.codes, tree.lengths, syn1neg, thr, idx,
                          SIGMOID_TABLE, NLL_BY_CODE, _keep(), True, 0.1, 0.01, 40, 400, out,
                          *NO_PICKS)
    return (out.copy_to_host(), syn0.copy_to_host(), syn1.copy_to_host(),
            syn1neg.copy_to_host())


def _case(body="hs", sg=True, top=0, mean=True, saturate=False, batched=False, tree="huffman",
          plain=False):
    return dict(body=body, sg=sg, top=top, mean=mean, saturate=saturate, batched=batched,
                tree=tree, plain=plain)


CASES = {
    "sg-hs-word2vec": _case(),
    "sg-hs-mixed-saturate": _case(top=4, saturate=True),
    "sg-hs-mixed-plain-stores": _case(top=4, plain=True),
    "sg-hs-semhuff": _case(tree="semhuff"),
    "sg-hs-deep-tree": _case(tree="chain"),
    "cbow-hs-mean": _case(sg=False),
    "cbow-hs-sum-semhuff": _case(sg=False, mean=False, tree="semhuff"),
    "sg-ns-word2vec": _case(body="ns"),
    "sg-ns-batched": _case(body="ns", batched=True),
    "cbow-ns": _case(body="ns", sg=False),
    "sg-ns-batched-plain-stores": _case(body="ns", batched=True, plain=True),
    "sg-hs+ns-mixed": _case(body="hs+ns", top=4),
    "cbow-hs+ns": _case(body="hs+ns", sg=False),
}


def _assert_same_training(got, expected):
    (out, *arrays), (cpu_out, *cpu_arrays) = got, expected
    assert (int(out[1]), int(out[2])) == (cpu_out[1], cpu_out[2])  # predictions, words kept
    assert out[0] == pytest.approx(cpu_out[0], rel=1e-6)
    for a, b in zip(arrays, cpu_arrays):
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL * np.abs(b).max())


@pytest.mark.parametrize("name", list(CASES))
def test_one_block_trains_the_cpu_kernels_vectors(name):
    """With down-sampling on and word2vec's reduced windows: the same draws, the same updates,
    in the same order, every weight within float32 rounding, the same loss and counts."""
    case = CASES[name]
    tree = TREES[case["tree"]]()
    assert tree.max_depth > LANES or case["tree"] != "chain"
    _assert_same_training(_device(case, tree), _cpu(case, tree))


def test_a_warp_of_32_lanes_trains_the_same():
    """The configuration a GPU runs: 32 lanes a block (24 of them idle at dim 8), long
    sentences cut at 20 words as the session cuts them at 1,000."""
    case, tree = CASES["sg-ns-word2vec"], build_huffman(COUNTS)
    bounds = split_bounds(BOUNDS, 20)
    assert len(bounds) > len(BOUNDS)
    _assert_same_training(_device(case, tree, lanes=32, bounds=bounds),
                          _cpu(case, tree, bounds=bounds))


def test_the_tolerance_tells_the_update_orders_apart():
    """word2vec's order and the mixed one differ by far more than TOL: the comparisons above
    would see a kernel that deferred the wrong levels."""
    tree = build_huffman(COUNTS)
    _, a0, a1, _ = _cpu(_case(), tree)
    _, b0, b1, _ = _cpu(_case(top=4), tree)
    assert np.abs(a1 - b1).max() > 100 * TOL * np.abs(a1).max()
    assert np.abs(a0 - b0).max() > 100 * TOL * np.abs(a0).max()


def test_many_blocks_each_walk_their_own_sentences():
    """Block b walks sentences b, b + G, ...: with the full window and no down-sampling every
    grid (fewer blocks than sentences, as many, more) trains every word once with the same
    predictions (a hand count); only the order of the updates differs, so the loss is near the
    one-block run's but not the same."""
    case, tree = CASES["sg-hs-word2vec"], build_huffman(COUNTS)
    no_sampling = np.full(V, 0xFFFFFFFF, np.uint32)
    results = []
    for blocks in (1, 3, 8):
        syn = [cuda.to_device(a) for a in _weights()]
        kernel = sk.sentence_kernel(True, D, W, True, True, 0, False, 0, False, LANES, True)
        out = cuda.to_device(np.zeros(4))
        kernel[blocks, LANES](IDS, BOUNDS, np.zeros_like(IDS), block_seeds(SEED, blocks),
                              syn[0], syn[1], tree.points, tree.codes, tree.lengths, syn[2],
                              np.zeros(1, np.uint32), np.zeros(1, np.int32), SIGMOID_TABLE,
                              NLL_BY_CODE, no_sampling, False, 0.1, 0.01, 0, 400, out, *NO_PICKS)
        results.append(out.copy_to_host())
    starts = np.concatenate(([0], BOUNDS[:-1]))
    expected_pairs = sum(sum(min(p, W) + min(n - 1 - p, W) for p in range(n))
                         for n in BOUNDS - starts)
    for out in results:
        assert (out[1], out[2]) == (expected_pairs, len(IDS))
        assert out[0] == pytest.approx(results[0][0], rel=0.05)
    assert results[1][0] != results[0][0]  # other streams' order: not the same run


# -- host-side pieces ------------------------------------------------------------------------------

def test_lcg_on_halves_is_word2vecs_lcg():
    rng = np.random.default_rng(0)
    states = rng.integers(0, 2 ** 63, size=200, dtype=np.uint64) * np.uint64(2)
    states = np.append(states, [np.uint64(0), np.uint64(2 ** 64 - 1), np.uint64(2 ** 32 - 1)])
    for state in states:
        assert sk.lcg_next(np.uint64(state)) == cpu_lcg_next(np.uint64(state))


def test_split_bounds_cuts_long_sentences_only():
    assert split_bounds(np.array([3, 3, 10]), 4).tolist() == [3, 3, 7, 10]
    assert split_bounds(np.array([9]), 3).tolist() == [3, 6, 9]
    assert split_bounds(np.array([2, 5]), 3).tolist() == [2, 5]
    assert split_bounds(np.array([2, 50]), 0).tolist() == [2, 50]
    assert split_bounds(np.zeros(0, np.int64), 3).tolist() == []


def test_block_zero_draws_the_chunks_stream():
    seeds = block_seeds(SEED, 1000)
    assert seeds[0] == SEED and len(set(seeds.tolist())) == 1000
    np.testing.assert_array_equal(seeds, block_seeds(SEED, 1000))
    assert block_seeds(SEED + 1, 3)[1] != seeds[1]


# -- the session, through the API ------------------------------------------------------------------

@pytest.fixture
def eight_lanes(monkeypatch):
    from semhuff.gpu.sentence_session import SentenceSession
    monkeypatch.setattr(SentenceSession, "lanes", LANES)


TEXTS = [["a", "b", "c", "a", "d", "b"], ["b", "c", "e", "a", "d"],
         ["d", "a", "b", "f", "c", "e", "a"]] * 3


@pytest.mark.parametrize("options", [dict(loss="hs"), dict(loss="ns"),
                                     dict(loss="hs", sg=0, hs_order="word2vec")],
                         ids=["sg-hs-mixed", "sg-ns-batched", "cbow-hs"])
def test_one_block_device_run_is_the_cpu_run(eight_lanes, options):
    """Word2Vec(device="cuda") with one block: the CPU trainer's model (one thread), from the
    same chunks, seeds and defaults (down-sampling, reduced windows, the mixed and batched
    orders), epoch by epoch; its report says what the device did."""
    kw = dict(vector_size=D, window=2, min_count=1, sample=0.1, epochs=2, seed=3,
              progress=False, workers=1, **options)
    cpu = Word2Vec(TEXTS, **kw)
    dev = Word2Vec(TEXTS, device="cuda", device_options={"blocks": 1}, **kw)
    for a, b in ((dev.syn0, cpu.syn0), (dev.layer.weights, cpu.layer.weights)):
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL * np.abs(b).max())
    for got, expected in zip(dev.reports[0].epochs, cpu.reports[0].epochs):
        assert (got.pairs, got.trained_words) == (expected.pairs, expected.trained_words)
        assert got.loss == pytest.approx(expected.loss, rel=1e-6)
    stats = dev.reports[0].device_stats
    assert stats["mode"] == "sentence" and stats["chunks"] == 2 and stats["blocks"] == 1
    assert stats["pairs"] == sum(e.pairs for e in dev.reports[0].epochs)


def test_many_blocks_lower_the_loss_like_the_cpu_trainer(eight_lanes):
    """Three blocks, each walking every third sentence with its own stream: epoch by epoch the
    loss per prediction falls as the CPU trainer's does, and stays within 5% of it."""
    kw = dict(vector_size=D, window=2, min_count=1, sample=0, epochs=3, seed=3, alpha=0.2,
              shrink_windows=False,
              progress=False, workers=1, loss="hs")
    rng = np.random.default_rng(2)
    follows = rng.integers(0, 16, size=(16, 2))  # each word is followed by one of two words
    walk = [0]
    for choice in rng.integers(0, 2, size=179):
        walk.append(follows[walk[-1], choice])
    texts = [[f"w{w}" for w in walk[i:i + 20]] for i in range(0, 180, 20)]
    cpu = Word2Vec(texts, **kw).reports[0].epochs
    dev = Word2Vec(texts, device="cuda", device_options={"blocks": 3}, **kw).reports[0].epochs
    losses = [e.loss_per_pair for e in dev]
    assert losses == sorted(losses, reverse=True) and losses[-1] < 0.95 * losses[0]
    for got, expected in zip(dev, cpu):
        assert got.pairs == expected.pairs  # the full window: the same predictions
        assert got.loss_per_pair == pytest.approx(expected.loss_per_pair, rel=0.05)


def test_device_chunks_are_large_and_sentences_cut(eight_lanes):
    """The session asks the trainer for chunks of at least ``chunk_words`` and cuts sentences at
    ``sentence_words``: one block a sentence piece."""
    long_line = [["a", "b", "c", "d", "e", "f"] * 5]
    model = Word2Vec(vector_size=D, window=2, min_count=1, sample=0, epochs=1, seed=3,
                     progress=False, workers=1, device="cuda", chunk_words=7,
                     device_options={"sentence_words": 8, "chunk_words": 40})
    model.build_vocab(long_line * 2)
    report = model.train(long_line * 2)
    stats = report.device_stats
    assert stats["chunks"] == 1  # 60 words in one chunk of >= 40 (not 9 of 7)
    assert stats["sentences"] == 8 and stats["blocks"] == 8  # 2 x 30 words in pieces of 8
    assert report.epochs[0].trained_words == 60


def test_device_modes_and_their_settings(eight_lanes):
    device = make_device("cuda", "numba")
    assert (device.mode, device.blocks, device.updates, device.sentence_words,
            device.chunk_words) == ("sentence", 0, "atomic", 1000, 0)  # 0: one block a sentence
    assert make_device("cuda", "numba", mode="batched").blocks == 0  # 32 per multiprocessor
    assert make_device("cuda", "numba", mode="batched").mode == "batched"
    with pytest.raises(OptionError, match="batch_pairs is a setting of the batched form"):
        make_device("cuda", "numba", batch_pairs=512)
    with pytest.raises(OptionError, match="sentence_words is a setting of the sentence form"):
        make_device("cuda", "numba", mode="batched", sentence_words=100)
    with pytest.raises(OptionError, match="unknown device mode"):
        make_device("cuda", "numba", mode="pairs")
    with pytest.raises(OptionError, match="sentence_words must be an integer >= 1"):
        make_device("cuda", "numba", sentence_words=0)
    with pytest.raises(OptionError, match="updates must be one of atomic, plain"):
        make_device("cuda", "numba", updates="fast")
    with pytest.raises(OptionError, match="updates is a setting of the sentence form"):
        make_device("cuda", "numba", mode="batched", updates="plain")
    with pytest.raises(OptionError, match="numba backend only"):
        make_device("cuda", "cupy", mode="sentence")


@pytest.mark.parametrize("settings,message", [
    (dict(loss="hs", hs_order="batched"), "hs_order 'word2vec' or 'mixed'"),
    (dict(loss="ns", negative=7), "negative 7: a block of 8 lanes"),
    (dict(loss="ns", window=5), "ns_order 'word2vec' takes any window"),
])
def test_what_the_device_cannot_train_is_one_line(eight_lanes, settings, message):
    kw = dict(vector_size=D, window=2, min_count=1, epochs=1, progress=False, device="cuda")
    with pytest.raises(DeviceError, match=message):
        Word2Vec(TEXTS, **{**kw, **settings})


def test_semhuff_train_on_the_device_writes_the_cpu_model(tmp_path):
    """``semhuff-train --device cuda`` (the simulator, one block of 8 lanes): the same CLI,
    report and model file as the CPU run with one worker."""
    import json
    import subprocess
    import sys
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(" ".join(t) for t in TEXTS) + "\n")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "SEMHUFF_GPU_LANES": str(LANES)}
    common = [str(corpus), "--dim", str(D), "--window", "2", "--min-count", "1", "--epochs", "2",
              "--workers", "1", "--no-progress"]
    runs = {}
    for name, extra in (("cpu", []), ("cuda", ["--device", "cuda", "--device-blocks", "1"])):
        out = subprocess.run([sys.executable, "-m", "semhuff.cli.train", *common, *extra,
                              "-o", str(tmp_path / f"{name}.npz"), "--report",
                              str(tmp_path / f"{name}.json")], env=env, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        runs[name] = (np.load(tmp_path / f"{name}.npz"), out.stdout)
    assert "device: CUDA simulator (numba, sentence form" in runs["cuda"][1]
    for key in ("syn0", "layer.weights"):
        a, b = runs["cuda"][0][key], runs["cpu"][0][key]
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL * np.abs(b).max())
    report = json.loads((tmp_path / "cuda.json").read_text())
    assert report["settings"]["device"] == "cuda"


def test_self_organized_tree_on_the_device_is_the_cpu_run(eight_lanes, monkeypatch):
    """HS over a self-organized tree: the HS step and the sampled centres on the device, their
    cluster statistic by the observe kernel, the re-assignments on the host between chunks.
    With one block, each sentence its own chunk (the CPU gathers the statistic after each
    sentence, the device after each launch) and one observing block (the CPU's order), it is
    the CPU run: the same weights, statistic and clusters after two re-assignments."""
    from semhuff.gpu.sentence_session import SentenceSession
    monkeypatch.setattr(SentenceSession, "observe_blocks", 1)
    words = [f"w{i}" for i in range(14)]
    rng = np.random.default_rng(5)
    texts = [[words[j] for j in rng.zipf(1.4, size=9) % 14] for _ in range(12)]
    kw = dict(vector_size=D, window=2, min_count=1, sample=0.2, epochs=2, seed=3,
              progress=False, workers=1, chunk_words=1, loss="hs-self-organized",
              layer_options=dict(clusters=3, reassign_every=25, samples_per_word=3.0))
    cpu = Word2Vec(texts, **kw)
    dev = Word2Vec(texts, device="cuda", device_options={"blocks": 1, "chunk_words": 1}, **kw)
    assert cpu.layer.organizer.history.shape[0] >= 2  # it re-assigned
    np.testing.assert_array_equal(dev.layer.organizer.cluster_of, cpu.layer.organizer.cluster_of)
    for a, b in ((dev.syn0, cpu.syn0), (dev.layer.weights, cpu.layer.weights),
                 (dev.layer.organizer.q, cpu.layer.organizer.q)):
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL * np.abs(b).max())
    assert np.abs(cpu.layer.organizer.q).max() > 0  # the statistic gathered something


@pytest.mark.parametrize("old, current, args, expected", [
    ("row_stack", "vstack", (([1, 2], [3, 4]),), [[1, 2], [3, 4]]),
    ("trapz", "trapezoid", ([1.0, 2.0, 3.0],), 4.0),  # (1+2)/2 + (2+3)/2
    ("in1d", "isin", ([1, 5, 2], [2, 3]), [False, False, True]),
])
def test_the_numba_backend_restores_the_numpy_names_older_numba_cuda_registers(
        monkeypatch, old, current, args, expected):
    """An H200 image (an older numba-cuda than its NumPy) failed every kernel's first compile
    on ``np.row_stack``; numba-cuda 0.22-0.29 fail on ``np.trapz`` under NumPy 2.4 (both
    removed from NumPy): importing the kernels puts each alias back, behaving as before."""
    import importlib
    from semhuff.gpu import numba_kernels
    monkeypatch.delattr(np, old, raising=False)
    importlib.reload(numba_kernels)  # what a fresh process's first import does
    assert getattr(np, old) is getattr(np, current)
    np.testing.assert_array_equal(getattr(np, old)(*args), expected)
