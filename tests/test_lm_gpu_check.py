"""eval/bench/lm_gpu_check.py, the prepared GPU check of issue 35, as a smoke test on the CPU
(``--device cpu --quick``, a subprocess as a session would run it): every layer timed in both
precisions, every LM run (LSTM, Transformer x each layer x fp32 / bf16) finite and learning;
no CUDA device -> skipped with exit 0; a run that does not learn -> exit 1."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the torch extra is not installed")

SCRIPT = Path(__file__).resolve().parents[1] / "eval" / "bench" / "lm_gpu_check.py"


def check(*args, env=None, timeout=150):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def test_quick_cpu_run_times_every_layer_and_every_lm_run_learns(tmp_path):
    out = tmp_path / "check.json"
    run = check("--device", "cpu", "--quick", "--threads", "1", "--out", str(out))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["failures"] == [] and result["skipped"] == 0
    layers = {(r["name"], r["label"], r["precision"]) for r in result["layers"]}
    assert len(layers) == 7 * 2 and all(r["ms"] > 0 for r in result["layers"])
    lm = result["lm"]
    assert {(r["network"], r["name"], r["precision"]) for r in lm} == {
        (n, layer, p) for n in ("lstm", "transformer") for p in ("fp32", "bf16")
        for layer in ("full", "adaptive", "tree", "tree sparse", "self-organized",
                      "self-organized-binary")}
    for r in lm:
        assert r["ok"] and r["last_loss"] < r["first_loss"]
        assert r["heldout_ppl_after"] < r["heldout_ppl_before"]
        assert (r["reassignments"] > 0) == r["name"].startswith("self-organized")
    assert "| lstm | tree | fp32 | 30 |" in run.stdout  # the Markdown table
    # a subset: --layers / --lm-layers / --networks / --precisions pick by label
    out = tmp_path / "some.json"
    run = check("--device", "cpu", "--quick", "--threads", "1", "--out", str(out), "--layers",
                "full,class", "--lm-layers", "tree sparse", "--networks", "lstm",
                "--precisions", "fp32")
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    some = json.loads(out.read_text())
    assert [r["label"] for r in some["layers"]] == ["full softmax",
                                                    "class softmax, frequency bins"]
    assert [(r["network"], r["name"], r["precision"]) for r in some["lm"]] == [
        ("lstm", "tree sparse", "fp32")]


def test_without_cuda_it_skips_and_exits_0(tmp_path):
    out = tmp_path / "skip.json"
    run = check("--out", str(out), env={"CUDA_VISIBLE_DEVICES": ""}, timeout=60)
    assert run.returncode == 0 and "no CUDA device here" in run.stdout
    assert "skipped" in json.loads(out.read_text())


def test_a_run_that_does_not_learn_fails_the_check(tmp_path):
    # one step: the last tenth's loss is the first tenth's, not below it (two runs, not 24:
    # the 60 s limit was reached on a loaded machine)
    run = check("--device", "cpu", "--quick", "--threads", "1", "--skip-layers",
                "--lm-steps", "1", "--networks", "lstm", "--precisions", "fp32",
                "--lm-layers", "tree", timeout=120)
    assert run.returncode == 1 and "failure(s)" in run.stdout


def test_the_correctness_script_runs_on_the_cpu_and_writes_its_results(tmp_path):
    """eval/bench/lm_gpu_correctness.py, the GPU session's first step, at its CPU smoke size
    (one layer's torch.compile check): exit 0, the JSON written, nothing failed."""
    out = tmp_path / "c.json"
    script = SCRIPT.parent / "lm_gpu_correctness.py"
    run = subprocess.run([sys.executable, str(script), "--device", "cpu", "--cases",
                          "tree huffman dense", "--skip-extras", "--out", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["failures"] == []
    assert result["tree huffman dense"]["compiled"]["ok"] is True
