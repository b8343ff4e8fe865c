"""What every console entry point shares: logging set-up and turning user errors into one line
on stderr with exit code 2 (never a traceback); SIGTERM and Ctrl-C end a run cleanly (no temp
file left behind), and a reader that goes away (``| head``) ends it quietly."""
from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
import time
from typing import Callable, List, Optional

from semhuff.errors import SemhuffError


def setup_logging(verbosity: int) -> None:
    # default: warnings only (the progress bars and the closing summary say the rest)
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        datefmt="%H:%M:%S", stream=sys.stderr)
    # gensim narrates every save and load at INFO; keep that for -vv
    logging.getLogger("gensim").setLevel(logging.INFO if verbosity > 1 else logging.WARNING)
    # the first run's "compiling kernels" notice is the Python API's: the summary gives the
    # compile time here (and a test's stderr stays the same with a cold cache)
    logging.getLogger("semhuff.numba_cache").setLevel(logging.WARNING if verbosity > 0
                                                      else logging.ERROR)


class Terminated(BaseException):
    """SIGTERM, raised in the main thread so that ``finally`` blocks (temp files) run."""


@contextlib.contextmanager
def _sigterm_raises():
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_terminated(signum, frame):
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _quiet_stdout() -> None:
    # the reader is gone: send what is still buffered nowhere, so the interpreter's final
    # flush does not fail again ("Exception ignored ... BrokenPipeError")
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def run_cli(prog: str, body: Callable[[], int],
            interrupted: Optional[Callable[[], str]] = None) -> int:
    """Run ``body``; a ``SemhuffError`` or an unreadable/unwritable file becomes
    ``prog: error: message`` and exit code 2, Ctrl-C exit code 130, SIGTERM 143; a closed
    stdout (``| head``) ends the run quietly with 141, as a process killed by SIGPIPE.
    ``interrupted``: what the line after Ctrl-C / SIGTERM adds to "no output was written" (the
    checkpoint kept: "; kept ..."), or says instead of it (a text not starting with ";")."""
    def stopped(how: str) -> str:
        note = ""
        if interrupted is not None:
            with contextlib.suppress(Exception):  # the note never hides the interruption
                note = interrupted()
        if note and not note.startswith(";"):
            return f"{prog}: {how}; {note}"
        return f"{prog}: {how}; no output was written{note}"

    try:
        with _sigterm_raises():
            code = body() or 0
            sys.stdout.flush()
            return code
    except BrokenPipeError:
        _quiet_stdout()
        return 141
    except SemhuffError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, MemoryError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(stopped("interrupted"), file=sys.stderr)
        return 130
    except Terminated:
        print(stopped("terminated"), file=sys.stderr)
        return 143


def leave(code: Optional[int]) -> None:
    """End this console process with ``code``, its work done and its output written: flush
    stdout, stderr and logging, run the ``atexit`` handlers, then skip the interpreter's
    teardown of every module and object (``os._exit``). That teardown took 0.14 s after a
    training run (numba's and llvmlite's objects), ~3% of a 3M-token run on two threads
    (docs/performance.md). With a thread of someone else's still running (a plugin's, a
    Dask client's) or no ``atexit._run_exitfuncs``, the process ends the ordinary way."""
    code = 0 if code is None else int(code)
    others = [t for t in threading.enumerate()
              if t is not threading.current_thread() and not t.daemon and t.is_alive()]
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if others or run_exitfuncs is None or threading.current_thread() is not threading.main_thread():
        sys.exit(code)
    try:
        run_exitfuncs()  # logging.shutdown flushes the log handlers; temp directories go
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        _quiet_stdout()
        code = code or 141
    os._exit(code)


def console_script(main: Callable[[], int]) -> Callable[[], None]:
    """The console script of ``main`` (``main()`` then ``leave``); ``main`` itself returns
    its exit code, for tests and for callers in Python."""
    def entry() -> None:
        leave(main())
    return entry


def import_plugins(argv: Optional[List[str]]) -> None:
    """Import the modules named by ``--plugin MODULE`` before the real parser is built, so the
    output layers / tree builders they register show up among the choices of ``--loss`` etc."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--plugin", action="append", default=[])
    known, _ = pre.parse_known_args(argv)
    for name in known.plugin:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            print(f"error: cannot import plugin {name!r}: {exc}", file=sys.stderr)
            raise SystemExit(2)


def add_plugin_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                        help="import this Python module first (it may register output layers "
                             "or devices); repeatable")


class _DeprecatedSpelling(argparse.Action):
    """An old spelling of an option, hidden from --help: it does what the new one does after a
    one-line note on stderr (one vocabulary of flag names across the scripts)."""

    def __init__(self, option_strings, dest, target: argparse.Action, new: str, **kwargs):
        super().__init__(option_strings, dest=target.dest, nargs=target.nargs,
                         const=target.const, default=argparse.SUPPRESS, type=target.type,
                         choices=target.choices, help=argparse.SUPPRESS, metavar=target.metavar)
        self.target, self.new = target, new

    def __call__(self, parser, namespace, values, option_string=None):
        deprecation_note(f"{parser.prog}: note: {option_string} is now {self.new} (the old "
                         f"spelling still works, for now)")
        self.target(parser, namespace, values, option_string)


_NOTES_GIVEN: set = set()  # a command line parsed twice (semhuff-train's given options) notes once


def deprecation_note(line: str) -> None:
    """``line`` on stderr, once a command line."""
    if line not in _NOTES_GIVEN:
        _NOTES_GIVEN.add(line)
        print(line, file=sys.stderr)


def new_command_line() -> None:
    """A new command line is parsed: its deprecation notes are said again."""
    _NOTES_GIVEN.clear()


def add_deprecated_spelling(parser: argparse.ArgumentParser, old: str, new: str,
                            target: Optional[argparse.Action] = None) -> None:
    """``old`` does what ``parser``'s option ``new`` does, hidden from --help, with a note saying
    ``new`` when used; ``target``: the action to run instead of ``new``'s (a positional's)."""
    target = target or parser._option_string_actions[new]
    parser.add_argument(old, action=_DeprecatedSpelling, target=target, new=new)


def deprecated_value(prog: str, flag: str, old: str, new: str,
                     parse: Callable[[str], object] = str):
    """An argparse ``type`` that reads ``old`` as ``new`` (a renamed choice, such as ``--format
    model`` now ``npz``), with a one-line note on stderr, and any other value with ``parse``."""
    def read(text: str):
        if text == old:
            deprecation_note(f"{prog}: note: {flag} {old} is now {flag} {new} (the old name "
                             f"still works, for now)")
            return parse(new)
        return parse(text)
    read.__name__ = getattr(parse, "__name__", "value")
    return read


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's default shown once (never "(default 1,000,000) (default: None)"): not
    added when the help already says it, nor for an option without one (None), a flag
    (``store_true``, ``-q``/``-v`` counts) or a suppressed default."""

    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" in text.lower() or action.default is None or action.default is False
                or action.default is argparse.SUPPRESS
                or isinstance(action, (argparse._StoreConstAction, argparse._CountAction))):
            return text
        return super()._get_help_string(action)


def short_usage(parser: argparse.ArgumentParser) -> str:
    """``usage: PROG [options] POSITIONALS`` on one line: the positionals and required options
    only, never the full option list."""
    if parser.usage:
        return f"usage: {parser.usage % {'prog': parser.prog}}"
    needed = [a for a in parser._actions
              if (not a.option_strings or a.required) and a.help is not argparse.SUPPRESS]
    formatter = argparse.HelpFormatter(parser.prog, width=10_000)
    formatter.add_usage(None, needed, [], prefix="")
    line = " ".join(formatter.format_help().split())
    rest = line[len(parser.prog):].strip()
    return f"usage: {parser.prog} [options]{' ' + rest if rest else ''}"


def short_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser`` (and its sub-commands) answer a usage error with the short usage line,
    then the error, and where the full help is, exit code 2 (not 27 lines of usage before the
    one line that matters)."""
    def error(message, parser=parser):
        parser.exit(2, f"{short_usage(parser)}   (all options: {parser.prog} --help)\n"
                       f"{parser.prog}: error: {message}\n")
    parser.error = error
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                short_errors(sub)
    return parser


def cli_main(prog: str, build_parser: Callable[[], argparse.ArgumentParser],
             body: Callable[[argparse.Namespace], int], argv: Optional[List[str]],
             interrupted: Optional[Callable[[argparse.Namespace], str]] = None) -> int:
    """A console entry point: plugins, arguments, logging (``-v``/``-q``), then ``body(args)``
    under ``run_cli``'s error handling (``interrupted(args)``: its note after Ctrl-C)."""
    import_plugins(argv if argv is not None else sys.argv[1:])
    new_command_line()
    args = short_errors(build_parser()).parse_args(argv)
    setup_logging(args.verbose - args.quiet)
    return run_cli(prog, lambda: body(args),
                   None if interrupted is None else lambda: interrupted(args))


def checkpoint_note(path: Optional[str], started: float, continue_with: str,
                    first_comes: str) -> str:
    """What the line after Ctrl-C / SIGTERM adds about a run's checkpoint: the one kept and
    ``continue_with`` (how to continue), or that none was written yet (``first_comes``: when
    the first would have been); ``started``: the run's ``time.time()``."""
    if not path:
        return ""
    if not os.path.exists(path):
        return f"; no checkpoint had been written yet (the first comes {first_comes})"
    written = os.path.getmtime(path)
    when = (f"written {time.time() - written:,.0f} s ago" if written >= started
            else "as it was before this run")
    return f"; kept checkpoint {path} ({when}): continue with {continue_with}"


# corpora named on the command line that ship with a dependency (no download)
BUILTIN_CORPORA = {"lee": "lee_background.cor"}


def resolve_corpus(paths: List[str]) -> List[str]:
    """The corpus arguments of every CLI: a path as given, or a built-in corpus's file (``lee``:
    gensim's lee_background.cor) when no such path exists."""
    out = []
    for path in paths:
        if not os.path.exists(path) and path in BUILTIN_CORPORA:
            from gensim.test.utils import datapath
            path = datapath(BUILTIN_CORPORA[path])
        out.append(path)
    return out
