"""Every option of every console script says what it does and, where it has one, its default
(issue 12.5: `--epochs`, `--workers`, `--seed` showed neither)."""
import argparse
import re

import pytest

from semhuff.cli import data, evaluate, query, score, train, tree
from semhuff.cli.common import _DeprecatedSpelling


def _parsers():
    yield "semhuff-train", train.build_parser()
    yield "semhuff-score", score.build_parser()
    yield "semhuff-eval", evaluate.build_parser()
    yield "semhuff-query", query.build_parser()
    for name, parser in _with_commands("semhuff-data", data.build_parser()):
        yield name, parser
    top = tree.build_parser()
    yield "semhuff-tree", top
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"semhuff-tree {name}", sub


def _with_commands(prog, top):
    yield prog, top
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prog} {name}", sub


QUIET_DEFAULTS = (None, False, 0, [], argparse.SUPPRESS)


@pytest.mark.parametrize("prog,parser", list(_parsers()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_option_has_help_and_shows_its_default(prog, parser):
    text = parser.format_help()
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        if isinstance(action, _DeprecatedSpelling):  # a former spelling: hidden on purpose
            assert action.help == argparse.SUPPRESS
            assert not re.search(re.escape(action.option_strings[0]) + r"(?![\w-])", text)
            continue
        name = "/".join(action.option_strings) or action.dest
        assert action.help and action.help != argparse.SUPPRESS, f"{prog} {name}: no help"
        if action.option_strings and action.default not in QUIET_DEFAULTS and \
                not isinstance(action, (argparse._StoreConstAction, argparse._CountAction)):
            shown = str(action.default) if not isinstance(action.default, tuple) else ",".join(action.default)
            assert "default" in action.help.lower() or \
                issubclass(parser.formatter_class, argparse.ArgumentDefaultsHelpFormatter), \
                f"{prog} {name}: default {shown} not shown"
    assert "Traceback" not in text


def test_train_help_shows_epochs_workers_seed():
    text = " ".join(train.build_parser().format_help().split())
    assert "passes over the corpus (default: 5)" in text
    assert "random seed" in text and "(default: 1)" in text
    assert "training threads" in text and "--workers" in text
