"""Where does the second thread's time go? Kernel-only thread scaling of skip-gram training.

    python -m semhuff.eval.bench.threads [--corpus FILE] [--tokens N] [--loss hs ns]
                                         [--repeats 3] [--hs-order mixed]

The corpus prefix is tokenised once, in this process, into the chunks the trainer uses (100,000
words); then one epoch of those chunks is trained, without the reader, the queue or anything
else of the trainer, in four ways, alternated ``--repeats`` times:

* ``1 thread``: every chunk in one thread (the reference work);
* ``2 threads, shared``: two threads take the chunks in turn and write the same weights
  (plain Hogwild, what ``semhuff-train --workers 2`` did before ``HotRows``);
* ``2 threads, private hot rows``: as ``shared``, but each thread keeps private copies of the
  ``--hot-rows`` most written output rows (default: the layer's count for one epoch of the
  prefix) and of the ``--hot-inputs`` most written input vectors, and merges its change into them
  after each chunk (``devices.HotRows``, what ``semhuff-train --workers 2`` does now);
* ``2 threads, private``: each thread trains its half of the chunks on its own copy of all the
  weights (no row is shared; the same work, so the difference to ``shared`` is what sharing rows
  between the cores costs);
* ``2 threads, private output``: the input vectors shared, the output layer's rows private
  (separates the cost of sharing the tree's rows, the top above all, from that of the words').

Printed per way: wall and process CPU seconds (min / median / max), raw words/s, and CPU seconds
per million words. Each run starts from the same initial weights. Every run is in-process and
after a warm-up, so compile time and start-up are excluded (``bench_train --mode whole`` has them).

``--quality``: instead, the quality the private hot rows cost. Whole ``train()`` runs with two
workers (``--epochs``, default 5, on ``--tokens``, default the whole corpus), once per seed,
for (``--merge``): plain Hogwild (no private rows), private hot rows (``--hot-rows``, default
the layer's) merged whole (share 1) and averaged (share 1/2); WS353 and SimLex-999 Spearman and
Google analogy accuracy (top 30k words), each
as the mean and half-range over the seeds, with words/s.
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import threading
import time

from semhuff import Word2Vec
from semhuff.corpus import Corpus
from semhuff.devices import CpuSession, Plan
from semhuff.encode import EpochSource
from semhuff.kernels.common import mix_seed
from semhuff.schedule import Schedule

from .train import (SETTINGS, add_corpus_options, layer_settings, parse_bench_args, quality,
                          write_prefix)

WAYS = ("1 thread", "2 threads, shared", "2 threads, private hot rows", "2 threads, private",
        "2 threads, private output")


def _train(sessions, plan, chunks):
    """Chunk i goes to session i % len(sessions), each session in its own thread."""
    def work(t):
        s = sessions[t]
        before = 0
        for i, chunk in enumerate(chunks):
            if i % len(sessions) == t:
                s.train_chunk(plan, chunk, before, int(mix_seed(1, 0, i)))
            before += len(chunk.ids)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(sessions))]
    wall, cpu = time.perf_counter(), time.process_time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - wall, time.process_time() - cpu


def _sessions(way, syn0, layer, plan, hot_rows, share, hot_inputs=None):
    """The session each of the threads uses (the same object for threads that share rows)."""
    def fresh(workers, hot=0):
        session = CpuSession(syn0.copy(), copy.deepcopy(layer), workers)
        session.HOT_ROWS, session.HOT_SHARE = hot, share
        if hot_inputs is not None:
            session.HOT_INPUTS = hot_inputs
        session.warm_up(plan)
        return session

    if way == WAYS[0]:
        return [fresh(1)]
    if way in WAYS[1:3]:
        s = fresh(2, hot_rows if way == WAYS[2] else 0)
        return [s, s]
    if way == WAYS[3]:
        return [fresh(1), fresh(1)]
    a = fresh(1)
    return [a, CpuSession(a.syn0, copy.deepcopy(a.layer), 1)]


def run(path, loss, hs_order, repeats, hot_rows, share, hot_inputs=None):
    model = Word2Vec(vector_size=100, window=5, min_count=5, sample=1e-3, sg=1, loss=loss,
                     **({"hs_order": hs_order} if loss == "hs" else {}), seed=1, workers=2,
                     progress=False)
    model.build_vocab(Corpus(path))
    chunks = list(EpochSource(Corpus(path), model.vocab.index, use_cache=False).epoch())
    raw = sum(c.raw_tokens for c in chunks)
    total = sum(len(c.ids) for c in chunks)
    plan = Plan(sg=True, keep_thr=model.vocab.keep_thresholds(1e-3), window=5, reduce_window=True,
                schedule=Schedule(0.025, 0.0001, total), counts=model.vocab.counts)
    CpuSession(model.syn0, model.layer, 1).warm_up(plan)
    times = {way: [] for way in WAYS}
    for _ in range(repeats):
        for way in WAYS:
            sessions = _sessions(way, model.syn0, model.layer, plan, hot_rows, share, hot_inputs)
            times[way].append(_train(sessions, plan, chunks))
    print(f"\n{loss}: {raw:,} raw words, {len(chunks)} chunks, one epoch per run, {repeats} runs "
          f"per way, alternated")
    print(f"{'way':28s} | wall s: min  median   max | CPU s: min  median   max | raw words/s "
          f"| CPU s per M words")
    base = None
    for way in WAYS:
        wall = sorted(w for w, _ in times[way])
        cpu = sorted(c for _, c in times[way])
        mw, mc = statistics.median(wall), statistics.median(cpu)
        base = base or mw
        print(f"{way:28s} | {wall[0]:9.2f} {mw:7.2f} {wall[-1]:5.2f} | {cpu[0]:9.2f} {mc:7.2f} "
              f"{cpu[-1]:5.2f} | {raw / mw:11,.0f} | {mc / raw * 1e6:6.3f}  ({base / mw:.2f}x one "
              f"thread)")


QUALITY_WAYS = {"none": ("Hogwild, no private rows", 0, 1.0),
                "sum": ("private hot rows, share 1", None, 1.0),
                "average": ("private hot rows, share 1/2", None, 0.5)}


def run_quality(path, tokens, loss, args):
    print(f"\n{loss}: quality with 2 workers, {args.epochs} epochs on {tokens:,} tokens, seeds "
          f"{args.seeds}")
    print(f"{'way':30s} | words/s   |  WS353 (±)       SimLex (±)      analogy (±)")
    default = (CpuSession.HOT_ROWS, CpuSession.HOT_SHARE)
    try:
        for way in args.merge:
            name, rows, share = QUALITY_WAYS[way]
            if rows is None and args.hot_rows is not None:
                name, rows = f"{name} ({args.hot_rows} rows)", args.hot_rows
            CpuSession.HOT_ROWS, CpuSession.HOT_SHARE = rows, share
            runs = []
            for seed in args.seeds:
                model = Word2Vec(vector_size=args.dim, sg=1, loss=loss,
                                 **layer_settings(loss, args), epochs=args.epochs, workers=2,
                                 seed=seed,
                                 progress=False, **SETTINGS)
                model.build_vocab(path)
                report = model.train(path)
                runs.append({"wps": report.words_per_second, **quality(model.wv)})
            cells = []
            for key in ("ws353", "simlex", "analogy"):
                v = [r[key] for r in runs]
                cells.append(f"{statistics.mean(v):.3f} (±{(max(v) - min(v)) / 2:.3f})")
            wps = statistics.median(r["wps"] for r in runs)
            print(f"{name:30s} | {wps:9,.0f} | " + "  ".join(cells), flush=True)
    finally:
        CpuSession.HOT_ROWS, CpuSession.HOT_SHARE = default


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_options(p)
    p.set_defaults(tokens=None)
    p.add_argument("--loss", nargs="+", choices=("hs", "ns"), default=["hs", "ns"])
    p.add_argument("--hs-order", default="mixed", choices=("mixed", "word2vec", "batched"))
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--hot-rows", type=int, default=None,
                   help="rows each thread keeps private in the 'private hot rows' way (default: "
                        "the layer's HOT_ROWS)")
    p.add_argument("--hot-inputs", type=int, default=None,
                   help="input vectors each thread keeps private in the 'private hot rows' way "
                        "(default: CpuSession.HOT_INPUTS)")
    p.add_argument("--share", type=float, default=None,
                   help="factor of a thread's change to its hot rows when merged (default: the "
                        "layer's HOT_MERGE)")
    p.add_argument("--quality", action="store_true",
                   help="measure the quality of the merge rules instead of the speed")
    p.add_argument("--merge", nargs="+", choices=tuple(QUALITY_WAYS), default=list(QUALITY_WAYS),
                   help="with --quality: the merge rules to measure (none = plain Hogwild)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    args = parse_bench_args(p, argv, "bench_threads")
    if args is None:
        return 2
    if args.tokens is None:  # speed: a 3M-token prefix; quality: the whole corpus
        args.tokens = 0 if args.quality else 3_000_000
    with tempfile.TemporaryDirectory(prefix="semhuff-bench-") as folder:
        path, tokens = write_prefix(args.corpus, args.tokens, folder)
        for loss in args.loss:
            if args.quality:
                run_quality(path, tokens, loss, args)
            else:
                run(path, loss, args.hs_order, max(1, args.repeats), args.hot_rows, args.share,
                    args.hot_inputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
