"""Speed and quality of semhuff against gensim, same corpus, same settings, same machine, one command.

    python -m semhuff.eval.bench.train [--tokens N] [--epochs E] [--threads 1 2] [--loss hs ns]
                                       [--mode both|train|whole] [--repeats N] [--json FILE]

For every (loss, threads) cell it trains gensim ``Word2Vec`` and semhuff with identical settings
(skip-gram, dim 100, window 5, min_count 5, sample 1e-3, alpha 0.025 -> 0.0001, 3 epochs by
default). Both read the same uncompressed text file (a prefix of the corpus when --tokens is
given); gensim through ``LineSentence`` with max_sentence_length 10000, so neither drops a token.
Quality everywhere: WS353 and SimLex Spearman, Google analogy accuracy (top 30k words, gensim's
evaluator for both).

``--mode train`` (in-process): both train in this process, once per ``--seeds`` seed; it prints
raw words/s (epochs x corpus tokens / wall time of ``train()``), the training wall time, quality
and the ratios.

``--mode whole`` (whole process): every run is a fresh process, from its start to the written
word2vec ``.bin`` file: gensim in ``python -c`` (it imports gensim only), semhuff as the real
``semhuff-train`` command. The two alternate (gensim, semhuff, gensim, semhuff, ...), ``--repeats``
times each (at least 3; run i uses seed i), after one untimed warm-up run of each per loss and
thread count: semhuff's with the timed runs' corpus and settings (the kernel a run compiles
depends on them: private hot rows with two or more workers, for a large enough vocabulary and
training call), gensim's on a tiny file. It prints the min / median / max of the
wall seconds and of the CPU seconds (user + sys of the child), the ratio gensim / semhuff of the
medians, quality (mean and half-range over the runs, from the written files) and the start-up of
``python -c "import semhuff"`` (and of gensim; medians of 3).

``--mode both`` (the default) runs the in-process section first, then the whole-process one.
A child that fails or runs past ``--timeout`` stops the benchmark with a one-line message.
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from semhuff.data_paths import missing_message, shared_corpus

SYSTEMS = ("gensim", "semhuff")
# what both systems are given, in every mode (the names are also semhuff-train's flags)
SETTINGS = dict(window=5, min_count=5, sample=1e-3, alpha=0.025, min_alpha=0.0001)
MIN_REPEATS = 3  # whole-process runs per system and cell: the median needs three (tests lower it)
# the gensim child: trains and writes the vectors; it imports gensim and nothing of semhuff
GENSIM_CHILD = """\
import json, sys
from gensim.models import Word2Vec
from gensim.models.word2vec import LineSentence
path, out, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
model = Word2Vec(LineSentence(path, max_sentence_length=10_000), **params)
model.wv.save_word2vec_format(out, binary=True)
"""


def write_prefix(corpus: str, n_tokens: int, folder: str) -> tuple:
    """The first ``n_tokens`` tokens (all if 0) as one text8-style line; returns (path, tokens)."""
    from semhuff.corpus import Corpus
    path = os.path.join(folder, "bench_corpus.txt")
    written = 0
    with open(path, "w", encoding="utf-8") as fh:
        for piece in Corpus(corpus):
            if n_tokens and written + len(piece) > n_tokens:
                piece = piece[: n_tokens - written]
            fh.write(" ".join(piece))
            fh.write(" ")
            written += len(piece)
            if n_tokens and written >= n_tokens:
                break
    return path, written


def add_corpus_options(p: argparse.ArgumentParser) -> None:
    """What every training benchmark takes: the corpus and its prefix, epochs, dim, negative."""
    p.add_argument("--corpus", default=str(shared_corpus()))
    p.add_argument("--tokens", type=int, default=0, help="use only this many leading tokens (0 = all)")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--negative", type=int, default=5)


def parse_bench_args(p: argparse.ArgumentParser, argv, prog: str):
    """Add ``--json``, parse; None (after one line on stderr) when the corpus is missing."""
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    if not os.path.exists(args.corpus):
        print(f"{prog}: {missing_message(args.corpus, 'corpus')} or pass --corpus", file=sys.stderr)
        return None
    logging.basicConfig(level=logging.WARNING)
    return args


def quality(kv) -> dict:
    from gensim.test.utils import datapath
    ws = kv.evaluate_word_pairs(datapath("wordsim353.tsv"))[1].statistic
    sl = kv.evaluate_word_pairs(datapath("simlex999.txt"))[1].statistic
    analogy, _ = kv.evaluate_word_analogies(datapath("questions-words.txt"), restrict_vocab=30000)
    return {"ws353": float(ws), "simlex": float(sl), "analogy": float(analogy)}


def gensim_params(loss, threads, seed, args) -> dict:
    """gensim ``Word2Vec``'s arguments for one cell (``epochs`` is passed where it trains)."""
    return dict(vector_size=args.dim, sg=1, hs=int(loss == "hs"),
                negative=0 if loss == "hs" else args.negative, workers=threads, seed=seed, **SETTINGS)


def run_gensim(path, tokens, loss, threads, seed, args) -> dict:
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence
    sentences = LineSentence(path, max_sentence_length=10_000)
    model = Word2Vec(**gensim_params(loss, threads, seed, args))
    t0 = time.perf_counter()
    model.build_vocab(sentences)
    t1 = time.perf_counter()
    model.train(sentences, total_examples=model.corpus_count, epochs=args.epochs)
    t2 = time.perf_counter()
    return {"vocab_s": t1 - t0, "train_s": t2 - t1, "words_per_s": args.epochs * tokens / (t2 - t1),
            "vocab": len(model.wv), **quality(model.wv)}


def layer_settings(loss: str, args) -> dict:
    """semhuff's output-layer settings of a cell: each layer takes only its own."""
    if loss == "hs":
        return {"hs_order": getattr(args, "hs_order", "mixed")}
    return {"negative": args.negative}


def run_semhuff(path, tokens, loss, threads, seed, args) -> dict:
    from semhuff import Word2Vec
    model = Word2Vec(vector_size=args.dim, sg=1, loss=loss, **layer_settings(loss, args),
                     epochs=args.epochs, workers=threads, seed=seed, progress=False, **SETTINGS)
    t0 = time.perf_counter()
    model.build_vocab(path)
    t1 = time.perf_counter()
    report = model.train(path)
    t2 = time.perf_counter()
    return {"vocab_s": t1 - t0, "train_s": t2 - t1, "words_per_s": args.epochs * tokens / (t2 - t1),
            "vocab": len(model.vocab), "loss_per_pair": report.epochs[-1].loss_per_pair,
            **quality(model.wv)}


def summarise(runs: list) -> dict:
    """Mean over seeds of every number, plus the spread (max - min) of the quality scores."""
    out = {key: float(np.mean([r[key] for r in runs])) for key in runs[0]}
    for key in ("ws353", "simlex", "analogy"):
        out[key + "_spread"] = float(np.ptp([r[key] for r in runs]))
    out["runs"] = runs
    return out


def min_median_max(values) -> dict:
    return {"min": float(np.min(values)), "median": float(np.median(values)), "max": float(np.max(values))}


def timed_child(cmd: list, what: str, timeout: float) -> tuple:
    """Run one child process to its end: (wall s, CPU s = its user + sys); a failure stops the run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"bench_train: {what} ran past --timeout {timeout:g} s") from None
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise SystemExit(f"bench_train: {what} failed (exit {done.returncode}): {last}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def semhuff_train_command() -> str:
    """The ``semhuff-train`` console script beside this Python (its venv), else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "semhuff-train")
    found = beside if os.path.exists(beside) else shutil.which("semhuff-train")
    if found is None:
        raise SystemExit("bench_train: semhuff-train not found: install semhuff (pip install -e .)")
    return found


def child_command(name, path, out, loss, threads, seed, args) -> list:
    """The whole-process command line of one system: train on ``path``, write ``out`` (.bin)."""
    if name == "gensim":
        params = dict(gensim_params(loss, threads, seed, args), epochs=args.epochs)
        return [sys.executable, "-c", GENSIM_CHILD, path, out, json.dumps(params)]
    flags = [f"--{key.replace('_', '-')}={value}" for key, value in SETTINGS.items()]
    layer = [f"--{k.replace('_', '-')}={v}" for k, v in layer_settings(loss, args).items()]
    return [args.semhuff_command or semhuff_train_command(), path, "-o", out,
            f"--epochs={args.epochs}", f"--workers={threads}", f"--loss={loss}", *layer,
            f"--dim={args.dim}", f"--seed={seed}", *flags, "-q", "--no-progress"]


def startup_seconds(module: str, args) -> float:
    """Median wall time of ``python -c "import MODULE"`` over three fresh processes."""
    cmd = [sys.executable, "-c", f"import {module}"]
    return float(np.median([timed_child(cmd, f"import {module}", args.timeout)[0] for _ in range(3)]))


def bench_whole(path, args, folder) -> dict:
    """The whole-process section: start-up, a warm-up per loss, then every cell A/B/A/B."""
    from gensim.models import KeyedVectors
    startup = {name: startup_seconds(name, args) for name in SYSTEMS}
    print(f"\nwhole process: start-up (median of 3) python -c 'import semhuff' {startup['semhuff']:.2f} s, "
          f"'import gensim' {startup['gensim']:.2f} s", flush=True)
    warm = os.path.join(folder, "warmup.txt")
    with open(warm, "w") as fh:
        fh.write(" ".join(f"w{i % 50}" for i in range(5000)))
    keep = args.keep_vectors
    if keep:
        os.makedirs(keep, exist_ok=True)
    # untimed: compiles (or loads) semhuff's kernels, warms the file cache; per thread count too,
    # since two or more workers use other kernels (private hot rows). semhuff's on the corpus
    # itself: on a tiny file no rows are private, so the first timed run compiled the kernel
    # that has them (a 15.6 s maximum among ~5 s runs)
    for loss in args.loss:
        for threads in args.threads:
            for name in SYSTEMS:
                out = os.path.join(folder, "warmup.bin")
                corpus = path if name == "semhuff" else warm
                timed_child(child_command(name, corpus, out, loss, threads, 1, args),
                            f"{name} warm-up", args.timeout)
    rows = []
    for loss in args.loss:
        for threads in args.threads:
            runs = {name: [] for name in SYSTEMS}
            for rep in range(1, args.repeats + 1):
                for name in SYSTEMS:  # alternated: gensim, semhuff, gensim, semhuff, ...
                    out = os.path.join(keep or folder, f"{name}-{loss}-t{threads}-r{rep}.bin")
                    what = f"{name} ({loss}, {threads} threads, run {rep})"
                    cmd = child_command(name, path, out, loss, threads, rep, args)
                    wall, cpu = timed_child(cmd, what, args.timeout)
                    kv = KeyedVectors.load_word2vec_format(out, binary=True)
                    runs[name].append({"wall_s": wall, "cpu_s": cpu, "vocab": len(kv), **quality(kv)})
                    if not keep:
                        os.remove(out)
            cell = {"loss": loss, "threads": threads}
            for name in SYSTEMS:
                cell[name] = dict(summarise(runs[name]), **{key: min_median_max([r[key] for r in runs[name]])
                                                            for key in ("wall_s", "cpu_s")})
            cell["ratio"] = {key: cell["gensim"][key]["median"] / cell["semhuff"][key]["median"]
                             for key in ("wall_s", "cpu_s")}
            rows.append(cell)
            print(f"  {loss} x{threads}: median wall gensim {cell['gensim']['wall_s']['median']:.1f} s, semhuff "
                  f"{cell['semhuff']['wall_s']['median']:.1f} s ({cell['ratio']['wall_s']:.2f}x)", flush=True)
    print_whole_table(rows, args.repeats)
    return {"startup_s": startup, "repeats": args.repeats, "rows": rows}


def bench_in_process(path, tokens, args) -> list:
    """The in-process section: both train in this process, once per seed."""
    from semhuff import Word2Vec
    for loss in args.loss:  # compile (or load) the kernels outside the timed runs
        Word2Vec([["warm", "up"]] * 8, min_count=1, vector_size=args.dim, loss=loss,
                 epochs=1, workers=1, progress=False)
    rows = []
    for loss in args.loss:
        for threads in args.threads:
            cell = {"loss": loss, "threads": threads}
            for name, runner in zip(SYSTEMS, (run_gensim, run_semhuff)):
                runs = []
                for seed in args.seeds:
                    gc.collect()
                    runs.append(runner(path, tokens, loss, threads, seed, args))
                cell[name] = summarise(runs)
            rows.append(cell)
            print_cell(cell, flush=True)
    print_table(rows)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_options(p)
    p.set_defaults(epochs=3)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--loss", nargs="+", default=["hs", "ns"], choices=["hs", "ns"])
    p.add_argument("--hs-order", default="mixed", choices=["mixed", "word2vec", "batched"],
                   help="semhuff's skip-gram + HS order (see docs/performance.md)")
    p.add_argument("--mode", default="both", choices=["both", "train", "whole"],
                   help="train: in-process training rate; whole: fresh processes, start to written "
                        "vectors; both (default): one, then the other")
    p.add_argument("--seeds", type=int, nargs="+", default=[1],
                   help="--mode train: train every cell once per seed; quality is reported as mean and spread")
    p.add_argument("--repeats", type=int, default=3,
                   help=f"--mode whole: runs per system and cell, alternated (at least {MIN_REPEATS}; default 3)")
    p.add_argument("--semhuff-command", metavar="PATH",
                   help="--mode whole: run this semhuff-train instead of the installed one (an "
                        "earlier version's, to measure a change in the same run)")
    p.add_argument("--timeout", type=float, default=3600,
                   help="--mode whole: seconds a child may run before the benchmark stops (default 3600)")
    p.add_argument("--keep-vectors", metavar="DIR",
                   help="--mode whole: keep every run's .bin here (default: deleted once scored)")
    args = parse_bench_args(p, argv, "bench_train")
    if args is None:
        return 2
    if args.mode != "train" and args.repeats < MIN_REPEATS:
        p.error(f"--repeats must be at least {MIN_REPEATS} (the median of the runs)")
    result = {"args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="semhuff-bench-") as folder:
        path, tokens = write_prefix(args.corpus, args.tokens, folder)
        result["tokens"] = tokens
        print(f"corpus: {args.corpus}, {tokens:,} tokens; skip-gram dim {args.dim} window 5 "
              f"min_count 5 sample 1e-3, {args.epochs} epochs, semhuff HS order {args.hs_order}; "
              f"cpu count {os.cpu_count()}")
        if args.mode != "whole":
            print(f"in process: seeds {args.seeds}")
            result["rows"] = bench_in_process(path, tokens, args)
        if args.mode != "train":
            result["whole"] = bench_whole(path, args, folder)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


def print_cell(cell, flush=False):
    g, s = cell["gensim"], cell["semhuff"]
    print(f"  {cell['loss']} x{cell['threads']}: gensim {g['words_per_s']:,.0f} w/s, semhuff "
          f"{s['words_per_s']:,.0f} w/s ({s['words_per_s'] / g['words_per_s']:.2f}x)", flush=flush)


def quality_columns(r) -> str:
    """Mean WS353, SimLex, analogy and their half-ranges."""
    return (f"{r['ws353']:>6.3f} {r['simlex']:>6.3f} {r['analogy']:>7.3f} | ±{r['ws353_spread'] / 2:.3f} "
            f"±{r['simlex_spread'] / 2:.3f} ±{r['analogy_spread'] / 2:.3f}")


def quality_diff(g, s) -> str:
    """semhuff - gensim of the three scores."""
    return f"{s['ws353'] - g['ws353']:>+6.3f} {s['simlex'] - g['simlex']:>+6.3f} {s['analogy'] - g['analogy']:>+7.3f}"


def print_table(rows):
    head = (f"{'loss':4} {'thr':>3} | {'impl':7} | {'words/s':>10} {'train s':>8} | {'WS353':>6} "
            f"{'SimLex':>6} {'analogy':>7} | half-range over seeds")
    print("\n" + head + "\n" + "-" * len(head))
    for cell in rows:
        for name in SYSTEMS:
            r = cell[name]
            print(f"{cell['loss']:4} {cell['threads']:>3} | {name:7} | {r['words_per_s']:>10,.0f} "
                  f"{r['train_s']:>8.1f} | {quality_columns(r)}")
        g, s = cell["gensim"], cell["semhuff"]
        print(f"{cell['loss']:4} {cell['threads']:>3} | {'ratio':7} | {s['words_per_s'] / g['words_per_s']:>9.2f}x "
              f"{s['train_s'] / g['train_s']:>7.2f}x | {quality_diff(g, s)}")


def print_whole_table(rows, repeats):
    def span(stats):
        return f"{stats['min']:>7.2f} {stats['median']:>7.2f} {stats['max']:>7.2f}"
    head = (f"{'loss':4} {'thr':>3} | {'impl':7} | {'wall s: min':>11} {'median':>7} {'max':>7} | "
            f"{'CPU s: min':>10} {'median':>7} {'max':>7} | {'WS353':>6} {'SimLex':>6} {'analogy':>7} | "
            f"half-range over runs")
    print(f"\nwhole process, {repeats} runs per system, alternated; ratio = gensim / semhuff of the medians, "
          f"quality diff = semhuff - gensim\n{head}\n" + "-" * len(head))
    for cell in rows:
        for name in SYSTEMS:
            r = cell[name]
            print(f"{cell['loss']:4} {cell['threads']:>3} | {name:7} | {span(r['wall_s']):>27} | "
                  f"{span(r['cpu_s']):>26} | {quality_columns(r)}")
        ratio = cell["ratio"]
        print(f"{cell['loss']:4} {cell['threads']:>3} | {'ratio':7} | {ratio['wall_s']:>18.2f}x {'':7} | "
              f"{ratio['cpu_s']:>17.2f}x {'':7} | {quality_diff(cell['gensim'], cell['semhuff'])}")


if __name__ == "__main__":
    sys.exit(main())
