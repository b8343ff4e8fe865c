"""The GPU path's benchmark tools, checked on the CPU: the concurrency emulation
(``eval/bench/gpu_concurrency.py``) against the CPU kernel run sentence by sentence, the gensim-
free quality figures against gensim's, and the word2vec device check's JSON (simulator)."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from conftest import zipf_corpus
from semhuff.eval.bench.gpu_concurrency import DIM, MERGES, emulate_chunk
from semhuff.eval.bench.light_quality import FILES, gensim_data_folder
from semhuff.gpu.sentences import block_seeds
from semhuff.kernels import loop
from semhuff.trees.huffman import build_huffman

IDS, BOUNDS, COUNTS = zipf_corpus(n_tokens=160, vocab=14, n_sentences=5, seed=7)
V = len(COUNTS)
SEED, W = 99, 2
KEEP = np.full(V, 0xFFFFFFFF, np.uint32)
KEEP[:2] = np.uint32(0.7 * 2 ** 32)  # down-sampling on for the two most frequent words


def _start():
    rng = np.random.default_rng(1)
    return ((rng.random((V, DIM)) - 0.5) / DIM).astype(np.float32), \
        (rng.standard_normal((V - 1, DIM)) * 0.2).astype(np.float32)


def _emulate(blocks, whole_sentences, merge):
    tree = build_huffman(COUNTS)
    syn0, syn1 = _start()
    out = emulate_chunk(IDS, BOUNDS, syn0, syn1, tree.points, tree.codes, tree.lengths, KEEP, W,
                        0.05, 0.001, 0, 600, block_seeds(SEED, blocks), whole_sentences,
                        MERGES.index(merge), MERGES.index(merge), 0)
    return out, syn0, syn1


def _cpu_sentence(s, seed, syn0, syn1):
    """The CPU kernel (word2vec's order) on sentence ``s`` alone, from ``seed``, in place."""
    tree = build_huffman(COUNTS)
    start = BOUNDS[s - 1] if s else 0
    kernel = loop.kernel(True, DIM, loop.HS, 0)
    return kernel(IDS[start:BOUNDS[s]], np.array([BOUNDS[s] - start]), syn0, syn1,
                  (tree.points, tree.codes, tree.lengths), loop.no_stats(), KEEP, W, True, 0.05,
                  0.001, start, 600, np.uint64(seed), loop.NO_HOT, loop.NO_HOT)


def test_one_block_is_the_cpu_trainers_single_thread():
    tree = build_huffman(COUNTS)
    syn0, syn1 = _start()
    expected = loop.kernel(True, DIM, loop.HS, 0)(
        IDS, BOUNDS, syn0, syn1, (tree.points, tree.codes, tree.lengths), loop.no_stats(), KEEP,
        W, True, 0.05, 0.001, 0, 600, np.uint64(SEED), loop.NO_HOT, loop.NO_HOT)
    out, got0, got1 = _emulate(1, False, "sum")
    assert out[1:] == expected[1:] and out[0] == pytest.approx(expected[0], rel=1e-6)
    np.testing.assert_allclose(got0, syn0, rtol=0, atol=1e-5 * np.abs(syn0).max())
    np.testing.assert_allclose(got1, syn1, rtol=0, atol=1e-5 * np.abs(syn1).max())


@pytest.mark.parametrize("merge", MERGES)
def test_sentences_in_flight_meet_as_the_merge_says(merge):
    """As many blocks as sentences, each reading the rows as they were when it started
    (``sentence`` units): every sentence trains alone from the start (the CPU kernel on a copy,
    with its block's seed), and the changes meet by the rule: summed, the last block's, or
    their mean."""
    blocks = len(BOUNDS)
    seeds = block_seeds(SEED, blocks)
    start0, start1 = _start()
    changes0, changes1 = [], []
    for s in range(blocks):
        syn0, syn1 = start0.copy(), start1.copy()
        _cpu_sentence(s, seeds[s], syn0, syn1)
        changes0.append(syn0 - start0)
        changes1.append(syn1 - start1)

    def meet(start, changes):
        changes = np.stack(changes)
        touched = changes != 0
        if merge == "sum":
            return start + changes.sum(axis=0)
        if merge == "mean":
            writers = np.maximum(np.any(touched, axis=2).sum(axis=0), 1)[:, None]
            return start + changes.sum(axis=0) / writers
        last = start.copy()  # the highest block that wrote a row gives it its change
        for change, rows in zip(changes, np.any(touched, axis=2)):
            last[rows] = start[rows] + change[rows]
        return last

    _, got0, got1 = _emulate(blocks, True, merge)
    for got, start, changes in ((got0, start0, changes0), (got1, start1, changes1)):
        np.testing.assert_allclose(got, meet(start, changes), rtol=0,
                                   atol=1e-5 * np.abs(start).max())


def test_light_quality_is_gensims(lee_path):
    """The gensim-free figures of the GPU image equal gensim's evaluate_word_pairs and
    evaluate_word_analogies (default arguments) on a trained model."""
    from semhuff import Word2Vec
    from semhuff.eval.bench.light_quality import gensim_data_folder, quality
    from semhuff.eval.bench.train import quality as gensim_quality
    model = Word2Vec(lee_path, vector_size=24, min_count=2, epochs=2, progress=False, workers=1)
    ours = quality(model.wv.index_to_key, model.wv.vectors, gensim_data_folder())
    theirs = gensim_quality(model.wv)
    # float32 cosines computed in another order may swap two near-tied ranks: 1e-3 at most
    assert ours == pytest.approx(theirs, abs=1e-3)
    assert ours["ws353"] != 0


def test_light_analogies_are_gensims(tmp_path):
    """3CosAdd over the first 30,000 words, question words excluded, case-insensitive: the
    same share right as gensim's on vectors where about half the questions come out right."""
    from gensim.models import KeyedVectors
    from semhuff.eval.bench.light_quality import analogies, gensim_data_folder
    lines = open(os.path.join(gensim_data_folder(), "questions-words.txt")).read().splitlines()
    questions = [ln for ln in lines[1:120] if not ln.startswith(":")]
    path = tmp_path / "q.txt"
    path.write_text(": capitals\n" + "\n".join(questions) + "\n")
    words = sorted({w for q in questions for w in q.lower().split()})
    words += [f"filler{i}" for i in range(50)]
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((len(words), 16)).astype(np.float32)
    offset = rng.standard_normal(16).astype(np.float32) * 3  # country = capital + offset, noisy
    index = {w: i for i, w in enumerate(words)}
    for q in questions:
        a, b, _, _ = q.lower().split()
        vectors[index[b]] = vectors[index[a]] + offset + rng.standard_normal(16) * 0.8
    kv = KeyedVectors(16)
    kv.add_vectors(words, vectors)
    ours = analogies(words, vectors, str(path))
    theirs, _ = kv.evaluate_word_analogies(str(path), restrict_vocab=30000)
    assert ours == theirs and 0.1 < ours < 0.9


def test_the_word2vec_device_check_writes_every_figure(tmp_path):
    """``gpu_word2vec_check --quick`` in the simulator, without gensim (as on the GPU image):
    one line a run, and the JSON the issue asks for (per configuration: the CPU trainer and the
    device's forms, each with words_per_second, peak_device_mib and the three quality
    figures)."""
    corpus = tmp_path / "c.txt"
    rng = np.random.default_rng(0)
    corpus.write_text("\n".join(" ".join(f"w{w}" for w in rng.zipf(1.5, 12) % 20)
                                for _ in range(12)) + "\n")
    out = tmp_path / "w2v.json"
    data = tmp_path / "eval"
    data.mkdir()
    for name in FILES.values():  # the evaluation files travel with the check (no gensim there)
        shutil.copy(os.path.join(gensim_data_folder(), name), data / name)
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "SEMHUFF_GPU_LANES": "8"}
    # as on the GPU image: no gensim, nltk or rustworkx
    hide = ("import sys, runpy; sys.modules.update(gensim=None, nltk=None, rustworkx=None); "
            "runpy.run_module('semhuff.eval.bench.gpu_word2vec_check', run_name='__main__')")
    run = subprocess.run([sys.executable, "-c", hide, "--quick", "--corpus", str(corpus),
                          "--eval-data", str(data), "--configs", "cbow-hs", "--out", str(out)],
                         env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert len([ln for ln in run.stdout.splitlines() if ln.startswith("cbow-hs")]) == 3
    result = json.loads(out.read_text())
    runs = result["runs"]["cbow-hs"]
    assert set(runs["device"]) == {"sentence", "batched"}
    for r in (runs["cpu"], *runs["device"].values()):
        assert {"words_per_second", "peak_device_mib", "ws353", "simlex", "analogy"} <= set(r)
        assert r["words_per_second"] > 0
    assert runs["device"]["sentence"]["mode"] == "sentence"
    assert runs["device"]["batched"]["mode"] == "batched"
