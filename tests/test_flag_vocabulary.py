"""One vocabulary of flag names across the console scripts (issue 48): the same spelling means
the same thing in every script that has it, the former spellings still work, hidden from
--help, each with a one-line note, and nothing else changed meaning."""
import re

import pytest

from semhuff.cli import data, evaluate, lm, query, score, train, tree

torch = pytest.importorskip("torch", reason="semhuff-lm's parser lists the torch layers")


def parsers():
    """(name, parser) of every console script and sub-command."""
    tree_parser = tree.build_parser()
    commands = next(a for a in tree_parser._actions if a.choices and "build" in a.choices).choices
    return [("semhuff-train", train.build_parser()), ("semhuff-eval", evaluate.build_parser()),
            ("semhuff-score", score.build_parser()), ("semhuff-query", query.build_parser()),
            ("semhuff-lm", lm.build_parser()), ("semhuff-lm score", lm.build_score_parser()),
            ("semhuff-lm sample", lm.build_sample_parser()),
            *((f"semhuff-tree {name}", sub) for name, sub in commands.items()),
            *((f"semhuff-data {name}", sub) for name, sub in _commands(data.build_parser()))]


def _commands(parser):
    return next(a for a in parser._actions if a.choices and "fetch" in a.choices).choices.items()


def flag(parser, spelling):
    return parser._option_string_actions.get(spelling)


# what a spelling means wherever it is, as the parser's dest (the setting it fills)
MEANING = {"--workers": {"workers", "threads"},        # threads the command computes with
           "--restrict-vocab": {"restrict_vocab"},
           "--loss": {"loss", "output"},               # the output layer (lm keeps its old dest)
           "--tree": {"tree", "kind"},
           "--format": {"format"},
           "--batch-size": {"batch_size", "batch"},
           "--checkpoint-every": {"checkpoint_every"},  # minutes (semhuff-train)
           "--checkpoint-steps": {"checkpoint_steps"}}  # optimizer steps (semhuff-lm)
OUTPUT_FILE = {"output", "output_model"}  # -o/--output: the file a command writes
FORMATS = {"auto", "npz", "kv", "gensim", "text", "binary"}
OLD = ["--threads", "--restrict", "--kind", "--corpus", "--output-model", "--batch", "--analogy",
       "--cell"]


def test_a_spelling_means_one_thing_in_every_script():
    seen = {}
    for name, parser in parsers():
        for spelling, dests in MEANING.items():
            action = flag(parser, spelling)
            if action is not None and action.help != "==SUPPRESS==":
                assert action.dest in dests, (name, spelling, action.dest)
                seen.setdefault(spelling, []).append(name)
        out = flag(parser, "-o") or flag(parser, "--output")
        if out is not None:
            assert out.dest in OUTPUT_FILE and {"-o", "--output"} <= set(out.option_strings), name
        fmt = flag(parser, "--format")
        if fmt is not None:
            assert set(fmt.choices) <= FORMATS, (name, fmt.choices)
    # the scripts that compute say --workers; the two with output layers say --loss
    assert set(seen["--workers"]) == {"semhuff-train", "semhuff-eval", "semhuff-score",
                                      "semhuff-lm", "semhuff-lm score"}
    assert set(seen["--loss"]) == {"semhuff-train", "semhuff-lm"}
    assert "semhuff-tree build" in seen["--tree"] and "semhuff-train" in seen["--tree"]
    # one unit a name: minutes in the one script that says --checkpoint-every
    assert seen["--checkpoint-every"] == ["semhuff-train"] and \
        flag(train.build_parser(), "--checkpoint-every").metavar == "MINUTES"
    assert seen["--checkpoint-steps"] == ["semhuff-lm"]


def test_no_former_spelling_shows_in_any_help():
    for name, parser in parsers():
        text = parser.format_help()
        for old in OLD:
            if name == "semhuff-query" and old == "--analogy":
                continue  # semhuff-query's --analogy A B C is its own (three words)
            assert not re.search(re.escape(old) + r"(?![\w-])", text), (name, old)
        assert "-q" in text and "-v" in text, name  # -q/-v on every command, sub-commands too
        if name.startswith("semhuff-lm"):  # semhuff-train's --checkpoint-every is minutes
            assert "--checkpoint-every" not in text, name


def parse_with_note(capsys, parse, argv):
    args = parse(argv)
    notes = capsys.readouterr().err.strip().splitlines()
    return args, notes


@pytest.mark.parametrize("script, old, new, check", [
    (train, ["lee", "-o", "v.kv", "--threads", "3"], ["lee", "-o", "v.kv", "--workers", "3"],
     lambda a: a.workers == 3),
    (train, ["lee", "-o", "v", "--format", "model"], ["lee", "-o", "v", "--format", "npz"],
     lambda a: a.format == "npz"),
    (score, ["m.npz", "t.txt", "--threads", "2"], ["m.npz", "t.txt", "--workers", "2"],
     lambda a: a.workers == 2),
    (query, ["v.bin", "king", "--restrict", "50"], ["v.bin", "king", "--restrict-vocab", "50"],
     lambda a: a.restrict_vocab == 50),
    (evaluate, ["v.bin", "--threads", "2", "--analogy", "q.txt"],
     ["v.bin", "--workers", "2", "--analogy-file", "q.txt"],
     lambda a: a.workers == 2 and str(a.analogy_file) == "q.txt"),
    (lm, ["lee", "--output", "class", "--threads", "2", "--output-model", "m.pt"],
     ["lee", "--loss", "class", "--workers", "2", "-o", "m.pt"],
     lambda a: a.output == "class" and a.threads == 2 and a.output_model == "m.pt"),
    (lm, ["lee", "--checkpoint-every", "5", "--cell", "gru"],
     ["lee", "--checkpoint-steps", "5", "--arch", "gru"],
     lambda a: a.checkpoint_steps == 5 and a.arch == "gru"),
    (tree, ["build", "--corpus", "c.txt", "--kind", "random", "-o", "t.npz"],
     ["build", "c.txt", "--tree", "random", "-o", "t.npz"],
     lambda a: a.kind == "random" and list(a.corpus) + list(a.old_corpus) == ["c.txt"]),
])
def test_a_former_spelling_does_what_the_new_one_does_with_a_note(capsys, script, old, new, check):
    parse = script.build_parser().parse_args
    old_args, notes = parse_with_note(capsys, parse, old)
    new_args, none = parse_with_note(capsys, parse, new)
    assert check(old_args) and check(new_args) and none == []
    assert notes and all(" is now " in n and "still works" in n for n in notes), notes


def test_lm_output_is_the_model_file_unless_it_names_a_layer(capsys):
    parse = lm.build_parser().parse_args
    args, notes = parse_with_note(capsys, parse, ["lee", "--output", "run.pt"])
    assert args.output_model == "run.pt" and args.output == "tree" and notes == []
    args, notes = parse_with_note(capsys, parse, ["lee", "--output", "full", "-o", "x.pt"])
    assert args.output == "full" and args.output_model == "x.pt"
    assert notes == ["semhuff-lm: note: --output full is now --loss full (-o/--output is the "
                     "model file, as in semhuff-train; the old spelling still works, for now)"]
    args, notes = parse_with_note(capsys, lm.build_score_parser().parse_args,
                                  ["m.pt", "t.txt", "--batch", "4", "--threads", "1"])
    assert (args.batch, args.threads) == (4, 1) and len(notes) == 2


def test_a_note_is_said_once_though_semhuff_train_parses_twice(tmp_path, capsys):
    assert train.main(["lee", "-o", str(tmp_path / "v.kv"), "--threads", "1", "--epochs", "1",
                       "--dim", "8", "-q"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["semhuff-train: note: --threads is now --workers (the old spelling still "
                   "works, for now)"]


def test_semhuff_tree_takes_q_and_v_after_the_command():
    args = tree.build_parser().parse_args(["-v", "stats", "t.npz", "-q", "-q"])
    assert (args.verbose, args.quiet) == (1, 2)


def test_tree_build_default_is_semhuff_trains_and_similarity_says_to_name_semhuff(tmp_path,
                                                                                  capsys):
    """The default tree is huffman in both scripts; a --similarity that the old default
    (semhuff) would have used is an error saying so, not silently a Huffman tree."""
    out = tmp_path / "t.npz"
    assert tree.main(["build", "lee", "--min-count", "3", "-o", str(out), "-q"]) == 0
    assert "tree: huffman" in capsys.readouterr().out
    assert tree.main(["build", "lee", "--similarity", "wordnet", "-o", str(tmp_path / "s.npz")]) == 2
    assert "add --tree semhuff" in capsys.readouterr().err
    assert not (tmp_path / "s.npz").exists()
