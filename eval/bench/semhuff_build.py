"""Benchmark SemHuff tree building on the shared corpus vocabulary (min_count 5, ~56k words).

    python -m semhuff.eval.bench.semhuff_build [--vectors PATH] [--ratio-max-nodes 3000]
    (installed: python -m semhuff.eval.bench.semhuff_build)

For WordNet similarity and for embedding top-30 similarity it prints the time of the similarity
step, every level (nodes, leaves, edges, matching used, seconds) and the total; the target is
<= 60 s for both together. Without ``--vectors`` it first trains quick gensim vectors (CBOW,
100 dims, one epoch; timed separately, cached in the temp folder, never in the repo). Then, for
every level of at most ``--ratio-max-nodes`` nodes, the weight of the Numba approximation alone
against rustworkx's exact matching on the same level graph.

Data: ``$SEMHUFF_DATA`` (default ``<repo>/../shared/data``); skips cleanly when it is missing.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import List

import numpy as np

from semhuff.corpus import Corpus
from semhuff.data_paths import missing_message, shared_corpus
from semhuff.trees.matching import approximate_matching, exact_matching, matching_weight
from semhuff.trees.huffman import build_huffman
from semhuff.trees.semhuff import LevelStats, build_semhuff, sibling_similarity
from semhuff.trees.similarity import find_wordnet, load_similarity
from semhuff.vocab import Vocab

TARGET_SECONDS = 60.0


def timed(label: str, func, *args, **kwargs):
    start = time.perf_counter()
    result = func(*args, **kwargs)
    seconds = time.perf_counter() - start
    print(f"{label}: {seconds:.2f} s", flush=True)
    return result, seconds


def quick_vectors(corpus_path: str, vocab: Vocab) -> str:
    """Train (once) and cache quick gensim vectors for the bootstrapping case."""
    cache = os.path.join(tempfile.gettempdir(), "semhuff-bench-vectors.kv")
    if os.path.exists(cache):
        print(f"vectors: cached {cache}")
        return cache
    from gensim.models import Word2Vec
    model, _ = timed("train quick gensim vectors (CBOW, 100 dims, 1 epoch; not in the target)",
                     Word2Vec, sentences=Corpus(corpus_path), vector_size=100, window=5,
                     min_count=vocab.min_count, workers=2, epochs=1, sg=0, negative=5, seed=1)
    model.wv.save(cache)
    return cache


def run_source(name: str, source, vocab: Vocab, matching: str) -> tuple:
    print(f"\n== {name} ==")
    similarity, sim_seconds = timed(f"similarity ({name}, top-30)", load_similarity, source, vocab)
    levels: List[LevelStats] = []
    tree, build_seconds = timed("tree build", build_semhuff, vocab, similarity,
                                matching=matching, on_level=levels.append)
    print(f"{'level':>5} {'nodes':>7} {'leaves':>7} {'edges':>9} {'matching':>13} {'pairs':>6} "
          f"{'weight':>10} {'seconds':>8}")
    for s in levels:
        print(f"{s.depth:5d} {s.nodes:7d} {s.leaves:7d} {s.edges:9d} {s.method:>13} "
              f"{s.matched_pairs:6d} {s.matched_weight:10.3f} {s.seconds:8.3f}")
    huffman = build_huffman(vocab.counts)
    assert np.array_equal(tree.lengths, huffman.lengths)
    print(f"expected code length {tree.expected_code_length(vocab.counts):.6f} "
          f"(Huffman {huffman.expected_code_length(vocab.counts):.6f}); total sibling similarity "
          f"{sibling_similarity(tree, similarity).sum():.2f} (Huffman "
          f"{sibling_similarity(huffman, similarity).sum():.2f})")
    total = sim_seconds + build_seconds
    print(f"total {name}: {total:.2f} s (similarity {sim_seconds:.2f} + build {build_seconds:.2f})")
    return total, levels


def matching_ratios(name: str, levels: List[LevelStats], max_nodes: int) -> None:
    print(f"\n-- approximate / exact matching weight, {name} levels of <= {max_nodes} nodes "
          f"(auto: what the build used) --")
    print(f"{'level':>5} {'nodes':>7} {'edges':>9} {'approx':>10} {'s':>6} {'exact':>10} {'s':>7} "
          f"{'ratio':>8} {'auto/exact':>10}")
    for s in levels:
        if s.nodes > max_nodes or s.edges == 0:
            continue
        graph = s.graph
        start = time.perf_counter()
        approx = matching_weight(*graph, approximate_matching(*graph))
        approx_s = time.perf_counter() - start
        start = time.perf_counter()
        exact = matching_weight(*graph, exact_matching(*graph))
        exact_s = time.perf_counter() - start
        ratio = approx / exact if exact > 0 else 1.0
        used = s.matched_weight / exact if exact > 0 else 1.0
        print(f"{s.depth:5d} {s.nodes:7d} {s.edges:9d} {approx:10.4f} {approx_s:6.3f} "
              f"{exact:10.4f} {exact_s:7.3f} {ratio:8.5f} {used:10.5f}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vectors", help="word vectors for the embedding run (default: train quick ones)")
    parser.add_argument("--min-count", type=int, default=5)
    parser.add_argument("--matching", choices=("auto", "exact", "approx"), default="auto")
    parser.add_argument("--ratio-max-nodes", type=int, default=3000,
                        help="compare with the exact matching on levels up to this size (0: skip)")
    args = parser.parse_args(argv)

    corpus_path = str(shared_corpus())
    if not os.path.isfile(corpus_path):
        print(f"skipped: {missing_message(corpus_path, 'corpus')}")
        return 0
    vocab, _ = timed("vocabulary (not in the target)", Vocab.build, Corpus(corpus_path),
                     min_count=args.min_count)
    print(f"vocabulary: {len(vocab)} words")
    totals = {}
    runs = {}
    try:
        find_wordnet()
        totals["wordnet"], runs["wordnet"] = run_source("wordnet", "wordnet", vocab, args.matching)
    except Exception as exc:  # no WordNet here: report and go on with the embedding
        print(f"wordnet run skipped: {exc}")
    vectors = args.vectors or quick_vectors(corpus_path, vocab)
    totals["embedding"], runs["embedding"] = run_source("embedding", vectors, vocab, args.matching)

    total = sum(totals.values())
    verdict = "within" if total <= TARGET_SECONDS else "OVER"
    print(f"\nTOTAL (similarity + build, {' + '.join(totals)}): {total:.2f} s — {verdict} the "
          f"{TARGET_SECONDS:.0f} s target")
    if args.ratio_max_nodes > 0:
        for name, levels in runs.items():
            matching_ratios(name, levels, args.ratio_max_nodes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
