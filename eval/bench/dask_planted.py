"""Dask rounds on planted word classes: how quality depends on the number of workers, the round
length and the combination rule, on a corpus whose right answer is known.

    python -m semhuff.eval.bench.dask_planted --workers 2 8 --round-words 5000 40000

A corpus of 20 classes x 100 words (``planted_corpus``: a sentence walks a fixed class-level
chain, each word drawn from its class by Zipf's law), 300k tokens; quality is the share of each
word's 5 nearest neighbours that are in its class (words seen 20 times or more; chance ~0.05).
Trained in one process, then on LocalClusters of each size (one thread a worker).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile

import numpy as np

SETTINGS = dict(vector_size=16, window=2, min_count=1, sample=1e-3, epochs=3, seed=1,
                progress=False, chunk_words=5000)


def planted_corpus(path, classes=20, per_class=100, sentences=20_000, length=15, seed=0):
    """Words in planted classes: a sentence walks a fixed class-level chain and draws each word
    from its class (Zipf's law inside a class: a few frequent words, many rare ones), so the
    words of a class share their contexts and nothing else."""
    rng = np.random.default_rng(seed)
    nxt = np.array([rng.choice(classes, size=2, replace=False) for _ in range(classes)])
    p = 1.0 / np.arange(1, per_class + 1)
    members = rng.choice(per_class, size=(sentences, length), p=p / p.sum())
    steps = rng.integers(2, size=(sentences, length))
    c = rng.integers(classes, size=sentences)
    with open(path, "w") as fh:
        for s in range(sentences):
            words = []
            for i in range(length):
                words.append(f"c{c[s]}w{members[s, i]}")
                c[s] = nxt[c[s], steps[s, i]]
            fh.write(" ".join(words) + "\n")
    return path


def class_purity(model, k=5, min_count=20):
    """The share of every word's k nearest neighbours in its own planted class (words seen at
    least ``min_count`` times; chance is about 1/20)."""
    wv, vocab = model.wv, model.vocab
    words = [w for w in wv.index_to_key if vocab.counts[vocab.index[w]] >= min_count]
    hits = [sum(n.split("w")[0] == w.split("w")[0] for n, _ in wv.most_similar(w, topn=k))
            for w in words]
    return float(np.mean(hits)) / k


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--workers", type=int, nargs="+", default=[2, 8])
    p.add_argument("--round-words", type=int, nargs="+", default=[5000, 40000])
    p.add_argument("--combine", nargs="+", default=["adaptive", "weighted", "sum"])
    p.add_argument("--loss", nargs="+", default=["hs", "ns"])
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    from distributed import Client, LocalCluster
    from semhuff import Word2Vec
    from semhuff.distributed import DaskTraining
    from semhuff.errors import TrainingDiverged
    corpus = planted_corpus(os.path.join(tempfile.mkdtemp(), "planted.txt"))
    for loss in args.loss:
        single = Word2Vec(corpus, workers=1, loss=loss, **SETTINGS)
        print(f"{loss}: one process {class_purity(single):.3f}", flush=True)
    for n in args.workers:
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            for loss in args.loss:
                for rw in args.round_words:
                    cells = []
                    for rule in args.combine:
                        try:
                            m = Word2Vec(corpus, loss=loss, **SETTINGS, dask=DaskTraining(
                                client, round_words=rw, combine=rule))
                            loss_pp = m.reports[-1].epochs[-1].loss_per_pair
                            cells.append(f"{rule} {class_purity(m):.3f} (loss {loss_pp:.3g})")
                        except TrainingDiverged:
                            cells.append(f"{rule} diverged")
                    print(f"{loss}, {n} workers, rounds of {rw:,}: " + "; ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
