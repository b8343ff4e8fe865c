"""semhuff-query: nearest neighbours and analogies on saved vectors, from the command line.

    semhuff-query VECTORS WORD [WORD ...] [--topn N] [--restrict-vocab N]
    semhuff-query VECTORS man:king::woman:?          # an analogy: king - man + woman
    semhuff-query VECTORS --analogy man king woman   # the same, in word2vec.c's order a b c

VECTORS is any file the project reads (semhuff.vectors_io.read_vectors: a semhuff model .npz, a gensim
.kv, word2vec text or binary, compressed too). A query ``a:b::c:?`` (or ``a:b::c``) asks "a is
to b as c is to ?", i.e. the words nearest b - a + c (gensim's ``most_similar(positive=[b, c],
negative=[a])``: 3CosAdd; ``--method mul``: 3CosMul, ``most_similar_cosmul``). The query words
themselves are never answers, as in gensim. Every word of every query is checked before
anything is printed: an unknown word is a one-line error (exit 2) naming all of them.

Output: one line per query, ``query -> word cosine, word cosine, ...`` (as ``semhuff-train
--probe`` prints); ``--tsv``: ``query<TAB>rank<TAB>word<TAB>score`` lines for scripts.
"""
from __future__ import annotations

import argparse
import re
import sys
from typing import List, Optional, Sequence, Tuple

import numpy as np

from semhuff.errors import OptionError, VectorsError
from semhuff.vectors_io import READ_FORMATS, read_vectors

from .common import (HelpFormatter, add_deprecated_spelling, console_script, deprecated_value,
                     new_command_line, run_cli, setup_logging, short_errors)

PROG = "semhuff-query"
# a:b::c:? or a:b::c; the words may hold anything but whitespace and ':'
_ANALOGY = re.compile(r"^([^:\s]+):([^:\s]+)::([^:\s]+)(?::\?)?$")


# the help's examples (tests/test_cli_small_fixes.py runs both analogy forms: the same answers)
ANALOGY_EXAMPLE, ANALOGY_FLAGS = "man:king::woman:?", ("man", "king", "woman")
EPILOG = (f"examples: semhuff-query v.bin king queen --topn 10;  semhuff-query v.bin "
          f"{ANALOGY_EXAMPLE}  (king - man + woman; = --analogy {' '.join(ANALOGY_FLAGS)})")


def positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, formatter_class=HelpFormatter, description="Nearest neighbours (cosine) and analogies on saved word "
                "vectors, the way gensim's KeyedVectors.most_similar answers them.",
                epilog=EPILOG)
    p.add_argument("vectors", metavar="VECTORS",
                   help="vectors file: semhuff model (.npz), gensim .kv, word2vec text or binary")
    p.add_argument("queries", nargs="*", metavar="QUERY",
                   help="a word (its nearest neighbours) or an analogy a:b::c:? (the words "
                        "nearest b - a + c)")
    p.add_argument("--analogy", nargs=3, action="append", metavar=("A", "B", "C"),
                   help="a is to b as c is to ? (repeatable; word2vec.c's 'word-analogy' order)")
    p.add_argument("--topn", type=positive, default=10, help="answers per query (default 10)")
    p.add_argument("--restrict-vocab", type=positive, metavar="N",
                   help="answer only among the N most frequent words (the file's first N)")
    p.add_argument("--method", choices=("add", "mul"), default="add",
                   help="analogies: 3CosAdd (most_similar, default) or 3CosMul "
                        "(most_similar_cosmul)")
    p.add_argument("--format", default="auto", choices=READ_FORMATS,
                   type=deprecated_value(PROG, "--format", "model", "npz"),
                   help="the vectors file's format (default: told from its content)")
    p.add_argument("--tsv", action="store_true",
                   help="print query, rank, word, score separated by tabs, one answer a line")
    p.add_argument("-q", "--quiet", action="count", default=0, help="only errors")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log each step")
    add_deprecated_spelling(p, "--restrict", "--restrict-vocab")
    return p


def parse_queries(texts: Sequence[str], analogies: Sequence[Sequence[str]]
                  ) -> List[Tuple[str, Tuple[str, ...], Tuple[str, ...]]]:
    """(label, positive words, negative words) per query, in command-line order (the word
    queries first, then ``--analogy``)."""
    out = []
    for text in texts:
        match = _ANALOGY.match(text)
        if match:
            a, b, c = match.groups()
            out.append((f"{a}:{b}::{c}:?", (b, c), (a,)))
        elif "::" in text:
            raise OptionError(f"cannot read the analogy {text!r}: write a:b::c:? (a is to b as "
                              f"c is to ?)")
        else:
            out.append((text, (text,), ()))
    for a, b, c in analogies or ():
        out.append((f"{a}:{b}::{c}:?", (b, c), (a,)))
    return out


def answer(kv, positive, negative, topn: int, restrict: Optional[int] = None,
           method: str = "add") -> List[Tuple[str, float]]:
    """gensim's answer to one query: ``most_similar`` (or ``most_similar_cosmul`` for an
    analogy with ``method="mul"``)."""
    if negative and method == "mul":
        return kv.most_similar_cosmul(positive=list(positive), negative=list(negative),
                                      topn=topn, restrict_vocab=restrict)
    return kv.most_similar(positive=list(positive), negative=list(negative), topn=topn,
                           restrict_vocab=restrict)


def main(argv: Optional[List[str]] = None) -> int:
    new_command_line()
    args = short_errors(build_parser()).parse_args(argv)
    setup_logging(args.verbose - args.quiet)
    return run_cli(PROG, lambda: _run(args))


def _run(args) -> int:
    queries = parse_queries(args.queries, args.analogy)
    if not queries:
        raise OptionError("no query: give words, a:b::c:? analogies or --analogy A B C")
    kv, _ = read_vectors(args.vectors, args.format)
    if not np.isfinite(kv.vectors).all():
        raise VectorsError(f"{args.vectors}: some vectors are not finite (NaN or infinite: the "
                           f"training diverged?)")
    unknown = list(dict.fromkeys(w for _, pos, neg in queries for w in pos + neg
                                 if w not in kv.key_to_index))
    if unknown:
        raise VectorsError(f"not in the vocabulary of {args.vectors} ({len(kv):,} words): "
                           f"{', '.join(unknown)}")
    restrict = min(args.restrict_vocab, len(kv)) if args.restrict_vocab else None
    out = sys.stdout
    for label, positive, negative in queries:
        found = answer(kv, positive, negative, args.topn, restrict, args.method)
        if args.tsv:
            for rank, (word, score) in enumerate(found, 1):
                out.write(f"{label}\t{rank}\t{word}\t{score:.6f}\n")
        else:
            near = ", ".join(f"{word} {score:.4f}" for word, score in found)
            out.write(f"{label} -> {near or '(no other word)'}\n")
    return 0


console = console_script(main)  # the console script (setup.cfg)

if __name__ == "__main__":
    console()
