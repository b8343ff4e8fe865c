"""semhuff-train's lines around a checkpoint (issue 48): an interrupted run names the checkpoint
it kept and how to continue, and a resumed run's summary says where it resumed."""
import pytest

from semhuff import Word2Vec
from semhuff.checkpoint import read_state
from semhuff.cli import train
from test_checkpoint import Crash  # Ctrl-C once ``at`` words are done

ARGS = ["--epochs", "3", "--dim", "16", "--min-count", "3", "--workers", "1", "--no-progress"]


@pytest.fixture
def crash_at(monkeypatch):
    """``crash_at(n)``: the CLI's next training is interrupted after n words."""
    original = Word2Vec.train

    def arm(at):
        def crashing(self, *args, **kwargs):
            kwargs["hooks"] = list(kwargs.get("hooks") or ()) + [Crash(at)]
            return original(self, *args, **kwargs)
        monkeypatch.setattr(Word2Vec, "train", crashing)
    yield arm
    monkeypatch.setattr(Word2Vec, "train", original)


def test_an_interrupted_run_names_the_checkpoint_and_a_resumed_one_says_so(tmp_path, capsys,
                                                                          crash_at, monkeypatch):
    out, ckpt = tmp_path / "v.kv", tmp_path / "run.ckpt.npz"
    command = ["lee", "-o", str(out), *ARGS, "--checkpoint", str(ckpt), "--checkpoint-every", "0"]
    crash_at(60_000)  # in the second epoch (lee: 37-50k words an epoch at min_count 3)
    assert train.main(command) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("semhuff-train: interrupted; no output was written; kept "
                              f"checkpoint {ckpt} (written ")
    assert err[-1].endswith(f"continue with the same command and --resume {ckpt}")
    assert not out.exists()
    position = read_state(str(ckpt))["position"]
    monkeypatch.undo()  # no more crashes

    assert train.main(command + ["--resume", str(ckpt)]) == 0
    summary = capsys.readouterr().out
    assert (f"resumed: from {ckpt} in epoch {position['epoch'] + 1} of 3, after "
            f"{position['words_done']:,} words trained before it stopped") in summary
    assert position["epoch"] == 1 and out.exists()
    # a finished checkpoint resumed again trains nothing, and says so
    assert train.main(command + ["--resume", str(ckpt)]) == 0
    assert f"resumed: {ckpt} holds a finished run; nothing more was trained" in \
        capsys.readouterr().out


def test_an_interrupt_before_the_first_checkpoint_says_there_is_none(tmp_path, capsys, crash_at):
    ckpt = tmp_path / "run.ckpt.npz"
    crash_at(20_000)
    assert train.main(["lee", "-o", str(tmp_path / "v.kv"), *ARGS, "--checkpoint", str(ckpt),
                       "--checkpoint-every", "60"]) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == ("semhuff-train: interrupted; no output was written; no checkpoint had been "
                    "written yet (the first comes after --checkpoint-every 60 minutes)")
    assert not ckpt.exists()


def test_without_a_checkpoint_the_line_is_as_before(tmp_path, capsys, crash_at):
    crash_at(20_000)
    assert train.main(["lee", "-o", str(tmp_path / "v.kv"), *ARGS]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == \
        "semhuff-train: interrupted; no output was written"
