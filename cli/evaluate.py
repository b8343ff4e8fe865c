"""semhuff-eval: evaluate one or more sets of word vectors, side by side.

    semhuff-eval VECTORS [VECTORS ...] [--tasks similarity,analogy,synonyms,pos]
                 [--json out.json] [--markdown out.md] [--plot out.png]

VECTORS is a path (word2vec text/binary, gensim .kv, semhuff .npz) or NAME=PATH; a column is
named after the file's stem, or its file name when two stems are equal. The table goes to
stdout, one column per model. Exit status: 0 on success; 1 when a task failed on a model (it
raised, or gave a value its metric cannot take), when a data set asked for by name was skipped
(``--tasks``, ``--similarity-sets``, ``--pos-corpora`` given, or a file option such as
``--analogy``), or when nothing could be evaluated; 2 on bad options or when a vectors file
cannot be loaded or holds non-finite vectors (the other models are still evaluated and
reported). A default data set that is not there is skipped: a ``SKIPPED`` line under the table
says why and where the data folder was looked for (semhuff.data_paths), and the exit status stays 0.

    semhuff-eval --check-data [--data-dir DIR]

checks the data folder against the manifest (data/manifest.csv: each file there, of its size and
sha256) and exits 1 when a file is missing or differs.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Optional

from semhuff.errors import SemhuffError
from semhuff.eval import (
    ANALOGY_METHODS, POS_CORPORA, SIMILARITY_FILES, TASKS, SuiteConfig, VectorsError, dump_json,
    format_markdown, format_text, load_vectors, plot, run_suite,
)
from semhuff.eval.pos import DEFAULT_MAX_TRAIN_TOKENS, DEFAULT_POS_CORPORA, DEFAULT_WINDOW
from semhuff.eval.synonyms import DIRECTIONS
from semhuff.eval.vectors import DEFAULT_RESTRICT_VOCAB, default_names
from semhuff.io_utils import atomic_output, check_writable

from .common import console_script, run_cli

PROG = "semhuff-eval"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _choices(allowed):
    def parse(text: str) -> tuple:
        items = tuple(x.strip() for x in text.split(",") if x.strip())
        if items == ("all",):
            return tuple(allowed)
        if items == ("none",):
            return ()
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{','.join(bad) or text!r} not among: {', '.join(allowed)}")
        return items
    return parse


def _named(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return name, value


def non_negative_int(text: str) -> Optional[int]:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value or None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Evaluate word vectors: word-pair similarity, analogies, "
                "synonym MR/MRR (SemHuff paper 4.1) and POS tagging (4.3); one column per model.")
    p.add_argument("vectors", nargs="*", metavar="VECTORS",
                   help="vectors file (word2vec text/binary, gensim .kv, semhuff .npz) or NAME=PATH")
    p.add_argument("--format", default="auto", choices=["auto", "text", "binary", "kv", "npz"],
                   help="vectors file format (default: from the name and content)")
    p.add_argument("--tasks", type=_choices(TASKS),
                   help=f"comma-separated, or 'all' (default): {','.join(TASKS)}; a task named "
                        "here whose data is missing makes the exit status 1")
    p.add_argument("--data-dir", type=Path,
                   help="data root (default: $SEMHUFF_DATA, else shared/data in the current "
                        "directory or a parent, beside the checkout, or ~/.local/share/semhuff: "
                        "data/README.md)")
    p.add_argument("--check-data", action="store_true",
                   help="check the data folder against the manifest (sizes, sha256) and exit")
    g = p.add_argument_group("word-pair similarity")
    g.add_argument("--similarity-sets", type=_choices(SIMILARITY_FILES),
                   help=f"built-in sets (default all, 'none' for --pairs only): {','.join(SIMILARITY_FILES)}")
    g.add_argument("--pairs", type=_named, action="append", default=[], metavar="NAME=PATH",
                   help="a word<TAB>word<TAB>score file; adds a set or replaces a built-in one's path")
    g = p.add_argument_group("analogy")
    g.add_argument("--analogy", type=Path, help="questions-words.txt format (default: gensim's copy)")
    g.add_argument("--analogy-methods", type=_choices(ANALOGY_METHODS), default=ANALOGY_METHODS,
                   help=f"comma-separated (default: {','.join(ANALOGY_METHODS)})")
    g = p.add_argument_group("synonyms (MR/MRR)")
    g.add_argument("--synonyms", type=Path, help="word<TAB>word pairs file (default: built from WordNet)")
    g.add_argument("--wordnet", type=Path, help="WordNet dict folder (default: <data>/wordnet)")
    g.add_argument("--synonym-direction", choices=DIRECTIONS, default="both",
                   help="both: ask A->B and B->A for every pair; forward: A->B only (default: both)")
    g = p.add_argument_group("POS tagging")
    g.add_argument("--pos-corpora", type=_choices(POS_CORPORA),
                   help=f"default {','.join(DEFAULT_POS_CORPORA)}; available: {','.join(POS_CORPORA)}; "
                        "'none' to run only --pos-files")
    g.add_argument("--pos-files", type=_named, action="append", default=[], metavar="NAME=TRAIN,TEST",
                   help="your own split: CoNLL-U (.conllu) or 'word TAG' column files")
    g.add_argument("--pos-window", type=int, default=DEFAULT_WINDOW, help="words each side (default 2)")
    g.add_argument("--pos-max-train-tokens", type=non_negative_int, default=DEFAULT_MAX_TRAIN_TOKENS,
                   help=f"subsample training sentences to about this many tokens; 0 = all "
                        f"(default {DEFAULT_MAX_TRAIN_TOKENS})")
    g = p.add_argument_group("vocabulary")
    g.add_argument("--restrict-vocab", type=non_negative_int, default=DEFAULT_RESTRICT_VOCAB,
                   help=f"use only the first N (most frequent) words; 0 = all (default {DEFAULT_RESTRICT_VOCAB})")
    g.add_argument("--case-sensitive", action="store_true", help="do not fold case (gensim folds by default)")
    p.add_argument("--threads", type=non_negative_int, default=1,
                   help="BLAS threads; 0 = the library default (all cores). Default 1: predictable on shared machines")
    g = p.add_argument_group("output")
    g.add_argument("--json", type=Path, help="write the full report as JSON")
    g.add_argument("--markdown", type=Path, help="write the table as Markdown")
    g.add_argument("--plot", type=Path, help="write a PNG of the headline scores across models")
    g.add_argument("-q", "--quiet", action="store_true",
                   help="nothing on stderr but errors: no progress bar, warnings or timing")
    g.add_argument("-v", "--verbose", action="store_true", help="log each step")
    return p


def _requested(args) -> frozenset:
    """What the command line asked for by name (``task`` or ``task/dataset``): skipping any of
    it is exit status 1; the defaults are best effort."""
    asked = set(args.tasks or ())
    asked |= {f"similarity/{n}" for n in args.similarity_sets or ()}
    asked |= {f"similarity/{n}" for n, _ in args.pairs}
    asked |= {f"pos/{n}" for n in args.pos_corpora or ()}
    asked |= {f"pos/{n}" for n, _ in args.pos_files}
    if args.analogy:
        asked.add("analogy/google")
    if args.synonyms or args.wordnet:
        asked.add(f"synonyms/{Path(args.synonyms).stem if args.synonyms else 'wordnet'}")
    return frozenset(asked)


def _config(args) -> SuiteConfig:
    if args.pos_window < 0:
        raise _UsageError(f"--pos-window must be >= 0, got {args.pos_window}")
    requested = _requested(args)
    args.tasks = TASKS if args.tasks is None else args.tasks
    if args.similarity_sets is None:
        args.similarity_sets = tuple(SIMILARITY_FILES)
    if args.pos_corpora is None:
        args.pos_corpora = DEFAULT_POS_CORPORA
    similarity_files = {n: None for n in args.similarity_sets}
    similarity_files.update({n: Path(path) for n, path in args.pairs})
    pos_files = {}
    for name, paths in args.pos_files:
        train, sep, test = paths.partition(",")
        if not sep or not train or not test:
            raise _UsageError(f"--pos-files {name}: expected NAME=TRAIN,TEST, got {paths!r}")
        pos_files[name] = (Path(train), Path(test))
    return SuiteConfig(
        tasks=args.tasks, data_dir=args.data_dir, analogy_file=args.analogy,
        analogy_methods=args.analogy_methods, synonym_file=args.synonyms, wordnet_dir=args.wordnet,
        synonym_direction=args.synonym_direction, pos_corpora=args.pos_corpora, pos_files=pos_files,
        pos_window=args.pos_window, pos_max_train_tokens=args.pos_max_train_tokens,
        restrict_vocab=args.restrict_vocab, case_insensitive=not args.case_sensitive,
        similarity_files=similarity_files, requested=requested,
    )


def _vector_sources(items: list[str]) -> list[tuple[str, str]]:
    """(column name, path) for each VECTORS argument."""
    sources = []
    for item in items:
        name, sep, path = item.partition("=")
        if sep and name and path and not os.path.exists(item):
            sources.append((name, path))
        else:
            sources.append((None, item))
    unnamed = [path for name, path in sources if name is None]
    defaults = iter(default_names(unnamed))
    return [(name if name is not None else next(defaults), path) for name, path in sources]


def _write(path: Optional[Path], mode: str, write) -> None:
    if path is not None:
        with atomic_output(str(path), mode) as fh:
            write(fh)


def _setup_logging(args) -> None:
    level = logging.ERROR if args.quiet else logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format=f"{PROG}: %(levelname)s: %(message)s", stream=sys.stderr)
    logging.getLogger("gensim").setLevel(logging.WARNING if args.verbose else logging.ERROR)
    # library warnings (sklearn's convergence notes ...) obey -q too: quiet means quiet
    logging.captureWarnings(True)


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.check_data:
            return _check_data(args)
        if not args.vectors:
            raise _UsageError("give at least one VECTORS file (or --check-data)")
        config = _config(args)
        for out in (args.json, args.markdown, args.plot):
            if out is not None:
                check_writable(str(out))
    except (_UsageError, SemhuffError) as exc:
        hint = f" (see {PROG} --help)" if isinstance(exc, _UsageError) else ""
        print(f"{PROG}: error: {exc}{hint}", file=sys.stderr)
        return 2
    _setup_logging(args)
    return run_cli(PROG, lambda: _evaluate(args, config))


def _evaluate(args, config) -> int:
    models, failed_loads = [], 0
    for name, path in _vector_sources(args.vectors):
        try:
            models.append(load_vectors(path, name=name, fmt=args.format))
        except VectorsError as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            failed_loads += 1
    if not models:
        return 2

    report = run_suite(models, config, progress=not args.quiet, threads=args.threads)
    sys.stdout.write(format_text(report))
    if not args.quiet:
        print(f"\nevaluated {len(models)} model(s) in {report.seconds:.1f} s", file=sys.stderr)
    for message in report.failed:
        print(f"{PROG}: error: {message}", file=sys.stderr)
    for message in report.skipped_requested:
        print(f"{PROG}: error: requested but skipped: {message}", file=sys.stderr)
    scored = any(model.scores for model in report.models)
    if not scored and not report.failed:
        print(f"{PROG}: error: nothing was evaluated (every data set was skipped)", file=sys.stderr)
    try:
        _write(args.json, "w", lambda fh: dump_json(report, fh))
        _write(args.markdown, "w", lambda fh: fh.write(format_markdown(report)))
        _write(args.plot, "wb", lambda fh: plot(report, fh))
    except (OSError, SemhuffError) as exc:
        print(f"{PROG}: error: cannot write output: {exc}", file=sys.stderr)
        return 2
    if failed_loads:
        return 2
    return 1 if report.failed or report.skipped_requested or not scored else 0


def _check_data(args) -> int:
    """Each manifest file: ok, missing, or differing from the manifest (size, sha256)."""
    from semhuff.data_paths import check_data, data_root, where_looked
    root = args.data_dir if args.data_dir is not None else data_root()
    checks = list(check_data(root))
    for check in checks:
        print(f"{check.status:14s} {check.entry.path}  ({check.entry.task}/{check.entry.dataset})")
    bad = [c for c in checks if not c.ok]
    print(f"{len(checks) - len(bad)} of {len(checks)} files as the manifest lists them in {root}"
          + ("" if args.data_dir is not None else f"\n{where_looked()}"))
    return 1 if bad or not checks else 0


console = console_script(main)  # the console script (setup.cfg)

if __name__ == "__main__":
    console()
