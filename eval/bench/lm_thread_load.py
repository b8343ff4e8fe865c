"""The LM layers' forward + backward at one and at two threads while other processes hold the
cores: the slowdown factor, two threads under load over one thread, of the sparse
tree softmax against the adaptive softmax's.

    python -m semhuff.eval.bench.lm_thread_load [--load 2] [--repeats 7] [--vocab-size 50000]
        [--hidden 512] [--tokens 2560]

``--load N`` starts N processes that spin on a core each for the run (0: the machine's own
load only). Zipf counts, Huffman tree, weights N(0, 0.05); one and two threads alternated
within each round, medians.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
import time

import numpy as np


def _spin() -> None:  # pragma: no cover - a load, killed at the end
    while True:
        pass


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--load", type=int, default=2, help="spinning processes started (default 2)")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--vocab-size", type=int, default=50_000)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--tokens", type=int, default=2560)
    args = p.parse_args(argv)
    import torch
    from semhuff.lm import make_output_layer
    from semhuff.vocab import Vocab
    V, D = args.vocab_size, args.hidden
    counts = np.maximum((1e9 / np.arange(1, V + 1)).astype(np.int64), 1)
    vocab = Vocab([f"w{i}" for i in range(V)], counts, int(counts.sum()))
    rng = np.random.default_rng(1)
    target = torch.as_tensor(rng.choice(V, size=args.tokens, p=counts / counts.sum()))
    h = torch.randn(args.tokens, D, requires_grad=True)
    layers = {"adaptive softmax": make_output_layer("adaptive", D, vocab),
              "tree (Huffman), sparse grad": make_output_layer("tree", D, vocab, sparse=True)}
    for layer in layers.values():
        with torch.no_grad():
            for param in layer.parameters():
                param.normal_(0, 0.05)

    def step(layer):
        started = time.perf_counter()
        layer(h, target).loss.backward()
        seconds = time.perf_counter() - started
        layer.zero_grad(set_to_none=True)
        h.grad = None
        return seconds

    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load)]
    for s in spinners:
        s.start()
    times = {}
    try:
        for _ in range(args.repeats):
            for threads in (1, 2):
                torch.set_num_threads(threads)
                for label, layer in layers.items():
                    step(layer)
                    times.setdefault((label, threads), []).append(step(layer))
    finally:
        for s in spinners:
            s.terminate()
    print(f"V {V:,}, hidden {D}, {args.tokens:,} tokens, {args.load} spinning processes, "
          f"load average {os.getloadavg()[0]:.2f}, torch {torch.__version__}")
    for label in layers:
        one, two = (statistics.median(times[(label, t)]) for t in (1, 2))
        print(f"{label:30s} 1 thread {1e3 * one:8.1f} ms   2 threads {1e3 * two:8.1f} ms   "
              f"slowdown x{two / one:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
