"""eval/bench/lm_gpu_open.py, the LM part of issue 43's device check, as a session runs it
without a GPU (``--quick --device cpu``; a subprocess: Triton's interpreter is read when torch
is imported), as a file with gensim, nltk and rustworkx hidden, as on the GPU image (``python
-m semhuff.eval.bench...`` imports semhuff.eval, hence gensim): every key written, the
CUDA-only ones skipped with the reason, the Triton forms really taken (the kernels called with
the dtype each feeds them) and equal to the loop; a run cut short leaves every key; and the
localisation of a non-finite step, on a poisoned in-cluster part."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
pytest.importorskip("triton", reason="Triton is not installed")

from semhuff.eval.bench import lm_gpu_open as lm_open  # noqa: E402

SCRIPT = str(Path(__file__).resolve().parents[1] / "eval" / "bench" / "lm_gpu_open.py")
# as gpu_session.sh runs it on the GPU image, which lacks these (semhuff installed --no-deps)
ON_THE_IMAGE = ("import runpy, sys\n"
                "for name in ('gensim', 'nltk', 'rustworkx'):\n"
                "    sys.modules[name] = None\n"
                "sys.argv = sys.argv[1:]\n"
                "runpy.run_path(sys.argv[0], run_name='__main__')\n")


def script(*args):
    return [sys.executable, "-c", ON_THE_IMAGE, SCRIPT, *args]


def leaves(result):
    """{(section, key...): value} for every check the quick plan has (33: 11 + 14 + 8)."""
    items = lm_open.plan(lm_open.QUICK, torch.device("cpu"), lambda section: 0, result)
    out = {}
    for section, key, _ in items:
        node = result[section]
        for part in key:
            node = node[part]
        out[(section,) + key] = node
    assert len(out) == 33
    return out


def test_quick_cpu_run_writes_every_key_and_the_triton_forms_equal_the_loop(tmp_path):
    out = tmp_path / "lm.json"
    # a budget no loaded machine reaches (~35 s on 2 shared cores): nothing skipped for time
    run = subprocess.run(script("--out", str(out), "--quick", "--device", "cpu",
                                "--time-budget", "1000"), capture_output=True, text=True,
                         timeout=400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["failures"] == [] and result["triton"] and result["quick"] is True
    rows = leaves(result)
    # a line printed per result, and nothing left unreached
    for path, value in rows.items():
        assert f"  {' / '.join(path)}: " in run.stdout
        assert value != lm_open.NOT_REACHED and "error" not in value, (path, value)
    ic = result["in_cluster_bf16"]
    for probe in lm_open.PROBES:
        for name in lm_open.TWO_LEVEL:
            row = ic["same_batch"][f"{name}, {probe}"]
            assert row["ok"] is True
            assert row[lm_open.FLOAT32_FEED]["kernel_input"] == ["float32"]
            assert row[lm_open.BF16_FEED]["kernel_input"] == ["bfloat16"]
            assert row[lm_open.LOOP]["kernel_calls"] == 0
            assert row[lm_open.BF16_FEED]["max_rel_diff_vs_loop"] <= lm_open.BF16_TOLERANCE
    for name, form in lm_open.LSTM_RUNS:
        row = ic["lstm"][f"{name}, {form}"]
        assert row["finite"] is True and row["first_nonfinite_step"] is None
        assert row["steps"] == 6 and (row["kernel_calls"] > 0) == (form != lm_open.LOOP)
        assert row["vs_loop_on_last_batch"]["ok"] is True
    assert sorted(ic["nan_forms"]["finite"]) == sorted(f"{n}, {f}" for n, f in lm_open.LSTM_RUNS)
    tree = result["dense_tree"]
    settings = {k: v for k, v in tree["semhuff_lm_settings"].items() if k != "seconds"}
    assert settings == {"cuda": {}, "cpu": {"sparse": True}}  # dense on a GPU
    assert len(tree["layer_alone"]) == 8 and all(
        r["fwd_bwd_ms"] > 0 and r["with_adagrad_ms"] > 0 for r in tree["layer_alone"].values())
    assert all(r["ok"] for r in tree["lstm"].values())
    assert set(tree["dense_over_sparse"]) == {"lstm fp32", "lstm bf16", "seconds"}
    pinned = result["pinned_statistic"]
    assert pinned["step_read_backs"].startswith("skipped: needs CUDA")
    assert all(v.startswith("skipped: needs CUDA") for v in pinned["layer_read_backs"].values())
    assert all(r["ok"] for r in pinned["lstm"].values())


def test_a_run_cut_short_leaves_every_key(tmp_path):
    """Killed after its first result: the JSON holds every key, the rest 'not reached'."""
    out = tmp_path / "lm.json"
    proc = subprocess.Popen(script("--out", str(out), "--quick", "--device", "cpu"),
                            stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            if line.startswith("  in_cluster_bf16 / same_batch"):
                break
    finally:
        proc.kill()
        proc.wait()
    rows = leaves(json.loads(out.read_text()))
    done = [p for p, v in rows.items() if v != lm_open.NOT_REACHED]
    assert done and done[0] == ("in_cluster_bf16", "same_batch", "self-organized, N(0,1)")


def test_out_of_time_every_key_says_so(tmp_path):
    out = tmp_path / "lm.json"
    run = subprocess.run(script("--out", str(out), "--quick", "--device", "cpu",
                                "--time-budget", "0.01"), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = leaves(json.loads(out.read_text()))
    assert all(v.startswith("skipped: out of the time budget") for v in rows.values()), rows


@pytest.fixture
def poisoned(monkeypatch):
    """The in-cluster part gives token 0 a NaN (and its gradient) from its 5th call with
    autograd on (the loop: on a CPU without the interpreter, the Triton forms are skipped)."""
    from semhuff.lm import class_softmax
    real, calls = class_softmax.in_cluster_log_prob, [0]

    def poison(hw, word_weight, target, layer, sparse):
        out = real(hw, word_weight, target, layer, sparse)
        if torch.is_grad_enabled():
            calls[0] += 1
            if calls[0] > 4:
                out = out * torch.where(torch.arange(out.shape[0]) == 0, math.nan, 1.0)
        return out
    monkeypatch.setattr(class_softmax, "in_cluster_log_prob", poison)


def test_a_nonfinite_step_is_found_rerun_and_localised_in_the_in_cluster_part(poisoned):
    cfg = {**lm_open.QUICK, **lm_open.QUICK["in_cluster_lm"]}
    device = torch.device("cpu")
    from semhuff.eval.bench import lm_gpu_check
    data = lm_gpu_check.lm_data(cfg, device)
    row = lm_open.in_cluster_lstm("class", lm_open.LOOP, cfg, device, math.inf, lambda: data)
    assert row["finite"] is False and row["first_nonfinite_step"] == 4
    assert "loss" in row["nonfinite_at_first"] and "grad output.words.weight" in \
        row["nonfinite_at_first"] and "vs_loop_on_last_batch" not in row
    rerun = row["rerun"]  # still poisoned: its first step
    assert rerun["step"] == 0 and "loss" in rerun["nonfinite"]
    where = rerun["localised"]
    assert where["input_nonfinite"] == 0 and where["weights_nonfinite"] == []
    assert where[lm_open.FLOAT32_FEED].startswith("skipped: Triton is not available")
    loop = where[lm_open.LOOP]
    assert loop["nonfinite"]["in_cluster_log_prob"] == 1
    assert loop["nonfinite"]["cluster_log_prob"] == 0 and loop["nonfinite"]["cluster_logits"] == 0
    assert loop["nonfinite"]["grad_input"] > 0
    (token,) = loop["nonfinite_tokens"]
    assert token["token"] == 0 and token["got"] == "nan" and math.isfinite(token["float64"])
    assert 0 <= token["slot"] < token["cluster_size"]
    # the summary and the exit status: a non-finite run of semhuff's own feed is a failure
    section = {"lstm": {f"class, {lm_open.LOOP}": row, "x": "skipped: why"}}
    assert lm_open.nan_forms(section) == {"nonfinite": [f"class, {lm_open.LOOP}"],
                                          "finite": [], "not_run": ["x"]}
    key = ("lstm", f"class, {lm_open.FLOAT32_FEED}")
    assert lm_open.is_failure("in_cluster_bf16", key, row)
    assert not lm_open.is_failure("in_cluster_bf16", ("lstm", f"class, {lm_open.BF16_FEED}"),
                                  row)
    # on one batch: the float32 feed off the loop's numbers fails, the bf16 feed's NaN does not
    same = {lm_open.FLOAT32_FEED: {"finite": True, "max_rel_diff_vs_loop": 1e-7},
            lm_open.BF16_FEED: {"finite": False, "max_rel_diff_vs_loop": math.nan}}
    assert not lm_open.is_failure("in_cluster_bf16", ("same_batch", "class, N(0,1)"), same)
    same[lm_open.FLOAT32_FEED]["max_rel_diff_vs_loop"] = 0.1
    assert lm_open.is_failure("in_cluster_bf16", ("same_batch", "class, N(0,1)"), same)
