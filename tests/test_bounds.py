"""The training kernels with Numba's bounds checks on (``NUMBA_BOUNDSCHECK=1``): a scratch
array sized for one body and read by another (a self-organized tree walking HS's deferred
updates into an empty buffer once did) raises IndexError here instead of corrupting the heap
and aborting a later, unrelated test. A subprocess, because the flag is read when Numba is
imported, with its own cache directory, so that no checked kernel lands in the user's cache."""
import os
import subprocess
import sys

SCRIPT = r"""
import itertools, sys
import numpy as np
from gensim.test.utils import datapath
from semhuff import Word2Vec
lines = list(itertools.islice(open(datapath("lee_background.cor")), 120))
corpus = [line.split() for line in lines]
base = dict(vector_size=8, min_count=2, epochs=1, seed=1, progress=False)
runs = [
    dict(sg=1, loss="hs", hs_order="mixed", workers=2),  # the stacked buffer, hot rows
    dict(sg=1, loss="hs", hs_order="batched"),  # the tree-deep buffer
    dict(sg=1, loss="hs-self-organized", layer_options=dict(clusters=4)),
    dict(sg=1, loss="hs+ns"),
    dict(sg=1, loss="ns"),
    dict(sg=0, loss="hs"),
]
for options in runs[int(sys.argv[1])::2]:  # half of them: two processes, one per core
    model = Word2Vec(corpus, **base, **options)
    assert np.isfinite(model.syn0).all(), options
    print("checked", options, flush=True)
"""


def test_training_kernels_stay_in_bounds(tmp_path):
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    halves = [subprocess.Popen([sys.executable, "-c", SCRIPT, str(half)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for half in (0, 1)]
    checked = 0
    for process in halves:
        out, err = process.communicate(timeout=900)
        assert process.returncode == 0, out + err[-3000:]
        checked += out.count("checked")
    assert checked == 6
