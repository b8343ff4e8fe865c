"""semhuff-eval: evaluate one or more sets of word vectors, side by side.

    semhuff-eval VECTORS [VECTORS ...] [--tasks similarity,analogy,synonyms,pos]
                 [--json out.json] [--markdown out.md] [--plot out.png]

VECTORS is a path (word2vec text/binary, gensim .kv, semhuff .npz) or NAME=PATH; a column is
named after the file's stem, or its file name when two stems are equal. The table goes to
stdout, one column per model. Exit status: 0 on success; 1 when a task failed on a model (it
raised, or gave a value its metric cannot take), when a data set asked for by name was skipped
(``--tasks``, ``--similarity-sets``, ``--pos-corpora`` given, or a file option such as
``--analogy-file``), or when nothing could be evaluated; 2 on bad options or when a vectors file
cannot be loaded or holds non-finite vectors (the other models are still evaluated and
reported). A default data set that is not there is skipped: a ``SKIPPED`` line under the table
says why and where the data folder was looked for (semhuff.data_paths), and the exit status stays 0.

    semhuff-eval --check-data [--data-dir DIR]

checks the data folder against the manifest (data/manifest.csv: each file there, of its size and
sha256; and the rows a --plugin task lists in its ``DATA``) and exits 1 when a file is missing
or differs.

    semhuff-eval VECTORS --plugin MODULE --tasks NAME [its flags]

imports MODULE first: an evaluation task it registers (``semhuff.eval.tasks.register_task``)
is among ``--tasks``, its flags are made from its declarations, and its scores are in the
table, the JSON and the plot like the built-in tasks' (docs/evaluation.md).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Optional

from semhuff.errors import OptionError, SemhuffError
from semhuff.eval import EVALUATION_TASKS, SuiteConfig, VectorsError, dump_json, format_markdown, format_text, \
    load_vectors, plot, run_suite
from semhuff.eval.tasks import add_task_flags, choice_list, non_negative_int, task_names, unused_flags
from semhuff.eval.vectors import DEFAULT_RESTRICT_VOCAB, default_names
from semhuff.io_utils import atomic_output, check_writable
from semhuff.vectors_io import READ_FORMATS

from .common import (add_deprecated_spelling, console_script, deprecated_value, import_plugins,
                     new_command_line, run_cli)

PROG = "semhuff-eval"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage block
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    """The options; each registered task's flags (a ``--plugin``'s too: plugins are imported
    before this is built) in a group of its own, made from its declarations."""
    tasks = task_names()
    p = _Parser(prog=PROG, description="Evaluate word vectors: word-pair similarity, analogies, "
                "synonym MR/MRR (SemHuff paper 4.1) and POS tagging (4.3); one column per model.")
    p.add_argument("vectors", nargs="*", metavar="VECTORS",
                   help="vectors file (word2vec text/binary, gensim .kv, semhuff .npz) or NAME=PATH")
    p.add_argument("--format", default="auto", choices=READ_FORMATS,
                   type=deprecated_value(PROG, "--format", "model", "npz"),
                   help="vectors file format (default: from the name and content)")
    p.add_argument("--tasks", type=choice_list(tasks),
                   help=f"comma-separated, or 'all' (default): {','.join(tasks)}; a task named "
                        "here whose data is missing makes the exit status 1; an option of a task "
                        "not named here is an error")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import this Python module first (it may register evaluation tasks: "
                        "docs/evaluation.md); repeatable")
    p.add_argument("--data-dir", type=Path,
                   help="data root (default: $SEMHUFF_DATA, else shared/data in the current "
                        "directory or a parent, beside the checkout, or ~/.local/share/semhuff: "
                        "data/README.md)")
    p.add_argument("--check-data", action="store_true",
                   help="check the data folder against the manifest (sizes, sha256) and exit")
    for task in EVALUATION_TASKS.values():
        try:
            add_task_flags(p.add_argument_group(task.title or task.name), task)
        except argparse.ArgumentError as exc:  # a plugin's flag spelled like another's
            raise OptionError(f"evaluation task {task.name}: {exc}") from None
    g = p.add_argument_group("vocabulary")
    g.add_argument("--restrict-vocab", type=non_negative_int, default=DEFAULT_RESTRICT_VOCAB,
                   help=f"use only the first N (most frequent) words; 0 = all (default {DEFAULT_RESTRICT_VOCAB})")
    g.add_argument("--case-sensitive", action="store_true", help="do not fold case (gensim folds by default)")
    p.add_argument("--workers", type=non_negative_int, default=1,
                   help="BLAS threads; 0 = the library default (all cores). Default 1: predictable on shared machines")
    g = p.add_argument_group("output")
    g.add_argument("--json", type=Path, help="write the full report as JSON")
    g.add_argument("--markdown", type=Path, help="write the table as Markdown")
    g.add_argument("--plot", type=Path, help="write a PNG of the headline scores across models")
    g.add_argument("-q", "--quiet", action="store_true",
                   help="nothing on stderr but errors: no progress bar, warnings or timing")
    g.add_argument("-v", "--verbose", action="store_true", help="log each step")
    # former spellings (one vocabulary across the console scripts)
    add_deprecated_spelling(p, "--threads", "--workers")
    if "--analogy-file" in p._option_string_actions:
        add_deprecated_spelling(p, "--analogy", "--analogy-file")
    return p


def _config(args) -> SuiteConfig:
    """The suite's settings from the flags: each task turns its given flags into settings and
    names the data sets they ask for (skipping one of those is exit status 1; the defaults are
    best effort). A flag of a task that is not run is an error naming it."""
    requested = set(args.tasks or ())
    args.tasks = task_names() if args.tasks is None else args.tasks
    given = {task.name: {o.name: getattr(args, o.name) for o in task.flags() if hasattr(args, o.name)}
             for task in EVALUATION_TASKS.values()}
    unused = unused_flags([name for flags in given.values() for name in flags], args.tasks)
    if unused:
        raise OptionError(unused)
    settings = {}
    for task in EVALUATION_TASKS.values():
        settings.update(task.settings_from_flags(given[task.name]))
        requested |= {f"{task.name}/{name}" for name in task.requested(given[task.name])}
    return SuiteConfig(tasks=args.tasks, data_dir=args.data_dir, restrict_vocab=args.restrict_vocab,
                       case_insensitive=not args.case_sensitive, requested=frozenset(requested), **settings)


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
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        import_plugins(argv)  # before the parser: their tasks' names and flags are in it
    except SystemExit as exc:  # the plugin cannot be imported: said in one line
        return exc.code
    try:
        new_command_line()
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


class StepLines:
    """The progress where stderr is no terminal (a log, a pipe): a line as each step starts,
    with the time so far, where tqdm's bar would be one line rewritten in place (a
    log would say nothing for minutes)."""

    def __init__(self, total: int):
        self.total, self.n, self.started = total, 0, time.perf_counter()

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        print(f"{PROG}: [{self.n + 1}/{self.total}, {time.perf_counter() - self.started:.0f} s] "
              f"{text}", file=sys.stderr, flush=True)

    def update(self, n: int = 1) -> None:
        self.n += n

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(quiet: bool):
    """run_suite's progress: none with -q, tqdm's bar on a terminal, else StepLines."""
    if quiet:
        return False
    return True if sys.stderr.isatty() else StepLines


def _evaluate(args, config) -> int:
    models, failed_loads = [], 0
    for name, path in _vector_sources(args.vectors):
        if not args.quiet:
            print(f"{PROG}: loading {name} ({path})", file=sys.stderr, flush=True)
        try:
            models.append(load_vectors(path, name=name, fmt=args.format))
        except VectorsError as exc:
            print(f"{PROG}: error: {exc}", file=sys.stderr)
            failed_loads += 1
    if not models:
        return 2

    report = run_suite(models, config, progress=_progress(args.quiet), threads=args.workers)
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
    from semhuff.data_paths import check_data, check_entry, data_root, where_looked
    root = args.data_dir if args.data_dir is not None else data_root()
    checks = list(check_data(root))
    listed = {check.entry.path for check in checks}
    extra = [row for task in EVALUATION_TASKS.values() for row in task.DATA if row.path not in listed]
    checks += [check_entry(root, row) for row in extra]
    for check in checks:
        print(f"{check.status:14s} {check.entry.path}  ({check.entry.task}/{check.entry.dataset})")
    bad = [c for c in checks if not c.ok]
    print(f"{len(checks) - len(bad)} of {len(checks)} files as the manifest lists them in {root}"
          + ("" if args.data_dir is not None else f"\n{where_looked()}"))
    return 1 if bad or not checks else 0


console = console_script(main)  # the console script (setup.cfg)

if __name__ == "__main__":
    console()
