"""semhuff-train as a user meets it: bad input gives one line on stderr and exit code 2, and
never leaves a partial output file or destroys an existing one."""
import subprocess
import sys

import pytest
from gensim.models import KeyedVectors

from semhuff.cli.train import main  # the top-level cli/ folder, installed as semhuff.cli

FAST = ["--epochs", "1", "--dim", "16", "--no-progress", "-q", "--workers", "1"]


def run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_trains_and_writes_word2vec_binary(tmp_path, capsys, lee_path):
    out = tmp_path / "v.bin"
    code, _, err = run([lee_path, "-o", str(out), *FAST], capsys)
    assert code == 0, err
    kv = KeyedVectors.load_word2vec_format(str(out), binary=True)
    assert kv.vector_size == 16 and len(kv) > 1000


def test_summary_prints_neighbours(tmp_path, capsys):
    code, out, err = run(["lee", "-o", str(tmp_path / "v.kv"), "--epochs", "1", "--dim", "16",
                          "--no-progress", "--probe", "government", "zzzunknown"], capsys)
    assert code == 0, err
    assert "government ->" in out and "zzzunknown: not in the vocabulary" in out


@pytest.mark.parametrize("setup,extra,message", [
    ("missing", [], "corpus not found"),
    ("empty", [], "no tokens"),
    ("binary", [], "binary"),
    ("rare", ["--min-count", "50"], "min_count=50"),
    ("ok", ["--window", "0"], "window"),
    ("ok", ["--alpha", "-0.1"], "alpha"),
    ("ok", ["--loss", "ns", "--negative", "0"], "negative"),
    ("ok", ["--dim", "0"], "vector_size"),
])
def test_bad_input_one_line_exit_2_no_output(tmp_path, capsys, setup, extra, message):
    corpus = tmp_path / "corpus.txt"
    if setup == "empty":
        corpus.write_text("")
    elif setup == "binary":
        corpus.write_bytes(bytes(range(256)) * 10)
    elif setup in ("rare", "ok"):
        corpus.write_text("some words here and there\n" * 20)
    out = tmp_path / "out.bin"
    code, _, err = run([str(corpus), "-o", str(out), *FAST, *extra], capsys)
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if setup == "missing" else ["corpus.txt"])


def test_unwritable_output_fails_before_training(tmp_path, capsys, lee_path):
    code, _, err = run([lee_path, "-o", str(tmp_path / "no" / "such" / "dir.bin"), *FAST], capsys)
    assert code == 2 and "output directory does not exist" in err


def test_failed_run_keeps_the_users_existing_file(tmp_path, capsys):
    out = tmp_path / "precious.bin"
    out.write_bytes(b"old vectors")
    corpus = tmp_path / "c.txt"
    corpus.write_text("a b c\n")
    code, _, _ = run([str(corpus), "-o", str(out), *FAST, "--min-count", "5"], capsys)
    assert code == 2 and out.read_bytes() == b"old vectors"


def test_console_script_has_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "semhuff.cli.train", str(tmp_path / "nope.txt"),
                           "-o", str(tmp_path / "x.bin")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "corpus not found" in proc.stderr


def test_train_on_a_tree_file_and_score_the_model(tmp_path, capsys, lee_path):
    from semhuff import Word2Vec
    from semhuff.cli.score import main as score_main
    from semhuff.cli.tree import main as tree_main
    tree = tmp_path / "tree.npz"
    assert tree_main(["-q", "build", lee_path, "--tree", "huffman", "--min-count", "3",
                      "-o", str(tree)]) == 0
    model_path = tmp_path / "m.npz"
    code, _, err = run([lee_path, "-o", str(model_path), "--tree", str(tree), "--min-count", "3",
                        *FAST], capsys)
    assert code == 0, err
    assert Word2Vec.load(model_path).tree.kind == "huffman"
    # the same tree over another vocabulary is refused with one line
    code, _, err = run([lee_path, "-o", str(tmp_path / "x.bin"), "--tree", str(tree),
                        "--min-count", "5", *FAST], capsys)
    assert code == 2 and "another vocabulary" in err and not (tmp_path / "x.bin").exists()
    code, _, err = run([lee_path, "-o", str(tmp_path / "x.bin"), "--tree", "nosuch", *FAST], capsys)
    assert code == 2 and "neither a tree kind" in err

    capsys.readouterr()
    assert score_main([str(model_path), lee_path, "--workers", "1", "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    import json
    figures = json.loads((tmp_path / "s.json").read_text())
    assert "perplexity" in out and figures["perplexity"] > 1 and figures["predictions"] > 0


def test_score_refuses_negative_sampling_in_one_line(tmp_path, capsys, lee_path):
    from semhuff.cli.score import main as score_main
    model_path = tmp_path / "ns.npz"
    assert run([lee_path, "-o", str(model_path), "--loss", "ns", *FAST], capsys)[0] == 0
    assert score_main([str(model_path), lee_path]) == 2
    err = capsys.readouterr().err
    assert "normalised" in err and len(err.strip().splitlines()) == 1


def test_diverged_run_exits_2_and_keeps_the_old_file(tmp_path, capsys):
    """Issue 12.2: `--loss ns --alpha 0.8` on lee used to write NaN over the user's vectors and
    exit 0."""
    import os
    out = tmp_path / "v.bin"
    out.write_bytes(b"good old vectors")
    os.chmod(out, 0o644)
    code, stdout, err = run(["lee", "--loss", "ns", "--alpha", "0.8", "-o", str(out), "--no-progress",
                             "--workers", "1"], capsys)
    assert code == 2 and stdout == ""
    assert err.startswith("semhuff-train: error: training diverged") and "learning rate 0.8" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out.read_bytes() == b"good old vectors" and os.listdir(tmp_path) == ["v.bin"]


LEAVING = """
import atexit, logging, sys, threading, time
from semhuff.cli.common import console_script
log = logging.getLogger("leaving")
logging.basicConfig(filename=sys.argv[1], level=logging.INFO)
atexit.register(lambda: print("atexit ran"))

def late_write():  # a thread of someone else's: the process must wait for it
    time.sleep(0.3)
    open(sys.argv[1] + ".late", "w").write("done")

def main():
    if sys.argv[2] == "thread":
        threading.Thread(target=late_write).start()
    sys.stdout.write("x" * 100_000)  # more than the pipe and stdout's buffer hold
    log.info("logged line")
    return 3

console_script(main)()
"""


@pytest.mark.parametrize("thread", ["none", "thread"])
def test_console_exit_flushes_output_logs_and_atexit_keeps_the_code(tmp_path, thread):
    """``leave`` skips the interpreter's teardown; nothing written may be lost for it."""
    log = tmp_path / "run.log"
    done = subprocess.run([sys.executable, "-c", LEAVING, str(log), thread],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "x" * 100_000 + "atexit ran\n"
    assert "logged line" in log.read_text()
    assert (tmp_path / "run.log.late").exists() == (thread == "thread")
