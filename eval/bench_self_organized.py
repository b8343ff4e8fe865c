"""Speed of the self-organized binary tree against Huffman HS, alternated A/B in fresh processes.

    python -m semhuff.eval.bench_self_organized --corpus PREFIX.txt [--repeats 3] [--epochs 3]

Each run trains skip-gram (dim 100, the defaults) with ``tree="huffman"`` or
``tree="self-organized"`` in its own process, in the order H, S, H, S, ...; prints training
words/s (min/median/max), the ratio of the medians (issue target: >= 0.70) and the hooks'
share of the training time (the re-assignments; the sampled statistic runs in the kernel and
shows in words/s).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r'''
import json, sys
from semhuff import Word2Vec
model = Word2Vec(vector_size=100, epochs=int(sys.argv[3]), workers=int(sys.argv[4]),
                 progress=False, seed=1, tree=sys.argv[1])
model.build_vocab(sys.argv[2])
report = model.train(sys.argv[2])
print(json.dumps({"words_per_second": report.words_per_second, "seconds": report.seconds,
                  "hook_seconds": report.hook_seconds}))
'''
TREES = ("huffman", "self-organized")


def spread(values) -> str:
    return f"{min(values):,.0f} / {statistics.median(values):,.0f} / {max(values):,.0f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--corpus", required=True, help="plain text (e.g. a 3M-token prefix)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    runs = {tree: [] for tree in TREES}
    for _ in range(args.repeats):
        for tree in TREES:
            done = subprocess.run([sys.executable, "-c", CHILD, tree, args.corpus, str(args.epochs),
                                   str(args.workers)], capture_output=True, text=True)
            if done.returncode != 0:
                tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
                print(f"bench_self_organized: the {tree} run failed: {tail}", file=sys.stderr)
                return 1
            runs[tree].append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(tree, runs[tree][-1], flush=True)
    speed = {tree: [r["words_per_second"] for r in runs[tree]] for tree in TREES}
    share = [r["hook_seconds"] / r["seconds"] for r in runs["self-organized"]]
    for tree in TREES:
        print(f"{tree:15s} words/s min / median / max: {spread(speed[tree])}")
    ratio = statistics.median(speed["self-organized"]) / statistics.median(speed["huffman"])
    print(f"self-organized / Huffman (medians): {ratio:.3f} (target >= 0.70)")
    print(f"hooks' share of training: {min(share):.3f} / {statistics.median(share):.3f} / "
          f"{max(share):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
