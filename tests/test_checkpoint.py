"""Checkpoints: a run killed (a real SIGKILL) and resumed ends with exactly the vectors of an
uninterrupted run (one worker, a seed), for hierarchical softmax, negative sampling and a
self-organized tree; checkpoints are model files; a resume on another corpus is refused."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from semhuff import Word2Vec
from semhuff.checkpoint import read_state
from semhuff.errors import CheckpointError, OptionError
from semhuff.hooks import Hook, HookSchedule

SMALL = dict(vector_size=16, min_count=3, epochs=3, workers=1, seed=3, progress=False,
             chunk_words=2000)
LAYERS = {"hs": {}, "ns": dict(loss="ns"),
          "self-organized": dict(loss="hs-self-organized",
                                 layer_options=dict(reassign_every=7000, clusters=8)),
          # K from the run (4,608 words) below the default chunk's ~77,000: chunks cut to K/2,
          # and the resumed run must cut them the same way
          "self-organized-default": dict(loss="hs-self-organized", chunk_words=100_000,
                                         layer_options=dict(clusters=8))}


class Crash(Hook):
    """Stands for a crash: raises once ``at`` words are done."""
    every_words = 1

    def __init__(self, at):
        self.at = at

    def on_words(self, context):
        if context.words_done >= self.at:
            raise KeyboardInterrupt


def _same(a, b):
    return (np.array_equal(a.syn0, b.syn0) and np.array_equal(a.layer.weights, b.layer.weights)
            and [e.loss for e in a.reports[-1].epochs] == [e.loss for e in b.reports[-1].epochs])


@pytest.mark.parametrize("layer", sorted(LAYERS))
@pytest.mark.parametrize("crash_at", [30_000, 70_000])  # in the first epoch (cache incomplete), the second
def test_crash_and_resume_equals_an_uninterrupted_run(tmp_path, lee_path, layer, crash_at):
    options = {**SMALL, **LAYERS[layer]}
    reference = Word2Vec(lee_path, **options)
    model = Word2Vec(**options)
    model.build_vocab(lee_path)
    path = tmp_path / "run.ckpt.npz"
    with pytest.raises(KeyboardInterrupt):
        model.train(lee_path, hooks=[Crash(crash_at)], checkpoint=path, checkpoint_every=0)
    state = read_state(path)
    assert not state.get("complete") and state["position"]["words_done"] >= 30_000 - 2_100
    assert state["position"]["epoch"] == (0 if crash_at < 50_000 else 1)
    resumed = Word2Vec.resume(path, progress=False)
    assert _same(resumed, reference)
    if layer.startswith("self-organized"):  # the re-assignments happened at the same words
        assert len(reference.layer.organizer.history) >= 5
        np.testing.assert_array_equal(resumed.layer.organizer.history[:, 0],
                                      reference.layer.organizer.history[:, 0])
    if layer == "self-organized-default":  # lee is one default chunk an epoch
        assert len(reference.reports[0].chunks) > 10 * SMALL["epochs"]
    assert len(resumed.reports[-1].chunks) == len(reference.reports[0].chunks)
    assert resumed.train_calls == 1 and read_state(path)["complete"]


def test_a_checkpoint_is_a_model_file_and_a_finished_one_resumes_to_itself(tmp_path, lee_path):
    model = Word2Vec(**SMALL)
    model.build_vocab(lee_path)
    model.train(lee_path, checkpoint=tmp_path / "c.npz", checkpoint_every=60)
    loaded = Word2Vec.load(tmp_path / "c.npz", progress=False)
    np.testing.assert_array_equal(loaded.syn0, model.syn0)
    again = Word2Vec.resume(tmp_path / "c.npz", progress=False)
    np.testing.assert_array_equal(again.syn0, model.syn0)
    assert again.reports[-1].raw_words == model.reports[-1].raw_words
    model.save(tmp_path / "m.npz")
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        Word2Vec.resume(tmp_path / "m.npz")


def test_resume_on_another_corpus_is_refused(tmp_path, lee_path):
    model = Word2Vec(**SMALL)
    model.build_vocab(lee_path)
    with pytest.raises(KeyboardInterrupt):
        model.train(lee_path, hooks=[Crash(20_000)], checkpoint=tmp_path / "c.npz",
                    checkpoint_every=0)
    lines = open(lee_path, encoding="utf-8").read().splitlines()
    other = tmp_path / "other.txt"
    other.write_text("\n".join(lines[1:] + lines[:1]) + "\n", encoding="utf-8")
    with pytest.raises(CheckpointError, match="differs from the one"):
        Word2Vec.resume(tmp_path / "c.npz", str(other), progress=False)
    with pytest.raises(OptionError, match="checkpoint_every"):
        model.train(lee_path, checkpoint=tmp_path / "d.npz", checkpoint_every=-1)


def test_hook_boundaries_after_a_resume():
    class Every(Hook):
        every_words = 1000
    hook = Every()
    schedule = HookSchedule([hook])
    schedule.resume(2500)  # hooks due at 2,500 words have run
    assert schedule.due(2999) == [] and schedule.due(3000) == [hook]
    schedule.resume(3000)
    assert schedule.due(3999) == [] and schedule.due(4100) == [hook]


# -- a real SIGKILL, through the command line -------------------------------------------------

def _train_cmd(out, *extra):
    # lee 12 times: ~720k tokens an epoch, 8 chunks of 100k words, a checkpoint after each
    return [sys.executable, "-m", "semhuff.cli.train", *(["lee"] * 12), "-o", str(out),
            "--epochs", "3", "--workers", "1", "--dim", "16", "--min-count", "3", "--seed", "5",
            "--no-progress", "-q", *extra]


def _open_files(pid: int) -> list:
    """What the process's file descriptors point at; one closed between the listing and the
    read (the run goes on meanwhile) is skipped."""
    links = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    return links


@pytest.mark.parametrize("loss", ["hs", "ns"])
def test_sigkill_and_resume_equals_an_uninterrupted_run(tmp_path, loss):
    cache = tmp_path / "cache"
    cache.mkdir()
    ckpt = tmp_path / "run.ckpt.npz"
    subprocess.run(_train_cmd(tmp_path / "ref.txt", "--loss", loss), check=True)
    proc = subprocess.Popen(_train_cmd(tmp_path / "out.txt", "--loss", loss, "--checkpoint",
                                       str(ckpt), "--checkpoint-every", "0", "--tmp-dir",
                                       str(cache)))
    try:
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None:
            if ckpt.exists() and read_state(ckpt).get("position", {}).get("epoch", 0) >= 1:
                break  # the id cache is complete: the resumed run must rebuild it
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before it could be killed"
        held = _open_files(proc.pid)
        assert any(link.startswith(str(cache)) for link in held)  # the cache is open in --tmp-dir
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "out.txt").exists()
    assert os.listdir(cache) == []  # the killed run's id cache had no name: nothing is left
    state = read_state(ckpt)["position"]
    assert state["epoch"] >= 1
    subprocess.run(_train_cmd(tmp_path / "out.txt", "--loss", loss, "--checkpoint", str(ckpt),
                              "--resume", str(ckpt), "--tmp-dir", str(cache)), check=True)
    assert (tmp_path / "out.txt").read_bytes() == (tmp_path / "ref.txt").read_bytes()
    assert read_state(ckpt)["complete"]
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == []


def test_resume_refuses_changed_options(tmp_path):
    ckpt = tmp_path / "c.npz"
    subprocess.run(_train_cmd(tmp_path / "a.txt", "--checkpoint", str(ckpt)), check=True)
    done = subprocess.run(_train_cmd(tmp_path / "b.txt", "--resume", str(ckpt), "--window", "3",
                                     "--init-model", str(ckpt)), capture_output=True, text=True)
    assert done.returncode == 2 and "give one of them" in done.stderr
    done = subprocess.run(_train_cmd(tmp_path / "b.txt", "--resume", str(ckpt), "--window", "3",
                                     "--dim", "20"), capture_output=True, text=True)
    assert done.returncode == 2 and "--window 3" in done.stderr and "--dim 20" in done.stderr
    assert done.stderr.count("\n") == 1
