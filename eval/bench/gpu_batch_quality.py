"""The quality of the GPU's batch update, measured on the CPU (no GPU needed).

    python -m semhuff.eval.bench.gpu_batch_quality --tokens 2000000 --epochs 1 \\
        --runs cpu 1024 8192 16384 8192:undamped

Trains the CPU trainer and, for each ``BATCH[:undamped]`` run, ``--device cuda`` with the CuPy
program running on NumPy (``HostArrays``, the tests' host twin: the very batch update of both GPU
backends, about 20k words/s on one core) on a prefix of the corpus, same settings (skip-gram HS,
dim 100, window 5, min_count 5, sample 1e-3), and prints the loss per prediction, WS353 / SimLex
Spearman and Google analogy accuracy of each. Says nothing about GPU speed.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

from semhuff.eval.bench.train import add_corpus_options, parse_bench_args, quality, write_prefix


def _register_host_twin() -> None:
    from semhuff.gpu import device
    device.BACKENDS.setdefault("host", ("semhuff.gpu.cupy_kernels", "HostArrays", "-"))
    device.CudaDevice.backends = tuple(device.BACKENDS)


def run(path, args, spec: str) -> dict:
    from semhuff import Word2Vec
    if spec == "cpu":
        where = dict(device="cpu", workers=args.threads)
    else:
        batch, _, flag = spec.partition(":")
        where = dict(device="cuda", backend="host", workers=1,
                     device_options={"batch_pairs": int(batch), "damping": flag != "undamped"})
    model = Word2Vec(vector_size=args.dim, window=5, min_count=5, sample=1e-3, sg=1, loss="hs",
                     epochs=args.epochs, seed=args.seed, progress=False, **where)
    model.build_vocab(path)
    started = time.perf_counter()
    report = model.train(path)
    return {"run": spec, "seconds": round(time.perf_counter() - started, 1),
            "loss_per_pair": round(report.epochs[-1].loss_per_pair, 4),
            **{k: round(v, 4) for k, v in quality(model.wv).items()}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_options(p)
    p.add_argument("--runs", nargs="+", default=["cpu", "1024", "8192", "16384"],
                   help="'cpu', or BATCH_PAIRS[:undamped] for the GPU update on the host twin")
    p.add_argument("--threads", type=int, default=2, help="CPU trainer threads")
    p.add_argument("--seed", type=int, default=1)
    args = parse_bench_args(p, argv, "gpu_batch_quality")
    if args is None:
        return 2
    _register_host_twin()
    rows = []
    with tempfile.TemporaryDirectory(prefix="semhuff-batch-") as folder:
        path, tokens = write_prefix(args.corpus, args.tokens, folder)
        print(f"corpus: {tokens:,} tokens, {args.epochs} epoch(s), skip-gram HS dim {args.dim}",
              flush=True)
        for spec in args.runs:
            rows.append(run(path, args, spec))
            print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "tokens": tokens, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
