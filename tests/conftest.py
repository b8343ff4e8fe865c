import os

# The GPU tests run numba.cuda's kernels in Numba's CUDA simulator, which must be chosen before
# numba is imported (numba reads it once): so here, before anything imports semhuff. On a machine
# with a GPU, ``NUMBA_ENABLE_CUDASIM=0 python -m pytest tests/test_gpu.py`` runs them on the GPU.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
# OpenMP threads that spin while they wait (libgomp's default) collapse when the cores are
# busy: pytest-xdist's workers (one per core) each running torch with a thread per core made a
# tiny LSTM step ~100 ms instead of ~5 (test_a_tiny_lm_learns: 53-150 s against 4 s). Passive
# waiting must be chosen before torch loads its OpenMP runtime, so here; subprocesses inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np
import pytest

from semhuff.data_paths import missing_message, shared_corpus as shared_corpus_path

CORPUS = str(shared_corpus_path())


@pytest.fixture
def shared_corpus():
    if not os.path.exists(CORPUS):
        pytest.skip(missing_message(CORPUS, "shared corpus"))
    return CORPUS


@pytest.fixture
def torch_one_thread():
    """Tiny torch models in one thread (on a busy 2-core machine, threads only contend; and one
    thread makes a run bit-for-bit reproducible). Used by the LM tests through ``usefixtures``."""
    import torch
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def lee_path():
    from gensim.test.utils import datapath
    return datapath("lee_background.cor")


def zipf_corpus(n_tokens=600, vocab=30, n_sentences=4, seed=0):
    """Token ids drawn from a Zipf-like law, cut into sentences; for kernel tests."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    ids = rng.choice(vocab, size=n_tokens, p=p).astype(np.int32)
    cuts = np.sort(rng.choice(np.arange(1, n_tokens), size=n_sentences - 1, replace=False))
    bounds = np.append(cuts, n_tokens).astype(np.int64)
    counts = np.bincount(ids, minlength=vocab)
    # ids must be frequency-sorted like a Vocab's: relabel by descending count
    order = np.argsort(-counts, kind="stable")
    relabel = np.empty(vocab, np.int32)
    relabel[order] = np.arange(vocab)
    return relabel[ids], bounds, np.maximum(counts[order], 1)
