"""Dask training against one process: speed, quality at equal epochs, round overhead.

    python -m semhuff.eval.bench.dask_rounds --corpus /tmp/semhuff-scale/corpus-x1.txt --epochs 3 \\
        --workers 1 2 --round-words 1000000 250000 4000000 --combine adaptive weighted mean sum

Trains plain semhuff (``--threads`` threads) and semhuff on a ``LocalCluster`` of 1 and 2 worker
processes on this machine (the cores shared out: 1 x 2 threads, 2 x 1 thread), every run with
the same settings (skip-gram, HS, dim 100, window 5, min_count 5, sample 1e-3, seed 1) and the
same number of epochs, and reports raw words/s of training, the wall time including the
vocabulary (map-reduce on the cluster for Dask), WS353 / SimLex-999 Spearman and Google analogy
accuracy (top 30k words, gensim's evaluators), the number of rounds and the time a round spends
outside training (sending and receiving the weights, waiting, combining). The first
``--round-words`` / ``--combine`` are used for the worker-count comparison; the others are
swept with the largest worker count. The corpus must be plain text (a gzip file cannot be
split between workers).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from semhuff import Word2Vec
from semhuff.eval.bench.scale import emit
from semhuff.eval.bench.train import quality

SETTINGS = dict(vector_size=100, window=5, min_count=5, sample=1e-3, sg=1, loss="hs", seed=1,
                progress=False)


def row(name, model, wall, extra=None) -> dict:
    report = model.reports[-1]
    out = {"run": name, "epochs": len(report.epochs), "train_seconds": report.seconds,
           "wall_seconds": wall, "words_per_second": report.words_per_second,
           **quality(model.wv), **(extra or {})}
    d = getattr(report, "dask", None)
    if d is not None:
        out.update(rounds=len(d.rounds), overhead_seconds=d.overhead_seconds,
                   overhead_per_round=d.overhead_seconds / max(1, len(d.rounds)),
                   combine_per_round=sum(r.combine_seconds for r in d.rounds) / max(1, len(d.rounds)))
    print(json.dumps(out), flush=True)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--corpus", required=True, help="plain text corpus")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--threads", type=int, default=2, help="threads of the plain run, cores shared out")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--round-words", type=int, nargs="+", default=[1_000_000])
    p.add_argument("--combine", nargs="+", default=["adaptive"])
    p.add_argument("--skip-plain", action="store_true")
    p.add_argument("--json")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    from distributed import Client, LocalCluster
    from semhuff.distributed import DaskTraining
    rows = []
    if not args.skip_plain:
        started = time.perf_counter()
        model = Word2Vec(args.corpus, workers=args.threads, epochs=args.epochs, **SETTINGS)
        rows.append(row(f"plain, {args.threads} threads", model, time.perf_counter() - started))
    for n in args.workers:
        threads = max(1, args.threads // n)
        started = time.perf_counter()
        cluster = LocalCluster(n_workers=n, threads_per_worker=threads, processes=True,
                               dashboard_address=":0", silence_logs=logging.ERROR)
        client = Client(cluster)
        up = time.perf_counter() - started
        sweep = [(args.round_words[0], args.combine[0])]
        if n == max(args.workers):
            sweep += [(r, args.combine[0]) for r in args.round_words[1:]]
            sweep += [(args.round_words[0], c) for c in args.combine[1:]]
        for round_words, rule in sweep:
            started = time.perf_counter()
            model = Word2Vec(args.corpus, epochs=args.epochs, dask=DaskTraining(
                client, round_words=round_words, combine=rule), **SETTINGS)
            rows.append(row(f"dask {n}x{threads}, rounds of {round_words:,}, {rule}", model,
                            time.perf_counter() - started, {"cluster_start_seconds": up}))
        client.close()
        cluster.close()
    emit(rows, ["run", "words/s (training)", "wall s", "WS353", "SimLex", "analogy", "rounds",
                "outside training / round"],
         lambda r: [r["run"], f"{r['words_per_second']:,.0f}", f"{r['wall_seconds']:.0f}",
                    f"{r['ws353']:.3f}", f"{r['simlex']:.3f}", f"{100 * r['analogy']:.1f}",
                    str(r.get("rounds", "")),
                    f"{r['overhead_per_round']:.2f} s" if "rounds" in r else ""], args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
