"""Peak memory of a whole training process, semhuff against gensim, same file, same settings.

    python -m semhuff.eval.bench.memory [--words 200000] [--repeats 3] [--workers 2]

Writes a prefix of the corpus (default: the shared corpus) just long enough to hold ``--words``
distinct words (the vocabulary at min_count 1; the whole corpus when it holds fewer: the shared
corpus has 146,594), one line per line, then runs, alternated
(gensim, semhuff, gensim, semhuff, ...), ``--repeats`` fresh processes each that train on it and
write the vectors as word2vec binary:

* gensim: ``Word2Vec(LineSentence(prefix, max_sentence_length=10000), sg=1, hs=1, negative=0,
  vector_size=100, min_count=1, epochs=1, workers=2, ...)`` then ``save_word2vec_format`` (the
  ``python -c`` child of ``bench_train``: it imports gensim and nothing of semhuff);
* semhuff: the ``semhuff-train`` command a user types, with semhuff's defaults (skip-gram,
  hierarchical softmax over a Huffman tree) and the same settings, printing its summary.

Each process's peak resident set size is the kernel's own count (``ru_maxrss`` of ``wait4`` on
that child: the whole process, imports, compiled code and all). Before the measured runs each
system trains once on a small file and semhuff once more on the measured file (untimed,
unmeasured): Numba loads or compiles semhuff's kernels into its disk cache, as on any machine
after the first run (a large vocabulary's kernel variant included). Prints min / median / max
of each peak and the ratio semhuff / gensim of the medians.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from semhuff.data_paths import shared_corpus

from .train import GENSIM_CHILD, min_median_max, semhuff_train_command

SETTINGS = dict(window=5, sample=1e-3, alpha=0.025, min_alpha=0.0001)


def write_prefix_with_words(corpus: str, n_words: int, folder: str) -> tuple:
    """The shortest prefix of ``corpus`` (whole lines) with ``n_words`` distinct tokens (all of
    it if it has fewer), one line per line; (path, tokens, distinct tokens)."""
    from semhuff.corpus import Corpus
    path = os.path.join(folder, "memory_corpus.txt")
    seen = set()
    tokens = 0
    with open(path, "w", encoding="utf-8") as fh:
        for piece in Corpus(corpus):
            fh.write(" ".join(piece))
            fh.write("\n")  # a line each: gensim's LineSentence holds a whole line in memory
            seen.update(piece)
            tokens += len(piece)
            if len(seen) >= n_words:
                break
    return path, tokens, len(seen)


def peak_rss(cmd: list, what: str, timeout: float) -> tuple:
    """Run ``cmd`` to its end: (its peak RSS in bytes, wall seconds); a failure stops the run."""
    started = time.perf_counter()
    with open(os.devnull, "wb") as devnull, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(cmd, stdout=devnull, stderr=err)
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                child.kill()
                os.wait4(child.pid, 0)
                raise SystemExit(f"bench_memory: {what} ran past --timeout {timeout:g} s")
            time.sleep(0.05)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode:
            err.seek(0)
            last = (err.read().decode(errors="replace").strip().splitlines() or ["?"])[-1]
            raise SystemExit(f"bench_memory: {what} failed (exit {child.returncode}): {last}")
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return usage.ru_maxrss * scale, time.perf_counter() - started


def commands(path: str, out: str, args, seed: int = 1) -> dict:
    """Each system's whole-process command: train on ``path``, write ``out`` (.bin)."""
    params = dict(vector_size=args.dim, sg=1, hs=1, negative=0, min_count=1,
                  epochs=args.epochs, workers=args.workers, seed=seed, **SETTINGS)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in SETTINGS.items()]
    return {
        "gensim": [sys.executable, "-c", GENSIM_CHILD, path, out, json.dumps(params)],
        "semhuff": [args.semhuff_command or semhuff_train_command(), path, "-o", out,
                    "--min-count=1", f"--dim={args.dim}", f"--epochs={args.epochs}",
                    f"--workers={args.workers}", f"--seed={seed}", *flags, "--no-progress"],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default=str(shared_corpus()), help="the corpus to take a prefix of")
    p.add_argument("--words", type=int, default=200_000,
                   help="distinct words the prefix must hold (default 200000)")
    p.add_argument("--dim", type=int, default=100, help="vector dimension (default 100)")
    p.add_argument("--epochs", type=int, default=1, help="epochs (default 1)")
    p.add_argument("--workers", type=int, default=2, help="training threads (default 2)")
    p.add_argument("--repeats", type=int, default=3, help="runs per system, alternated (default 3)")
    p.add_argument("--semhuff-command", metavar="PATH",
                   help="run this semhuff-train instead of the installed one (an earlier "
                        "version's, to measure a change)")
    p.add_argument("--timeout", type=float, default=1800, help="seconds a run may take")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args(argv)
    if not os.path.exists(args.corpus):
        print(f"bench_memory: corpus not found: {args.corpus} (--corpus)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="semhuff-memory-") as folder:
        path, tokens, distinct = write_prefix_with_words(args.corpus, args.words, folder)
        print(f"prefix of {args.corpus}: {tokens:,} tokens, {distinct:,} distinct words, "
              f"{os.path.getsize(path) / 1e6:.1f} MB; skip-gram + HS, dim {args.dim}, "
              f"min_count 1, {args.epochs} epoch(s), {args.workers} workers", flush=True)
        warm = os.path.join(folder, "warmup.txt")
        with open(warm, "w") as fh:
            fh.write(" ".join(f"w{i % 50}" for i in range(5000)))
        out = os.path.join(folder, "out.bin")
        for name, cmd in commands(warm, out, args).items():  # untimed: Numba's cache, file cache
            peak_rss(cmd, f"{name} warm-up", args.timeout)
        # and semhuff once on the measured file: with two or more threads a vocabulary whose
        # path table passes THREAD_PATH_BYTES gets another kernel variant (paths mapped per
        # centre), compiled on its first run only
        peak_rss(commands(path, out, args)["semhuff"], "semhuff warm-up", args.timeout)
        peaks = {"gensim": [], "semhuff": []}
        for rep in range(1, args.repeats + 1):
            for name, cmd in commands(path, out, args, seed=rep).items():
                peak, wall = peak_rss(cmd, f"{name} run {rep}", args.timeout)
                peaks[name].append(peak)
                print(f"  run {rep} {name:8s} peak RSS {peak / 2**20:7.1f} MiB ({wall:.1f} s)",
                      flush=True)
    stats = {name: min_median_max(values) for name, values in peaks.items()}
    ratio = stats["semhuff"]["median"] / stats["gensim"]["median"]
    for name, s in stats.items():
        print(f"{name:8s} peak RSS MiB: min {s['min'] / 2**20:.1f}, median "
              f"{s['median'] / 2**20:.1f}, max {s['max'] / 2**20:.1f}")
    print(f"ratio semhuff / gensim of the medians: {ratio:.3f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "tokens": tokens, "distinct_words": distinct,
                       "peaks_bytes": peaks, "ratio": ratio}, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
