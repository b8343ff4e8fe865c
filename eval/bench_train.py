"""Speed and quality of semhuff against gensim, same corpus, same settings, same machine, one run.

    python -m semhuff.eval.bench_train [--tokens N] [--epochs E] [--threads 1 2] [--loss hs ns]

For every (loss, threads) cell it trains gensim ``Word2Vec`` and semhuff with identical settings
(skip-gram, dim 100, window 5, min_count 5, sample 1e-3, alpha 0.025 -> 0.0001) and prints raw
words/s (epochs x corpus tokens / training wall time), the training wall time, WS353 and SimLex
Spearman, Google analogy accuracy (top 30k words, gensim's evaluator for both) and the ratios.
Both read the same uncompressed text file (a prefix of the corpus when --tokens is given);
gensim through ``LineSentence`` with max_sentence_length 10000, so neither drops a token.
"""
from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
import tempfile
import time

import numpy as np

from semhuff.data import missing_message, shared_corpus




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


def run_gensim(path, tokens, loss, threads, seed, args) -> dict:
    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence
    sentences = LineSentence(path, max_sentence_length=10_000)
    model = Word2Vec(vector_size=args.dim, window=5, min_count=5, sample=1e-3, sg=1,
                     hs=int(loss == "hs"), negative=0 if loss == "hs" else args.negative,
                     alpha=0.025, min_alpha=0.0001, workers=threads, seed=seed)
    t0 = time.perf_counter()
    model.build_vocab(sentences)
    t1 = time.perf_counter()
    model.train(sentences, total_examples=model.corpus_count, epochs=args.epochs)
    t2 = time.perf_counter()
    return {"vocab_s": t1 - t0, "train_s": t2 - t1, "words_per_s": args.epochs * tokens / (t2 - t1),
            "vocab": len(model.wv), **quality(model.wv)}


def run_semhuff(path, tokens, loss, threads, seed, args) -> dict:
    from semhuff import Word2Vec
    model = Word2Vec(vector_size=args.dim, window=5, min_count=5, sample=1e-3, sg=1, loss=loss,
                     negative=args.negative, hs_order=args.hs_order, alpha=0.025, min_alpha=0.0001, epochs=args.epochs,
                     workers=threads, seed=seed, progress=False)
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_options(p)
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--loss", nargs="+", default=["hs", "ns"], choices=["hs", "ns"])
    p.add_argument("--hs-order", default="mixed", choices=["mixed", "word2vec", "batched"],
                   help="semhuff's skip-gram + HS order (see docs/performance.md)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1],
                   help="train every cell once per seed; quality is reported as mean and spread")
    args = parse_bench_args(p, argv, "bench_train")
    if args is None:
        return 2
    from semhuff import Word2Vec
    rows = []
    with tempfile.TemporaryDirectory(prefix="semhuff-bench-") as folder:
        path, tokens = write_prefix(args.corpus, args.tokens, folder)
        print(f"corpus: {args.corpus}, {tokens:,} tokens; skip-gram dim {args.dim} window 5 "
              f"min_count 5 sample 1e-3, {args.epochs} epochs, seeds {args.seeds}, semhuff HS order "
              f"{args.hs_order}; "
              f"cpu count {os.cpu_count()}")
        for loss in args.loss:  # compile (or load) the kernels outside the timed runs
            Word2Vec([["warm", "up"]] * 8, min_count=1, vector_size=args.dim, loss=loss,
                     epochs=1, workers=1, progress=False)
        for loss in args.loss:
            for threads in args.threads:
                cell = {"loss": loss, "threads": threads}
                for name, runner in (("gensim", run_gensim), ("semhuff", run_semhuff)):
                    runs = []
                    for seed in args.seeds:
                        gc.collect()
                        runs.append(runner(path, tokens, loss, threads, seed, args))
                    cell[name] = summarise(runs)
                rows.append(cell)
                print_cell(cell, flush=True)
    print_table(rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "tokens": tokens, "rows": rows}, fh, indent=1)
    return 0


def print_cell(cell, flush=False):
    g, s = cell["gensim"], cell["semhuff"]
    print(f"  {cell['loss']} x{cell['threads']}: gensim {g['words_per_s']:,.0f} w/s, semhuff "
          f"{s['words_per_s']:,.0f} w/s ({s['words_per_s'] / g['words_per_s']:.2f}x)", flush=flush)


def print_table(rows):
    head = (f"{'loss':4} {'thr':>3} | {'impl':7} | {'words/s':>10} {'train s':>8} | {'WS353':>6} "
            f"{'SimLex':>6} {'analogy':>7} | half-range over seeds")
    print("\n" + head + "\n" + "-" * len(head))
    for cell in rows:
        for name in ("gensim", "semhuff"):
            r = cell[name]
            print(f"{cell['loss']:4} {cell['threads']:>3} | {name:7} | {r['words_per_s']:>10,.0f} "
                  f"{r['train_s']:>8.1f} | {r['ws353']:>6.3f} {r['simlex']:>6.3f} {r['analogy']:>7.3f}"
                  f" | ±{r['ws353_spread'] / 2:.3f} ±{r['simlex_spread'] / 2:.3f} ±{r['analogy_spread'] / 2:.3f}")
        g, s = cell["gensim"], cell["semhuff"]
        print(f"{cell['loss']:4} {cell['threads']:>3} | {'ratio':7} | {s['words_per_s'] / g['words_per_s']:>9.2f}x "
              f"{s['train_s'] / g['train_s']:>7.2f}x | {s['ws353'] - g['ws353']:>+6.3f} "
              f"{s['simlex'] - g['simlex']:>+6.3f} {s['analogy'] - g['analogy']:>+7.3f}")


if __name__ == "__main__":
    sys.exit(main())
