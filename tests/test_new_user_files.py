"""Issue 23, items 7-9 and the rough edges of files and the command lines: where data is found
for any install, the manifest, skipped evaluation tasks, word2vec text headers, non-model files,
short usage errors, single defaults in --help, quiet evaluation, '-' and compile timings."""
import csv
import hashlib
import json
import logging
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from gensim.models import KeyedVectors

import semhuff.data_paths as data_mod
from semhuff.errors import CorpusError, ModelFileError, OptionError, TreeError, VectorsError
from semhuff.eval import load_vectors

try:
    from semhuff.cli import evaluate, score, train, tree as tree_cli
except ImportError:  # not installed: the top-level cli/ folder is semhuff.cli once installed
    from cli import evaluate, score, train, tree as tree_cli

REPO = Path(__file__).resolve().parents[1]
SHARED = Path("/work/shared/data")
WORDS = ["king", "queen", "man", "woman", "paris", "france", "rome", "italy", "apple", "pear"]


def small_kv(dim=8, seed=0):
    kv = KeyedVectors(vector_size=dim)
    kv.add_vectors(WORDS, np.random.default_rng(seed).normal(size=(len(WORDS), dim)).astype(np.float32))
    return kv


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """semhuff as `pip install .` leaves it: the package in a venv's site-packages, not in a
    checkout; no $SEMHUFF_DATA, an empty user data folder, the current directory elsewhere."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(data_mod, "_REPO", site)
    monkeypatch.delenv("SEMHUFF_DATA", raising=False)
    monkeypatch.delenv("SEMHUFF_WORDNET", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


def fake_data(root: Path) -> Path:
    (root / "wordsim").mkdir(parents=True)
    (root / "wordsim" / "EN-RG-65.txt").write_text("king\tqueen\t3.5\nman\twoman\t3.0\napple\tpear\t2.0\n"
                                                    "paris\trome\t1.0\n")
    return root


# ---------------------------------------------------------------- item 8: where data is found

def test_non_editable_install_finds_shared_data_from_the_current_directory(installed):
    # before: <site-packages>/../shared/data, i.e. <venv>/lib/python3.11/shared/data
    assert data_mod.data_root() != installed / "venv" / "lib" / "python3.11" / "shared" / "data"
    project = fake_data(installed / "work" / "shared" / "data")
    assert data_mod.data_root() == project
    deeper = installed / "work" / "a" / "b"
    deeper.mkdir(parents=True)
    os.chdir(deeper)  # a parent's shared/data is found too
    assert data_mod.data_root() == project


def test_search_order_env_then_cwd_then_user_folder(installed, monkeypatch):
    user = fake_data(installed / "xdg" / "semhuff")
    assert data_mod.data_root() == user  # nothing nearer: the user data folder
    cwd_data = fake_data(installed / "work" / "shared" / "data")
    assert data_mod.data_root() == cwd_data  # the current directory's comes first
    monkeypatch.setenv("SEMHUFF_DATA", str(installed / "elsewhere"))
    assert data_mod.data_root() == installed / "elsewhere"  # explicit, even when missing
    assert "does not exist" in data_mod.where_looked()


def test_a_shared_data_folder_without_data_is_passed_over(installed):
    (installed / "work" / "shared" / "data" / "unrelated").mkdir(parents=True)
    assert data_mod.find_data_root() is None
    assert data_mod.data_root() == installed / "xdg" / "semhuff"
    where = data_mod.where_looked()
    assert "no data folder found" in where and str(installed / "work") in where
    assert "SEMHUFF_DATA" in where and "data/README.md" in where


def test_checkout_rule_applies_only_to_a_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv("SEMHUFF_DATA", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    roots = [folder for folder, _ in data_mod.candidate_roots()]
    assert (REPO / ".." / "shared" / "data").resolve() in roots  # this checkout
    monkeypatch.setattr(data_mod, "_REPO", tmp_path / "site-packages")
    assert (tmp_path / "shared" / "data") in [f for f, _ in data_mod.candidate_roots()]
    assert not any("checkout" in why for _, why in data_mod.candidate_roots())


def _eval(capsys, *argv):
    code = evaluate.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_eval_without_data_says_skipped_where_it_looked_and_exit_codes(installed, capsys):
    small_kv().save_word2vec_format(str(installed / "v.txt"))
    # the defaults: best effort, exit 0, but every skip is a visible SKIPPED line
    code, out, err = _eval(capsys, installed / "v.txt", "--tasks", "similarity,synonyms,pos",
                           "--pos-corpora", "conll2000")
    assert code == 1  # --tasks and --pos-corpora were given: those skips were requested
    assert "SKIPPED (requested): similarity/rg65" in out
    assert "SKIPPED (requested): synonyms/wordnet" in out
    assert "SKIPPED (requested): pos/conll2000" in out
    assert "no data folder found" in out and "SEMHUFF_DATA" in out
    assert "requested but skipped: pos/conll2000" in err
    code, out, err = _eval(capsys, installed / "v.txt", "--pos-corpora", "none", "-q")
    assert code == 0, err  # nothing asked for by name: gensim's ws353/simlex/analogy ran
    assert "SKIPPED: similarity/rg65" in out and "SKIPPED: synonyms/wordnet" in out
    assert ("similarity" in out.split("SKIPPED")[0]) and "ws353" in out
    code, out, err = _eval(capsys, installed / "v.txt", "--tasks", "pos")
    assert code == 1 and "nothing was evaluated" in err


def test_eval_finds_data_in_the_user_folder_of_a_non_editable_install(installed, capsys):
    fake_data(installed / "xdg" / "semhuff")
    small_kv().save_word2vec_format(str(installed / "v.txt"))
    code, out, err = _eval(capsys, installed / "v.txt", "--tasks", "similarity",
                           "--similarity-sets", "rg65", "-q")
    assert code == 0, err
    row = next(line.split() for line in out.splitlines() if line.startswith("similarity"))
    assert row[:3] == ["similarity", "rg65", "spearman"] and "SKIPPED" not in out


def test_manifest_matches_the_shared_data_and_names_every_default_file():
    rows = list(csv.DictReader(open(REPO / "data" / "manifest.csv", encoding="utf-8")))
    assert rows and {r["path"] for r in rows} == {e.path for e in data_mod.manifest()}
    for row in rows:
        assert row["source"] and row["licence"] and len(row["sha256"]) == 64, row["path"]
    from semhuff.eval.datasets import SIMILARITY_FILES
    listed = {r["path"] for r in rows}
    for name, (_, shared_name) in SIMILARITY_FILES.items():
        assert f"wordsim/{shared_name}" in listed, name
    assert {"nltk_data/corpora/conll2000.zip", "analogy_google/questions-words.txt",
            "wordnet/data.noun", "corpus/corpus.txt.gz",
            "ud_english/UD_English-LinES/en_lines-ud-train.conllu"} <= listed
    if not SHARED.is_dir():
        pytest.skip(data_mod.missing_message(SHARED, "shared data"))
    for row in rows:  # the manifest against hashlib over the real files (never copied here)
        path = SHARED / row["path"]
        assert path.stat().st_size == int(row["bytes"]), row["path"]
        if int(row["bytes"]) < 2_000_000:
            assert hashlib.sha256(path.read_bytes()).hexdigest() == row["sha256"], row["path"]


def test_check_data_reports_missing_and_differing_files(tmp_path, capsys):
    root = fake_data(tmp_path / "data")  # an RG-65 of another content than the real one
    code, out, err = _eval(capsys, "--check-data", "--data-dir", root)
    assert code == 1
    assert "size differs" in out and "wordsim/EN-RG-65.txt" in out
    assert "missing        wordnet/data.noun" in out
    if not SHARED.is_dir():
        pytest.skip(data_mod.missing_message(SHARED, "shared data"))
    mc30 = SHARED / "wordsim" / "EN-MC-30.txt"
    copy = tmp_path / "copy" / "wordsim" / "EN-MC-30.txt"
    copy.parent.mkdir(parents=True)
    text = mc30.read_bytes()
    copy.write_bytes(text[:-2] + (b"9\n" if text[-2:] != b"9\n" else b"8\n"))  # same size
    checks = {c.entry.path: c.status for c in data_mod.check_data(tmp_path / "copy")}
    assert checks["wordsim/EN-MC-30.txt"] == "sha256 differs"


def test_packaging_installs_the_data_folder_as_semhuff_data():
    import configparser
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    assert "semhuff._data" in cfg["options"]["packages"].split()
    assert "semhuff._data = data" in cfg["options"]["package_dir"]
    assert "manifest.csv" in cfg["options.package_data"]["semhuff._data"]
    assert (REPO / "data" / "__init__.py").is_file() and (REPO / "data" / "README.md").is_file()


def test_wordnet_missing_message_says_how_to_point_to_it(installed):
    from semhuff.wordnet_reader import find_wordnet
    if Path("/usr/share/wordnet/data.noun").is_file():
        pytest.skip("a system WordNet is installed")
    with pytest.raises(Exception, match="no data folder found.*SEMHUFF_DATA"):
        find_wordnet()


# ---------------------------------------------------------------- item 7: numbers in errors

def test_max_final_vocab_zero_is_its_own_error_before_the_scan():
    from semhuff.vocab import Vocab

    def never():
        raise AssertionError("the corpus was scanned")
        yield
    with pytest.raises(OptionError, match="max_final_vocab .*must be >= 1.*got 0"):
        Vocab.build(never(), min_count=5, max_final_vocab=0)
    with pytest.raises(OptionError, match="max_final_vocab"):
        Vocab.from_counts({"a": 3}, 1, max_final_vocab=0)
    assert len(Vocab.from_counts({"a": 3, "b": 2}, 1, max_final_vocab=1)) == 1


def test_cli_max_final_vocab_zero(tmp_path, capsys):
    code = train.main(["lee", "-o", str(tmp_path / "v.txt"), "--max-final-vocab", "0", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "--max-final-vocab" in err and "min_count" not in err
    assert len(err.strip().splitlines()) == 1


def test_dropin_min_count_error_has_the_real_numbers():
    from gensim.test.utils import common_texts
    from semhuff.gensim import Word2Vec
    most = max(Counter(w for s in common_texts for w in s).values())  # 4, by hand
    with pytest.raises(Exception, match=rf"min_count=100 \(the most frequent word occurs {most} times"):
        Word2Vec(common_texts, min_count=100)


# ---------------------------------------------------------------- item 9: word2vec text headers

def _w2v(tmp_path, header, rows, name="v.txt"):
    path = tmp_path / name
    path.write_text((header + "\n" if header else "") + "".join(r + "\n" for r in rows))
    return path


ROWS = [f"w{i} {i} 0.5 1" for i in range(6)]


@pytest.mark.parametrize("count", [4, 9])
def test_header_count_that_disagrees_with_the_rows_is_an_error(tmp_path, count):
    path = _w2v(tmp_path, f"{count} 3", ROWS)
    with pytest.raises(VectorsError) as info:
        load_vectors(path)
    message = str(info.value)
    assert f"says {count} words but the file has 6" in message and "\n" not in message
    if count == 4:
        assert "line 6" in message  # the 5th row, after the header line
        # gensim silently reads the first 4 words (the reason we refuse rather than follow)
        assert len(KeyedVectors.load_word2vec_format(str(path))) == 4
    else:
        assert "ends at line 7" in message
        with pytest.raises(EOFError):  # gensim refuses a short file too
            KeyedVectors.load_word2vec_format(str(path))


def test_row_of_the_wrong_dimension_under_a_header_names_the_line(tmp_path):
    path = _w2v(tmp_path, "3 3", ["a 1 2 3", "b 1 2", "c 1 2 3"])
    with pytest.raises(VectorsError, match=r"line 3 has 2 values, but the header \(line 1\) says 3"):
        load_vectors(path)
    with pytest.raises(Exception):  # gensim raises too
        KeyedVectors.load_word2vec_format(str(path))


def test_headerless_file_stays_tolerant_and_names_the_first_skipped_line(tmp_path, caplog):
    path = _w2v(tmp_path, None, ["a 1 2 3", "b 1 2", "c 1 2 3", "d x 2 3"])
    with caplog.at_level(logging.WARNING):
        loaded = load_vectors(path)
    assert loaded.vectors.index_to_key == ["a", "c"]
    assert "line 2" in caplog.text and "loaded 2 words" in caplog.text


def test_a_word_with_a_no_break_space_is_one_word_as_in_gensim(tmp_path):
    path = tmp_path / "nbsp.txt"
    path.write_text("2 2\nnew\u00a0york 1 2\nparis 3 4\n", encoding="utf-8")
    assert load_vectors(path).vectors.index_to_key == \
        KeyedVectors.load_word2vec_format(str(path)).index_to_key == ["new\u00a0york", "paris"]


def test_text_file_with_a_bad_header_is_not_called_binary(tmp_path):
    path = _w2v(tmp_path, "3 50", ["a 1 2 3", "b 1 2 3", "c 1 2 3"])
    from semhuff.vectors_io import detect_format
    assert detect_format(str(path)) == "text"  # was "binary"
    with pytest.raises(VectorsError, match="line 2 has 3 values, but the header"):
        load_vectors(path)


# ---------------------------------------------------------------- non-model files

@pytest.fixture
def not_models(tmp_path):
    kv = small_kv()
    kv.save_word2vec_format(str(tmp_path / "vectors.txt"))
    kv.save(str(tmp_path / "vectors.kv"))
    (tmp_path / "empty.npz").write_bytes(b"")
    return tmp_path


@pytest.mark.parametrize("name, what", [("vectors.txt", "word2vec vectors"),
                                        ("vectors.kv", "pickle"), ("empty.npz", "empty")])
def test_non_model_files_get_our_one_line_error(not_models, capsys, name, what):
    path = str(not_models / name)
    runs = [lambda: score.main([path, "lee"]),
            lambda: tree_cli.main(["clusters", path]),
            lambda: train.main(["lee", "-o", str(not_models / "out.txt"), "--resume", path])]
    for run in runs:
        code = run()
        err = capsys.readouterr().err
        assert code == 2, err
        assert "allow_pickle" not in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1 and what in err, err
        assert "is not a semhuff" in err
    assert not (not_models / "out.txt").exists()


def test_forced_npz_format_on_a_text_file_says_what_it_is(not_models):
    with pytest.raises(VectorsError) as info:
        load_vectors(not_models / "vectors.txt", fmt="npz")
    assert "allow_pickle" not in str(info.value) and "word2vec vectors" in str(info.value)


def test_open_npz_refuses_before_numpy_and_names_the_class():
    from semhuff.io_utils import open_npz
    with pytest.raises(ModelFileError, match="not found"):
        open_npz("/nonexistent/model.npz")
    with pytest.raises(TreeError, match="is a directory"):
        open_npz("/", "tree file", TreeError)


def _corpus(tmp_path):
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(30)]
    lines = [" ".join(rng.choice(words, 12, p=np.arange(30, 0, -1) / 465)) for _ in range(200)]
    path = tmp_path / "c.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_tree_stats_and_show_accept_a_model_file(tmp_path, capsys):
    from semhuff import Word2Vec
    from semhuff.trees.huffman import build_huffman
    model = Word2Vec(str(_corpus(tmp_path)), vector_size=8, min_count=1, epochs=1, workers=1,
                     progress=False)
    model.save(str(tmp_path / "m.npz"))
    assert tree_cli.main(["stats", str(tmp_path / "m.npz")]) == 0
    out = capsys.readouterr().out
    expected = build_huffman(model.vocab.counts).expected_code_length(model.vocab.counts)
    assert f"tree: huffman, {len(model.vocab)} words" in out
    assert f"expected code length: {expected:.6f} (Huffman: {expected:.6f})" in out
    word = model.vocab.words[3]
    assert tree_cli.main(["show", str(tmp_path / "m.npz"), word]) == 0
    out = capsys.readouterr().out
    assert f"# {word}: depth {int(model.layer.tree.lengths[3])}" in out
    ns = Word2Vec(str(_corpus(tmp_path)), vector_size=8, min_count=1, epochs=1, workers=1,
                  loss="ns", progress=False)
    ns.save(str(tmp_path / "ns.npz"))
    assert tree_cli.main(["stats", str(tmp_path / "ns.npz")]) == 2
    assert "has no tree" in capsys.readouterr().err


# ---------------------------------------------------------------- the command lines

def test_usage_errors_are_short(capsys):
    with pytest.raises(SystemExit) as info:
        train.main(["lee"])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(err) == 2, err
    assert err[0].startswith("usage: semhuff-train [options]") and "--help" in err[0]
    assert err[1] == "semhuff-train: error: the following arguments are required: -o/--output"
    with pytest.raises(SystemExit):
        tree_cli.main(["show", "t.npz", "--up", "x"])
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and err[0].startswith("usage: semhuff-tree show [options]")
    assert "invalid int value: 'x'" in err[1]


def test_help_shows_each_default_once():
    import argparse

    def parsers():
        for parser in (train.build_parser(), score.build_parser(), tree_cli.build_parser()):
            yield parser
            for action in parser._actions:
                if isinstance(action, argparse._SubParsersAction):
                    yield from action.choices.values()
    for parser in parsers():
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.help or action.help is argparse.SUPPRESS:
                continue
            text = formatter._expand_help(action)
            where = (parser.prog, action.option_strings, text)
            assert text.lower().count("default") <= 1, where  # was "(default 1,000,000) (default: None)"
            assert "(default: None)" not in text, where
            if isinstance(action, (argparse._CountAction, argparse._StoreTrueAction)):
                assert "(default:" not in text, where  # was "-q ... (default: 0)"
    text = " ".join(train.build_parser().format_help().split())
    assert "passes over the corpus (default: 5)" in text


def test_eval_quiet_is_quiet_and_the_bar_counts_reading(tmp_path, monkeypatch):
    small_kv().save_word2vec_format(str(tmp_path / "v.txt"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "semhuff.cli.evaluate", str(tmp_path / "v.txt"),
                             "-q", "--tasks", "similarity", "--similarity-sets", "ws353"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "ws353" in result.stdout

    from semhuff.eval import suite
    seen = []

    class Bar:
        def __init__(self, total, **kwargs):
            self.total, self.n = total, 0
            seen.append(self)

        def update(self, n=1):
            self.n += n

        def set_postfix_str(self, text):
            seen.append(text)

        def refresh(self):
            pass

        def close(self):
            pass
    monkeypatch.setattr(suite, "tqdm", Bar)
    pairs = tmp_path / "p.txt"
    pairs.write_text("king\tqueen\t3\nman\twoman\t2\napple\tpear\t1\n")
    config = suite.SuiteConfig(tasks=("similarity",), similarity_files={"p": pairs, "q": tmp_path / "no"})
    models = [load_vectors(tmp_path / "v.txt"), load_vectors(tmp_path / "v.txt")]
    report = suite.run_suite(models, config, progress=True)
    bar = seen[0]
    assert "reading similarity/p" in seen
    assert bar.n == bar.total == 2 + 2 * 1  # two data sets read, one evaluated on two models
    assert len(report.skipped) == 1 and report.skipped[0].startswith("similarity/q:")
    assert str(tmp_path / "no") in report.skipped[0]


def test_dash_is_not_a_corpus_and_dash_o_is_standard_output(tmp_path):
    from semhuff.corpus import Corpus
    from semhuff.io_utils import is_stdout, resolve_target
    from semhuff.vectors_io import resolve_format
    with pytest.raises(CorpusError, match="standard input.*save it to a file"):
        Corpus("-")
    with pytest.raises(OptionError, match="standard output"):
        resolve_format("-")
    assert resolve_target("-").stream == 1
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "semhuff.cli.train", "lee", "-o", "-", "--format",
                             "text", "--epochs", "5", "--min-count", "5", "--dim", "20",
                             "--workers", "1", "--report", "r.json"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    header = result.stdout.splitlines()[0].split()
    assert len(header) == 2 and int(header[1]) == 20
    assert len(result.stdout.splitlines()) == int(header[0]) + 1
    assert not (tmp_path / "-").exists()  # before: a file named '-'
    assert "wrote -" in result.stderr  # the summary goes to stderr
    # the set-up's compile time is named (a cold run's "vocabulary_and_setup" was unexplained)
    timings = json.loads((tmp_path / "r.json").read_text())["timings"]
    assert 0 <= timings["compile_in_setup_seconds"] <= timings["vocabulary_and_setup_seconds"]


def test_compile_time_is_counted():
    import numba
    from semhuff.numba_cache import compile_seconds
    before = compile_seconds()

    @numba.njit
    def fresh(x):
        return x * 2 + 1
    assert fresh(3) == 7
    assert compile_seconds() > before
    again = compile_seconds()
    assert fresh(4) == 9 and compile_seconds() == again  # compiled once, not per call
