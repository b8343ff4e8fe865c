"""Scale benchmark: semhuff-train on corpora of 18M, 180M and 1B tokens on one machine.

    python -m semhuff.eval.bench_scale --copies 1 10 54 --out /tmp/semhuff-scale

Each corpus is the shared corpus (18.5M tokens) repeated ``copies`` times, every copy cut into
blocks of 1,000 tokens (one line each) whose order is shuffled (a seed per copy), written as
plain text to ``--out``. Every word's count is then exactly ``copies`` times its count in the
shared corpus, so ``--min-count 5 x copies`` gives the same vocabulary at every size (56,481
words): what changes is the corpus alone.

Each size is trained by ``semhuff-train`` in a fresh process (skip-gram, HS, dim 100, window 5,
the defaults; 2 epochs, so the second reads the id cache), and the table reports tokens/s of
the whole process (epochs x tokens / wall time, vocabulary scan, compilation and writing
included), the training's own words/s, the peak RSS (``wait4``'s ru_maxrss of that process),
the id cache's size (from the run's report) and the largest drop of free space in the output
folder seen while it ran (cache + output), besides the corpus file itself.

Free space is checked before a corpus is generated: a size that does not fit is skipped and
said so. The generated files are removed at the end unless ``--keep``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

from semhuff.data import missing_message, shared_corpus

BLOCK_TOKENS = 1000


def blocks_of(corpus: str):
    """The shared corpus as byte blocks of about BLOCK_TOKENS tokens, cut at spaces."""
    data = gzip.open(corpus).read() if corpus.endswith(".gz") else open(corpus, "rb").read()
    data = b" ".join(data.split())  # one space between tokens, no newlines
    spaces = np.flatnonzero(np.frombuffer(data, np.uint8) == 32)
    cuts = np.concatenate([[-1], spaces[BLOCK_TOKENS - 1::BLOCK_TOKENS], [len(data)]])
    return [data[a + 1:b] for a, b in zip(cuts[:-1], cuts[1:]) if b > a + 1], len(spaces) + 1


def generate(blocks, copies: int, path: str, seed: int = 0) -> int:
    """Write ``copies`` shuffled copies; returns the bytes written."""
    with open(path, "wb") as fh:
        for c in range(copies):
            order = np.random.default_rng(seed + c).permutation(len(blocks))
            fh.write(b"\n".join(blocks[i] for i in order))
            fh.write(b"\n")
    return os.path.getsize(path)


def watch_free(folder: str, stop: threading.Event, out: dict) -> None:
    start = shutil.disk_usage(folder).free
    low = start
    while not stop.wait(0.5):
        low = min(low, shutil.disk_usage(folder).free)
    out["peak_disk_bytes"] = start - low


def run(cmd, folder):
    """(wall seconds, peak RSS bytes, peak drop of free space) of one process."""
    stop, disk = threading.Event(), {}
    watcher = threading.Thread(target=watch_free, args=(folder, stop, disk), daemon=True)
    watcher.start()
    started = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    stop.set()
    watcher.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")
    return wall, usage.ru_maxrss * 1024, disk["peak_disk_bytes"]


def emit(rows, header, cells, json_path=None) -> None:
    """A markdown table of ``rows`` (first column left-aligned), and the rows as JSON."""
    print("\n| " + " | ".join(header) + " |")
    print("|---|" + "---:|" * (len(header) - 1))
    for r in rows:
        print("| " + " | ".join(cells(r)) + " |")
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(rows, fh, indent=1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--copies", type=int, nargs="+", default=[1, 10, 54],
                   help="sizes, in copies of the shared corpus (18.5M tokens each)")
    p.add_argument("--out", default="/tmp/semhuff-scale", help="folder for corpora, cache, outputs")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--corpus", default=str(shared_corpus()))
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--keep", action="store_true", help="keep the generated corpora")
    args = p.parse_args(argv)
    if not os.path.exists(args.corpus):
        print(missing_message(args.corpus, "shared corpus"), file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    blocks, tokens = blocks_of(args.corpus)
    bytes_per_copy = sum(len(b) + 1 for b in blocks)
    rows = []
    for copies in args.copies:
        path = os.path.join(args.out, f"corpus-x{copies}.txt")
        need = copies * bytes_per_copy * 1.7 + (1 << 30)  # text + 4 bytes a token of cache + room
        free = shutil.disk_usage(args.out).free + (os.path.getsize(path) if os.path.exists(path) else 0)
        if free < need:
            print(f"x{copies}: needs about {need / 1e9:.1f} GB in {args.out}, {free / 1e9:.1f} GB "
                  f"free: skipped", file=sys.stderr)
            continue
        if not (os.path.exists(path) and os.path.getsize(path) == copies * bytes_per_copy):
            generate(blocks, copies, path)
        report = os.path.join(args.out, f"run-x{copies}.json")
        cmd = [sys.executable, "-m", "semhuff.cli.train", path, "-o",
               os.path.join(args.out, f"v-x{copies}.bin"), "--min-count", str(5 * copies),
               "--epochs", str(args.epochs), "--workers", str(args.workers), "--tmp-dir",
               args.out, "--report", report, "--no-progress", "-q"]
        wall, rss, disk = run(cmd, args.out)
        with open(report) as fh:
            r = json.load(fh)
        row = {"copies": copies, "tokens": copies * tokens, "corpus_bytes": os.path.getsize(path),
               "vocabulary": r["settings"]["vocabulary_words"], "epochs": args.epochs,
               "wall_seconds": wall, "tokens_per_second": args.epochs * copies * tokens / wall,
               "train_words_per_second": r["speed"]["words_per_second"], "peak_rss_bytes": rss,
               "id_cache_bytes": r["disk"]["id_cache_bytes"], "peak_disk_bytes": disk}
        rows.append(row)
        print(json.dumps(row), flush=True)
        if not args.keep:
            os.unlink(path)
    emit(rows, ["tokens", "vocabulary", "wall s", "tokens/s (process)", "words/s (training)",
                "peak RSS", "id cache", "peak extra disk", "corpus file"],
         lambda r: [f"{r['tokens'] / 1e6:,.0f}M", f"{r['vocabulary']:,}",
                    f"{r['wall_seconds']:,.0f}", f"{r['tokens_per_second']:,.0f}",
                    f"{r['train_words_per_second']:,.0f}", f"{r['peak_rss_bytes'] / 2**20:,.0f} MiB",
                    f"{r['id_cache_bytes'] / 1e9:.2f} GB", f"{r['peak_disk_bytes'] / 1e9:.2f} GB",
                    f"{r['corpus_bytes'] / 1e9:.2f} GB"], args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
