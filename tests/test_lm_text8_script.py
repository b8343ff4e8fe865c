"""eval/bench/lm_text8.sh (docs/lm.md, text8 at its own scale): the semhuff-lm command each row
gets, --resume where a checkpoint is, a finished row skipped, bad input refused in one line. A
stand-in ``semhuff-lm`` on PATH records its arguments (the real rows take hours)."""
import os
import stat
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "eval" / "bench" / "lm_text8.sh"


def run(tmp_path, *rows, corpus=None, **settings):
    fake = tmp_path / "bin" / "semhuff-lm"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text('#!/bin/sh\necho "$@" >> "$CALLS"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    if corpus is None:
        corpus = tmp_path / "corpus.txt.gz"
        corpus.write_bytes(b"")
    inherited = {k: v for k, v in os.environ.items() if k not in ("SEED", "THREADS")}
    env = dict(inherited, PATH=f"{fake.parent}{os.pathsep}{os.environ['PATH']}",
               CALLS=str(tmp_path / "calls"), CORPUS=str(corpus), **settings)
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "out"), *rows], env=env,
                          capture_output=True, text=True, timeout=60)
    calls = (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []
    return done, calls


def test_each_row_gets_its_options_and_the_shared_settings(tmp_path):
    done, calls = run(tmp_path, "huffman", "self-organized", "class-frequency")
    assert done.returncode == 0, done.stderr
    assert len(calls) == 3
    for call in calls:
        assert "--heldout-chars 1000000 --max-vocab 44000 --epochs 3" in call
        assert "--seed 1 --checkpoint-steps 2000" in call and "--resume" not in call
    assert "--loss tree --tree huffman --checkpoint huffman.ckpt" in calls[0]
    assert "--loss self-organized --checkpoint" in calls[1]  # the paper's defaults
    assert "--loss class --clustering frequency" in calls[2]


def test_issue_45_rows(tmp_path):
    out = tmp_path / "out"
    (out / "boot").mkdir(parents=True)
    (out / "boot" / "vectors.bin").write_bytes(b"")  # made once, by the first -boot row
    done, calls = run(tmp_path, "class-tree-boot", "head-tree-boot")
    assert done.returncode == 0, done.stderr
    assert f"--loss class-tree --head 0 --tree semhuff --similarity {out}/boot/vectors.bin" in calls[0]
    assert f"--loss head-tree --tree semhuff --similarity {out}/boot/vectors.bin" in calls[1]


def test_another_seed_reaches_the_runs(tmp_path):
    done, calls = run(tmp_path, "adaptive", SEED="2")
    assert done.returncode == 0, done.stderr
    assert len(calls) == 1 and "--seed 2 " in calls[0] and "--seed 1 " not in calls[0]


def test_a_row_with_a_checkpoint_resumes_and_a_finished_row_is_skipped(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "random.ckpt").write_bytes(b"")
    (out / "adaptive.json").write_text("{}")
    done, calls = run(tmp_path, "adaptive", "random")
    assert done.returncode == 0, done.stderr
    assert "adaptive done" in done.stdout
    assert len(calls) == 1 and "--tree random" in calls[0] and calls[0].endswith("--resume")


@pytest.mark.parametrize("rows, corpus, message", [
    (("bogus",), None, "no row bogus"),
    (("huffman",), "/no/such/corpus.gz", "no corpus at /no/such/corpus.gz"),
])
def test_bad_input_is_refused_in_one_line(tmp_path, rows, corpus, message):
    done, calls = run(tmp_path, *rows, corpus=corpus)
    assert done.returncode == 2 and calls == []
    assert done.stderr.strip().splitlines() == [f"lm_text8: {message}" + (
        " (set CORPUS)" if "corpus" in message else "")]
