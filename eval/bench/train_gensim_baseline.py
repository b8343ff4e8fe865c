"""Train reference vectors with gensim (skip-gram, hierarchical softmax over gensim's Huffman tree)
on the shared corpus, for comparing semhuff's trainer against with ``semhuff-eval``.

    python -m semhuff.eval.bench.train_gensim_baseline -o /tmp/gensim_sg_hs.bin            # checkout
    semhuff-eval /tmp/gensim_sg_hs.bin --json report.json

Defaults are the issue's reference settings: sg=1, hs=1, negative=0, 100 dimensions, window 5,
min_count 5, sample 1e-3, 3 epochs, one worker (deterministic with a fixed seed).
"""
from __future__ import annotations

import argparse
import gzip
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path

from semhuff.data_paths import shared_corpus
from semhuff.io_utils import atomic_output, check_writable

PROG = "train_gensim_baseline"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, help="text8-style corpus, .gz allowed "
                   "(default: $SEMHUFF_DATA/corpus/corpus.txt.gz)")
    p.add_argument("-o", "--output", type=Path, required=True, help="word2vec binary file to write")
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--sample", type=float, default=1e-3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--negative", type=int, default=0, help="0 = hierarchical softmax (default)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format=f"{PROG}: %(asctime)s %(message)s")
    corpus = args.corpus or shared_corpus()
    try:
        check_writable(str(args.output))
        if not corpus.is_file():
            raise FileNotFoundError(f"corpus not found: {corpus}")
    except Exception as exc:  # one line for the user, whatever went wrong up front
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2

    from gensim.models import Word2Vec
    from gensim.models.word2vec import LineSentence

    with tempfile.TemporaryDirectory() as tmp:
        text = corpus
        if corpus.suffix == ".gz":  # LineSentence streams each epoch: decompress once
            text = Path(tmp) / "corpus.txt"
            with gzip.open(corpus, "rb") as src, open(text, "wb") as dst:
                shutil.copyfileobj(src, dst)
        started = time.perf_counter()
        model = Word2Vec(LineSentence(str(text), max_sentence_length=10_000), sg=1,
                         hs=int(args.negative == 0), negative=args.negative, vector_size=args.dim,
                         window=args.window, min_count=args.min_count, sample=args.sample,
                         workers=args.workers, epochs=args.epochs, seed=args.seed)
        logging.info("trained %d words in %.1f s", len(model.wv), time.perf_counter() - started)
        saved = Path(tmp) / "vectors.bin"
        model.wv.save_word2vec_format(str(saved), binary=True)
        with atomic_output(str(args.output), "wb") as fh, open(saved, "rb") as src:
            shutil.copyfileobj(src, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
