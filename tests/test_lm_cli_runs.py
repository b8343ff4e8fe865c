"""semhuff-lm's real runs (issue 35): the Transformer end to end, checkpoints and --resume after
a kill -9, score / sample of a saved model, devices and precision."""
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from semhuff.cli.lm import main as lm_main  # noqa: E402
from semhuff.cli.common import resolve_corpus  # noqa: E402
from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm.token_ids import load_data  # noqa: E402
from semhuff.lm.evaluation import evaluate  # noqa: E402
from semhuff.lm.models import load_model  # noqa: E402
from semhuff.lm.settings import LMSettings  # noqa: E402

# a tiny run on gensim's lee corpus: 300 words, 5,000 training tokens
TINY = ["lee", "--max-vocab", "300", "--heldout-chars", "20000", "--emb", "16", "--hidden", "16",
        "--train-tokens", "5000", "--workers", "1", "--no-progress"]


pytestmark = pytest.mark.usefixtures("torch_one_thread")


def tiny_data():
    return load_data(resolve_corpus(["lee"]), None, 20000, 1, 300, 5000, None)


def unigram_perplexity(data) -> float:
    """The held-out perplexity of the training text's add-one unigram model (independent of
    the trainer)."""
    counts = np.bincount(data.train, minlength=len(data.vocab)).astype(float) + 1
    p = counts / counts.sum()
    return float(np.exp(-np.log(p[data.heldout[1:]]).mean()))


def test_a_transformer_lm_trains_beats_the_unigram_and_reloads(tmp_path, capsys):
    model_path, report_path = tmp_path / "t.pt", tmp_path / "t.json"
    assert lm_main(TINY + ["--arch", "transformer", "--layers", "1", "--heads", "2",
                           "--max-len", "32", "--epochs", "2", "--lr", "0.05",
                           "-o", str(model_path), "--report", str(report_path)]) == 0
    assert "TRANSFORMER" in capsys.readouterr().out
    report = json.loads(report_path.read_text())
    assert report["settings"]["arch"] == "transformer"
    assert report["settings"]["network_options"] == {"layers": 1, "heads": 2, "max_len": 32}
    data = tiny_data()
    final = report["epochs"][-1]["heldout"]["perplexity"]
    assert final < 0.95 * unigram_perplexity(data)
    model, vocab, settings = load_model(str(model_path))[:3]
    assert type(model).__name__ == "TransformerLanguageModel" and len(model.blocks) == 1
    assert model.max_len == 32 and vocab.words == data.vocab.words
    again = evaluate(model, data.heldout, settings.eval_batch, settings.bptt)
    assert again.perplexity == final


def test_a_bptt_longer_than_the_transformer_window_is_refused_early(tmp_path, capsys):
    with pytest.raises(OptionError, match="max_len"):
        LMSettings(arch="transformer", network_options={"max_len": 10}, bptt=20).check()
    # the command line: a one-line error before any data is read
    assert lm_main(["/nonexistent/corpus", "--heldout-chars", "10", "--arch", "transformer",
                    "--max-len", "10", "--bptt", "20"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-len" in err[0] and "nonexistent" not in err[0]


# -- checkpoints ---------------------------------------------------------------------------------

KILLER = """
import os, signal, sys
import torch
torch.set_num_threads(1)
import semhuff.lm.trainer as trainer
saves = [0]
real = trainer.save_checkpoint
def save_then_die(*args, **kwargs):
    real(*args, **kwargs)
    saves[0] += 1
    if saves[0] == int(os.environ["KILL_AFTER"]):
        os.kill(os.getpid(), signal.SIGKILL)  # kill -9: no cleanup, no finally
trainer.save_checkpoint = save_then_die
from semhuff.cli.lm import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("layer", [[], ["--loss", "self-organized", "--reassign-every", "4"]],
                         ids=["tree", "self-organized"])
def test_kill_9_then_resume_gives_the_uninterrupted_numbers(tmp_path, layer):
    import os
    import subprocess
    import sys
    from semhuff.lm.checkpoint import read_checkpoint
    run = TINY + layer + ["--epochs", "2", "--dropout", "0.2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    whole = tmp_path / "whole.json"
    done = subprocess.run([sys.executable, "-m", "semhuff.cli.lm", *run, "--report", str(whole)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    ck, resumed = tmp_path / "run.ckpt", tmp_path / "resumed.json"
    # saves: steps 3, 6, epoch 1's end, then step 9 (in epoch 2): killed right after it
    killed = subprocess.run([sys.executable, "-c", KILLER, *run, "--checkpoint", str(ck),
                             "--checkpoint-steps", "3", "--report", str(resumed)],
                            capture_output=True, text=True, timeout=120,
                            env={**env, "KILL_AFTER": "4"})
    assert killed.returncode == -9, killed.stderr
    assert not resumed.exists()
    saved = read_checkpoint(str(ck))
    assert (saved["epoch"], saved["step"]) == (1, 9) and saved["position"] > 0
    assert saved["state"] is not None  # the LSTM state carried into the next batch
    done = subprocess.run([sys.executable, "-m", "semhuff.cli.lm", *run, "--checkpoint", str(ck),
                           "--resume", "--report", str(resumed)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    a, b = json.loads(whole.read_text()), json.loads(resumed.read_text())
    assert len(b["epochs"]) == 2
    for x, y in zip(a["epochs"], b["epochs"]):
        assert x["heldout"]["perplexity"] == y["heldout"]["perplexity"]
        assert x["train_loss"] == y["train_loss"] and x["tokens"] == y["tokens"]
    assert a["untrained"] == b["untrained"]
    # the re-assignments alike (when, what moved); not their timing, nor the interval's
    # diagnostic perplexities: the layer's diagnostic sums are a non-persistent buffer
    # (layers/self_organized.py), so after a resume they count the steps since the resume only
    diagnostics = {"seconds", "cluster_ppl", "in_cluster_ppl", "ppl"}
    same = (lambda rs: [{k: v for k, v in r.items() if k not in diagnostics} for r in rs])
    assert same(a["reassignments"]) == same(b["reassignments"])
    if layer:
        assert len(a["reassignments"]) >= 3


def test_resume_on_other_settings_or_data_is_refused_in_one_line(tmp_path, capsys):
    ck = tmp_path / "run.ckpt"
    assert lm_main(TINY + ["--checkpoint", str(ck), "-q"]) == 0
    capsys.readouterr()
    for change, word in ((["--lr", "0.2"], "lr"), (["--train-tokens", "4000"], "another corpus")):
        args = TINY + ["--checkpoint", str(ck), "--resume", "-q"]
        i = args.index(change[0]) if change[0] in args else None
        if i is not None:
            args[i + 1] = change[1]
        else:
            args += change
        assert lm_main(args) != 0
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and word in err[0], err
    assert lm_main(TINY + ["--resume", "-q"]) != 0
    assert "--checkpoint" in capsys.readouterr().err


def test_each_epoch_is_said_as_it_ends_and_a_resumed_run_says_where(tmp_path, capsys,
                                                                      monkeypatch):
    """With --no-progress a run prints each epoch's line (its held-out perplexity) as the epoch
    ends, not when the run does; stopped by Ctrl-C at its second checkpoint (step 6 of epoch
    1: 8 steps an epoch) and resumed, it says so, and then goes on to say each epoch."""
    import semhuff.lm.trainer as trainer
    printed = []

    def so_far():
        printed.append(capsys.readouterr().out)
        return "".join(printed)
    before_each = []
    real_epoch = trainer.LMTrainingRun.train_epoch
    monkeypatch.setattr(trainer.LMTrainingRun, "train_epoch",
                        lambda run: before_each.append(so_far()) or real_epoch(run))
    assert lm_main(TINY + ["--epochs", "3"]) == 0
    out = so_far()
    assert [text.count("held-out perplexity") for text in before_each] == [0, 1, 2]
    assert "epoch 2: train loss" in before_each[2] and "epoch 3:" not in before_each[2]
    assert [out.count(f"epoch {i}: train loss") for i in (1, 2, 3)] == [1, 1, 1]
    # Ctrl-C right after the second checkpoint, then --resume
    ck, saves = tmp_path / "run.ckpt", []
    real_save = trainer.save_checkpoint

    def save_then_stop(*args, **kwargs):
        real_save(*args, **kwargs)
        saves.append(kwargs["step"])
        if len(saves) == 2:
            raise KeyboardInterrupt
    monkeypatch.setattr(trainer, "save_checkpoint", save_then_stop)
    run = TINY + ["--epochs", "2", "--checkpoint", str(ck)]
    assert lm_main(run + ["--checkpoint-steps", "3"]) == 130 and saves == [3, 6]
    printed.clear()
    so_far()
    monkeypatch.setattr(trainer, "save_checkpoint", real_save)
    assert lm_main(run + ["--resume"]) == 0
    out = so_far()
    assert "resumed at step 6 of epoch 1 (8 steps an epoch; step 6 of the run)" in out
    assert [out.count(f"epoch {i}: train loss") for i in (1, 2)] == [1, 1]


# -- using a trained model -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def saved_run(tmp_path_factory, lee_path):
    """A tiny LSTM run over a random tree, trained on lee's first 200 lines, the next 50 held
    out in a file: (model path, report dict, held-out file)."""
    folder = tmp_path_factory.mktemp("saved")
    lines = open(lee_path, encoding="utf-8").read().splitlines()
    (folder / "train.txt").write_text("\n".join(lines[:200]) + "\n")
    (folder / "held.txt").write_text("\n".join(lines[200:250]) + "\n")
    before = torch.get_num_threads()
    assert lm_main([str(folder / "train.txt"), "--heldout", str(folder / "held.txt"),
                    "--max-vocab", "400", "--emb", "16", "--hidden", "16", "--workers", "1",
                    "--no-progress", "--tree", "random", "--heldout-tokens", "3000", "-q",
                    "-o", str(folder / "m.pt"), "--report", str(folder / "r.json")]) == 0
    torch.set_num_threads(before)
    return folder / "m.pt", json.loads((folder / "r.json").read_text()), folder / "held.txt"


def test_score_reproduces_the_reports_perplexity_exactly(saved_run, tmp_path, capsys):
    model, report, held = saved_run
    out = tmp_path / "score.json"
    assert lm_main(["score", str(model), str(held), "--max-tokens", "3000",
                    "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["total"]["perplexity"] == report["epochs"][-1]["heldout"]["perplexity"]
    assert figures["total"]["tokens"] == report["epochs"][-1]["heldout"]["tokens"]
    assert figures["total"]["seconds"] > 0
    assert "perplexity" in capsys.readouterr().out
    # two files: each scored alone too
    assert lm_main(["score", str(model), str(held), str(held), "--max-tokens", "500"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(str(held) in line for line in lines) == 2


def test_a_saved_tree_model_loads_without_rebuilding_its_tree(saved_run, monkeypatch):
    import semhuff.lm.layers.tree as tree_softmax
    model_path, report, _ = saved_run
    first = load_model(str(model_path))
    assert first.eos is True and first.report["epochs"] == report["epochs"]
    tree = first.model.output.tree
    asked = []
    real = tree_softmax.tree_for

    def recording(spec, *args, **kwargs):
        asked.append(spec)
        return real(spec, *args, **kwargs)
    monkeypatch.setattr(tree_softmax, "tree_for", recording)
    again = load_model(str(model_path))
    assert "random" not in asked  # (a semhuff tree would need its similarity source)
    assert again.settings.layer_options["tree"] == "random"
    assert not np.array_equal(tree.parent, real("huffman", first.vocab, None, 1, {}).parent)
    assert np.array_equal(again.model.output.tree.parent, tree.parent)
    assert np.array_equal(again.model.output.tree.branch, tree.branch)
    assert again.model.output.tree.kind == tree.kind


def test_sample_is_reproducible_and_emits_vocabulary_words(saved_run, capsys):
    model_path = str(saved_run[0])
    vocab = load_model(model_path).vocab
    outputs = []
    for seed in (5, 5, 6):
        assert lm_main(["sample", model_path, "--tokens", "40", "--seed", str(seed),
                        "--prompt", "the government said"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[0] != outputs[2]
    words = outputs[0].split()
    assert 0 < len(words) <= 40 and set(words) <= set(vocab.words)
    assert lm_main(["sample", model_path, "--temperature", "-1"]) != 0
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_semhuff_score_on_a_pt_file_names_semhuff_lm_score(saved_run, capsys):
    from semhuff.cli.score import main as score_main
    assert score_main([str(saved_run[0]), "lee"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "semhuff-lm score" in err[0]


# -- device and precision ------------------------------------------------------------------------

def test_bf16_on_the_cpu_trains_to_within_5_percent_of_fp32(tmp_path):
    import semhuff.lm.trainer as trainer
    data = tiny_data()
    settings = dict(emb=16, hidden=16, epochs=2, threads=1, progress=False)
    autocasts = []
    real = trainer.autocast

    def recording(device, precision):
        autocasts.append(precision)
        return real(device, precision)
    fp32 = trainer.train_lm(data, LMSettings(**settings))[1].epochs[-1].heldout.perplexity
    trainer.autocast = recording
    try:
        bf16 = trainer.train_lm(data, LMSettings(precision="bf16", **settings))[1]
    finally:
        trainer.autocast = real
    got = bf16.epochs[-1].heldout.perplexity
    assert set(autocasts) == {"bf16"} and math.isfinite(got)
    assert got != fp32  # the autocast did change the arithmetic
    assert abs(got - fp32) <= 0.05 * fp32
    with trainer.autocast(torch.device("cpu"), "bf16"):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16


@pytest.mark.parametrize("args,words", [(["--precision", "fp16"], "CUDA"),
                                        (["--device", "tpu"], "cpu, cuda or cuda:N"),
                                        (["--device", "cuda:7"], "CUDA device")])
def test_devices_and_precisions_refused_in_one_line(capsys, args, words):
    if args[-1] == "cuda:7" and torch.cuda.device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    assert lm_main(["/nonexistent/corpus", "--heldout-chars", "10"] + args) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "nonexistent" not in err[0]


# -- several processes ---------------------------------------------------------------------------

def test_torchrun_two_processes_give_one_process_perplexity(tmp_path):
    """2 processes on gloo, each its 4 rows of the batch of 8 (gradients averaged, the
    self-organized statistic reduced before each re-assignment, held-out rows split and the
    sums added): the held-out perplexity of one process with the same batch, within 1%."""
    import os
    import subprocess
    import sys
    run = TINY + ["--batch-size", "8", "--loss", "self-organized", "--reassign-every", "4"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}  # a crash: its stack
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    done = subprocess.run([sys.executable, "-m", "semhuff.cli.lm", *run, "--report", str(one),
                           "-q"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", "-m", "semhuff.cli.lm", *run, "--report",
                           str(two)], capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.count("untrained held-out perplexity") == 1  # rank 0 reports
    a, b = json.loads(one.read_text()), json.loads(two.read_text())
    assert a["epochs"][0]["tokens"] == b["epochs"][0]["tokens"]  # the whole batch counted
    assert b["untrained"]["tokens"] == a["untrained"]["tokens"]
    assert b["untrained"]["perplexity"] == pytest.approx(a["untrained"]["perplexity"], rel=1e-6)
    # the first step's update alike: the same loss over the epoch (to rounding)
    assert b["epochs"][0]["train_loss"] == pytest.approx(a["epochs"][0]["train_loss"], rel=1e-3)
    pa, pb = a["epochs"][0]["heldout"]["perplexity"], b["epochs"][0]["heldout"]["perplexity"]
    assert abs(pa - pb) <= 0.01 * pa
    assert len(a["reassignments"]) == len(b["reassignments"]) >= 2
    # the first re-assignment sees the same statistic on both (the ranks' means of the
    # same model's smoothing)
    assert a["reassignments"][0]["changed_share"] == b["reassignments"][0]["changed_share"]


def test_torchrun_with_a_batch_that_does_not_split_is_refused(tmp_path):
    import os
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", "-m", "semhuff.cli.lm", *TINY,
                           "--batch-size", "7"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode != 0 and "multiple of 2" in done.stderr


def _torchrun(args, timeout=180):
    import os
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", "-m", "semhuff.cli.lm", *args],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"})


def test_torchrun_checkpoints_resume_as_one_uninterrupted_run(tmp_path):
    """2 processes write one checkpoint (rank 0); 2 processes resume from it: the same second
    epoch as a run that was never stopped (the same model, the same rows on each rank)."""
    run = TINY + ["--batch-size", "8", "--loss", "self-organized", "--reassign-every", "4",
                  "-q"]
    whole, part = tmp_path / "whole.json", tmp_path / "part.json"
    done = _torchrun(run + ["--epochs", "2", "--report", str(whole)])
    assert done.returncode == 0, done.stderr[-2000:]
    ckpt = tmp_path / "run.ckpt"
    done = _torchrun(run + ["--epochs", "1", "--checkpoint", str(ckpt), "--checkpoint-every",
                            "5"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert ckpt.exists() and not list(tmp_path.glob("*.tmp*"))
    done = _torchrun(run + ["--epochs", "2", "--checkpoint", str(ckpt), "--resume",
                            "--report", str(part)])
    assert done.returncode == 0, done.stderr[-2000:]
    a, b = json.loads(whole.read_text()), json.loads(part.read_text())
    assert len(b["epochs"]) == 2
    for key in ("train_loss", "tokens"):
        assert b["epochs"][1][key] == pytest.approx(a["epochs"][1][key], rel=1e-9), key
    assert b["epochs"][1]["heldout"]["perplexity"] == pytest.approx(
        a["epochs"][1]["heldout"]["perplexity"], rel=1e-9)


def _rows_worker(rank, world, init, results):
    import torch.distributed as dist

    from semhuff.lm.parallel import gather_rows, rows_of
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    try:
        whole = (torch.arange(2 * 6 * 3.0).reshape(2, 6, 3), -torch.arange(6 * 3.0).reshape(1, 6, 3))
        mine = rows_of(whole, rank, world)
        results[rank] = [torch.equal(a, b) for a, b in zip(gather_rows(mine, world), whole)] \
            + [mine[0].shape[1] == 6 // world]
    finally:
        dist.destroy_process_group()


def test_a_checkpoints_recurrent_state_is_the_whole_batch_gathered_from_the_ranks(tmp_path):
    import torch.multiprocessing as mp
    results = mp.Manager().dict()
    mp.spawn(_rows_worker, args=(2, f"file://{tmp_path / 'rdv'}", results), nprocs=2, join=True)
    assert results[0] == results[1] == [True, True, True]


def test_a_wordnet_semhuff_model_loads_and_scores_without_wordnet(saved_run, tmp_path,
                                                                   monkeypatch, capsys):
    """Trained with --tree semhuff --similarity wordnet (skipped without the WordNet data),
    then loaded and scored with every WordNet location pointing nowhere: the tree comes from
    the file."""
    from semhuff.errors import DatasetMissing, SimilarityError
    from semhuff.trees.similarity import find_wordnet
    try:
        find_wordnet()
    except (DatasetMissing, SimilarityError) as exc:
        pytest.skip(f"WordNet not here: {exc}")
    _, _, held = saved_run
    train = held.parent / "train.txt"
    model = tmp_path / "semhuff.pt"
    assert lm_main([str(train), "--heldout", str(held), "--max-vocab", "400", "--emb", "8",
                    "--hidden", "8", "--workers", "1", "--no-progress", "--tree", "semhuff",
                    "--similarity", "wordnet", "--heldout-tokens", "500", "-q",
                    "-o", str(model)]) == 0
    monkeypatch.setenv("SEMHUFF_DATA", str(tmp_path / "nothing"))
    monkeypatch.setenv("SEMHUFF_WORDNET", str(tmp_path / "nothing"))
    with pytest.raises((DatasetMissing, SimilarityError)):
        find_wordnet()
    loaded = load_model(str(model))
    assert loaded.model.output.tree.kind == "semhuff"
    capsys.readouterr()
    assert lm_main(["score", str(model), str(held), "--max-tokens", "500"]) == 0
    assert "perplexity" in capsys.readouterr().out


def _trainer_rank(rank, world, port, results):
    import os

    import semhuff.lm.layers.self_organized as so
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    seen = []
    original = so.SelfOrganizedSoftmax.after_step

    def recording(self, optimizer=None):
        info = original(self, optimizer)
        if info is not None:  # a re-assignment: the clusters each rank now holds
            seen.append(self.cluster_of.clone())
        return info
    so.SelfOrganizedSoftmax.after_step = recording
    try:
        data = load_data(resolve_corpus(["lee"]), None, 20000, 1, 300, 6000, None)
        train_lm_settings = LMSettings(output="self-organized", emb=16, hidden=16,
                                       batch_size=8, threads=1, progress=False,
                                       layer_options={"reassign_every": 5})
        from semhuff.lm.trainer import train_lm
        train_lm(data, train_lm_settings)
        results[rank] = seen
    except Exception as exc:  # noqa: BLE001 - sent back whole
        import traceback
        results[rank] = "".join(traceback.format_exception(exc))
    finally:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()


def test_under_two_processes_the_ranks_hold_the_same_clusters_after_every_reassignment():
    """The trainer itself (DDP, each rank its rows): after each re-assignment both ranks hold
    the same cluster of every word (the statistic reduced first; without the reduction this
    fails), and the clusters move."""
    import socket

    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = mp.Manager().dict()
    mp.spawn(_trainer_rank, args=(2, port, results), nprocs=2, join=True)
    a, b = results[0], results[1]
    assert not isinstance(a, str), a
    assert not isinstance(b, str), b
    assert len(a) == len(b) >= 3
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert any(not torch.equal(x, y) for x, y in zip(a, a[1:]))  # they did move
