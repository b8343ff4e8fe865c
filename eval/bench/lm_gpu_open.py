"""The language-model checks the last GPU run left open (issue 43; docs/lm.md, "On a GPU"),
as the second part of ``eval/bench/gpu_session.sh``: about 150 s on one H100.

    python eval/bench/lm_gpu_open.py --out OUT/lm.json                 # a CUDA machine
    python eval/bench/lm_gpu_open.py --out lm.json --quick --device cpu  # anywhere, ~35 s

Run it as a file where gensim is missing (the GPU image): ``python -m
semhuff.eval.bench.lm_gpu_open`` works too, but imports the package ``semhuff.eval``, whose
``__init__`` imports gensim. As a file it takes semhuff from the checkout it lies in.

1. ``in_cluster_bf16``: the two-level layers' Triton in-cluster kernels under bf16 autocast,
   fed float32 (what semhuff does now), fed the network's bfloat16 (as when the H100 run gave
   a NaN loss), and the per-cluster loop: the same batch through each (``same_batch``: loss
   and gradients against the loop's, a random input and a large one), and a short LSTM run
   each (``lstm``: the self-organized two-level layer, then the class layer). A run's
   finiteness is read once, at its end; where it was not finite, the run is repeated with a
   read-back every step, stopped at the first non-finite step and the step localised
   (``localised``: the input, the cluster part, the in-cluster part and the gradients under
   each form, the float64 value of the tokens that went wrong). ``nan_forms`` sums it up.
2. ``dense_tree``: what semhuff-lm picks for the tree layer on cuda, the layer alone (V 50k,
   H 512 and 1024, forward + backward, and with Adagrad's step) and an LSTM's whole step,
   dense against sparse gradient, fp32 and bf16.
3. ``pinned_statistic``: the binary self-organized form's statistic sample (copied from
   pinned memory): the read-backs of a steady-state forward + backward and of a whole LSTM
   step (``torch.cuda.set_sync_debug_mode``), the layer's step time, an LSTM's tokens/s.

Every key is in the JSON from the start (``"skipped: not reached"``) and the file is
rewritten after each result, a line printed per result: a run cut short still reports. What
cannot run here is ``"skipped: <why>"`` (on a CPU: the read-back checks; Triton only under its
interpreter, ``TRITON_INTERPRET=1``, set by ``--device cpu`` itself). ``--time-budget``: the
sections share it (half, a quarter, a quarter; time left over passes on), what is left past
it is skipped, saying so. Exit status 1 if a check raised or semhuff's own form (the float32
feed) was wrong (``is_failure``); a NaN of the old bf16 feed is a finding, not a failure.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time

if __package__ in (None, ""):  # run as a file: its two siblings beside it, and no semhuff.eval
    # package, whose __init__ imports gensim (not on the GPU image)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import lm_gpu_check as check  # noqa: E402  (puts the checkout's root on sys.path)
    import lm_gpu_correctness as correctness  # noqa: E402
else:
    from . import lm_gpu_check as check, lm_gpu_correctness as correctness

FLOAT32_FEED, BF16_FEED, LOOP = "triton, float32 feed", "triton, bf16 feed", "loop"
FORMS = (BF16_FEED, FLOAT32_FEED, LOOP)
TWO_LEVEL = ("self-organized", "class")  # make_output_layer names
# the old feed first (does its NaN come back?), the loops, the references, last
LSTM_RUNS = [(name, form) for form in FORMS for name in TWO_LEVEL]
PROBES = {"N(0,1)": 1.0, "N(0,1) x 1000": 1000.0}  # the same-batch inputs, by their scale
BF16_TOLERANCE = 2e-2  # relative, as tests/test_lm_class_triton.py's
SHARES = {"in_cluster_bf16": 0.5, "dense_tree": 0.75, "pinned_statistic": 1.0}  # of the budget
NOT_REACHED = "skipped: not reached (the run stopped before it)"

# the LM runs' sizes are lm_gpu_check's (check 1's, on a GPU, those of the run that gave the
# NaN); "in_cluster_lm" overrides them for check 1's runs: on a CPU, Triton's interpreter takes
# ~0.1 s a kernel launch per 8 tokens, so those runs are smaller still than --quick's others
FULL = {**check.FULL, "probe_vocab": 50_000, "probe_hidden": 1024, "probe_tokens": 8192,
        "tree_vocab": 50_000, "tree_hidden": [512, 1024], "binary_vocab": 50_000,
        "binary_hidden": 1024, "in_cluster_lm": {}}
QUICK = {**check.QUICK, "probe_vocab": 400, "probe_hidden": 32, "probe_tokens": 16,
         "tree_vocab": 400, "tree_hidden": [16, 32], "binary_vocab": 400, "binary_hidden": 32,
         "in_cluster_lm": {"lm_batch": 2, "lm_bptt": 4, "lm_steps": 6, "reassign_every": 3,
                           "lm_heldout": 16}}


class Skip(Exception):
    """A check that cannot run here; its message is the reason."""


# -- the in-cluster forms -------------------------------------------------------------------------

@contextlib.contextmanager
def in_cluster_form(form, device):
    """The two-level layers' in-cluster part by ``form`` while inside; yields the list the
    Triton kernels' calls are counted in (the dtype of the input each got). On a CPU the
    kernels run under Triton's interpreter (``triton_paths.FORCE``)."""
    from semhuff.lm.kernels import clusters_numba as numba_clusters
    from semhuff.lm.kernels import clusters_triton as triton_clusters
    from semhuff.lm.kernels import paths_triton as triton_paths
    from semhuff.lm.kernels.paths import triton_wanted
    from semhuff.lm.layers import classes as class_softmax
    kernels, current = triton_clusters.triton_in_cluster, class_softmax.in_cluster_log_prob
    saved = (os.environ.get("SEMHUFF_TRITON"), triton_paths.FORCE, numba_clusters.ENABLED)
    calls = []

    def counted(h, *args):
        calls.append(str(h.dtype).replace("torch.", ""))
        return kernels(h, *args)

    def bf16_feed(hw, word_weight, target, layer, sparse):
        # in_cluster_log_prob as the H100's NaN run had it (18a3826): the kernels fed the
        # network's output as it comes (bfloat16 under autocast), not hw.float()
        import torch
        with torch.autocast(hw.device.type, enabled=False):
            if not sparse and triton_wanted(hw, word_weight):
                return triton_clusters.triton_in_cluster(
                    hw, word_weight, layer.members, layer.member_starts,
                    layer.cluster_of[target], layer.slot[target])
        return current(hw, word_weight, target, layer, sparse)

    if form != LOOP and not triton_paths.available(allow_cpu=device.type == "cpu"):
        raise Skip("Triton is not available here" + (
            " (on a CPU: only under TRITON_INTERPRET=1, set before torch is imported)"
            if device.type == "cpu" else ""))
    try:
        triton_clusters.triton_in_cluster = counted
        if form == LOOP:
            os.environ["SEMHUFF_TRITON"] = "0"
            numba_clusters.ENABLED = False  # the CPU's Numba kernels are not the loop
        else:
            triton_paths.FORCE = device.type == "cpu"
            if form == BF16_FEED:
                class_softmax.in_cluster_log_prob = bf16_feed
        yield calls
    finally:
        triton_clusters.triton_in_cluster = kernels
        class_softmax.in_cluster_log_prob = current
        if saved[0] is None:
            os.environ.pop("SEMHUFF_TRITON", None)
        else:
            os.environ["SEMHUFF_TRITON"] = saved[0]
        triton_paths.FORCE, numba_clusters.ENABLED = saved[1], saved[2]


def compare_forms(layer, h, target, device) -> dict:
    """``layer``'s loss and gradients on one batch under bf16 autocast by each form, against
    the loop's (``layer.eval()`` meanwhile: a self-organized layer's statistic is not
    updated, so every form sees the same layer)."""
    import torch
    was_training = layer.training
    layer.eval()
    got, out = {}, {}
    try:
        for form in FORMS:
            try:
                with in_cluster_form(form, device) as calls, \
                        torch.autocast(device.type, torch.bfloat16):
                    got[form] = correctness.grads(layer, h, target)
                loss, grad_h, weights = got[form]
                out[form] = {"loss": loss, "finite": bool(
                    math.isfinite(loss) and torch.isfinite(grad_h).all()
                    and all(torch.isfinite(g).all() for g in weights.values())),
                    "kernel_calls": len(calls), "kernel_input": sorted(set(calls)) or None}
            except Skip as exc:
                out[form] = f"skipped: {exc}"
    finally:
        layer.train(was_training)
    want = got[LOOP]
    for form, row in out.items():
        if form != LOOP and form in got:
            a = got[form]
            row["max_rel_diff_vs_loop"] = max(
                [correctness.rel(a[0], want[0]), correctness.rel(a[1], want[1])]
                + [correctness.rel(a[2][k], want[2][k]) for k in want[2]])
    ran = [r for f, r in out.items() if f != LOOP and isinstance(r, dict)]
    if not ran:
        raise Skip(out[FLOAT32_FEED][len("skipped: "):])
    out["ok"] = bool(out[LOOP]["finite"] and all(
        r["finite"] and r["kernel_calls"] > 0 and r["max_rel_diff_vs_loop"] <= BF16_TOLERANCE
        for r in ran))
    return out


def same_batch(name, scale, cfg, device) -> dict:
    """``compare_forms`` on a random bfloat16 input (as an autocast network's output) times
    ``scale``, Zipf targets, layer ``name`` at the probe's sizes."""
    import torch

    from semhuff.lm import make_output_layer
    V, H, N = cfg["probe_vocab"], cfg["probe_hidden"], cfg["probe_tokens"]
    layer = make_output_layer(name, H, correctness.zipf_vocab(V), seed=1, device=device)
    h, target = correctness.batch(V, H, N, device, 11)
    return compare_forms(layer, (h * scale).bfloat16(), target, device)


# -- the LSTM runs of check 1 ---------------------------------------------------------------------

def finite_flags(model, loss):
    """(1 + parameters,) bool on the device: the loss finite, each parameter's gradient finite
    (its stored values, for a sparse one); nothing read back."""
    import torch
    flags = [torch.isfinite(loss.detach())]
    for p in model.parameters():
        g = p.grad
        if g is None:
            flags.append(torch.ones((), dtype=torch.bool, device=loss.device))
        else:
            flags.append(torch.isfinite(g._values() if g.is_sparse else g).all())
    return torch.stack(flags)


def flag_names(model) -> list:
    return ["loss"] + [f"grad {name}" for name, _ in model.named_parameters()]


def network_input(model, x, state, device):
    """The network's output for ``x`` under bf16 autocast (what the output layer gets), as
    (N, H), no autograd history."""
    import torch
    with torch.no_grad(), torch.autocast(device.type, torch.bfloat16):
        hidden, _ = model.hidden(x, state)
    return hidden.reshape(-1, hidden.shape[-1])


def localise(model, x, y, state, device) -> dict:
    """Where a non-finite step's NaN comes from: the network's output, then the two-level
    layer's parts (cluster logits, log P(c | h), log P(w | c, h)) and gradients under each
    in-cluster form, on that step's batch and weights; the tokens whose in-cluster value is
    not finite, with its float64 value."""
    import torch
    layer = model.output
    body = getattr(layer, "body", layer)  # the self-organized layer's TwoLevelSoftmax
    h, target = network_input(model, x, state, device), y.reshape(-1)
    out = {"input_dtype": str(h.dtype).replace("torch.", ""),
           "input_nonfinite": int((~torch.isfinite(h)).sum()),
           "input_absmax": float(h.float().abs().max()),
           "weights_nonfinite": [n for n, p in model.named_parameters()
                                 if not bool(torch.isfinite(p).all())],
           "layer_steps": getattr(layer, "steps", None),
           "reassignments": getattr(layer, "reassignments", None)}
    for form in FORMS:
        try:
            with in_cluster_form(form, device) as calls:
                out[form] = {**layer_parts(body, h, target, device), "kernel_calls": len(calls)}
        except Skip as exc:
            out[form] = f"skipped: {exc}"
    return out


def layer_parts(body, h, target, device) -> dict:
    """The two-level ``body``'s parts and gradients on (h, target) under bf16 autocast: the
    count of non-finite values in each; the first 8 tokens with a non-finite in-cluster
    log-probability, each with its cluster, the kernel's value and float64's."""
    import torch
    body.zero_grad(set_to_none=True)
    hh = h.detach().clone().requires_grad_()
    with torch.autocast(device.type, torch.bfloat16):
        logits, own, within = body.parts(hh, target)
        loss = -(own.float() + within.float()).mean()
    loss.backward()

    def bad(t):
        return None if t is None else int((~torch.isfinite(t.detach())).sum())
    out = {"nonfinite": {"cluster_logits": bad(logits), "cluster_log_prob": bad(own),
                         "in_cluster_log_prob": bad(within), "grad_input": bad(hh.grad),
                         "grad_word_weight": bad(body.word_weight.grad),
                         "grad_cluster_weight": bad(body.cluster_weight.grad)},
           # what the network's backward gets from the layer
           "grad_input_absmax": float(hh.grad.float().abs().max()),
           "grad_input_dtype": str(hh.grad.dtype).replace("torch.", "")}
    tokens = (~torch.isfinite(within.detach())).nonzero().flatten()[:8].tolist()
    if tokens:
        out["nonfinite_tokens"] = [token_detail(body, h, target, within, n) for n in tokens]
    return out


def token_detail(body, h, target, within, n) -> dict:
    import torch
    c = int(body.cluster_of[target[n]])
    start, end = int(body.member_starts[c]), int(body.member_starts[c + 1])
    at = int(body.slot[target[n]])
    s = body.word_weight.detach()[body.members[start:end]].double() @ h[n].double()
    lse = torch.logsumexp(s, 0)
    return {"token": n, "cluster": c, "cluster_size": end - start, "slot": at,
            "got": str(float(within[n].detach())), "float64": float(s[at] - lse),
            "max_abs_score": float(s.abs().max()), "input_absmax": float(h[n].float().abs().max())}


def in_cluster_lstm(name, form, cfg, device, deadline, data) -> dict:
    """An LSTM run under bf16 autocast with ``name``'s in-cluster part by ``form``: finite
    flags kept on the device each step and read at the end (as the H100's run, which read
    nothing back before its end); if one is false, the run again, read back every step and
    stopped at the first non-finite step, that step ``localise``d. Else the forms compared on
    the last batch."""
    import torch
    train, held, vocab = data()
    seen, flags = {}, []

    def keep(model, x, y, state, loss):
        seen.update(model=model, x=x, y=y, state=state)
        flags.append(finite_flags(model, loss))
        return False

    with in_cluster_form(form, device) as calls:
        row = check.lm_run("lstm", name, {}, train, held, vocab, cfg, device, "bf16", deadline,
                           keep)
    table = torch.stack(flags).cpu()
    bad = (~table).any(dim=1).nonzero().flatten().tolist()
    # what the printed line must show first
    row = {"finite": not bad, "first_nonfinite_step": bad[0] if bad else None,
           "kernel_input": sorted(set(calls)) or None, "kernel_calls": len(calls), **row}
    if bad:
        names = flag_names(seen["model"])
        row["nonfinite_at_first"] = [names[i] for i in (~table[bad[0]]).nonzero().flatten()]
        try:
            row["rerun"] = localised_rerun(name, form, cfg, device, deadline, data)
        except check.OutOfTime:
            row["rerun"] = "skipped: out of the time budget"
    else:
        model = seen["model"]
        h = network_input(model, seen["x"], seen["state"], device)
        try:
            row["vs_loop_on_last_batch"] = compare_forms(model.output, h,
                                                         seen["y"].reshape(-1), device)
        except Skip as exc:
            row["vs_loop_on_last_batch"] = f"skipped: {exc}"
    return row


def localised_rerun(name, form, cfg, device, deadline, data) -> dict:
    """The run again, the finite flags read every step; at the first false one, ``localise``."""
    found = {}
    step = [0]

    def watch(model, x, y, state, loss):
        flags = finite_flags(model, loss).cpu()
        if bool(flags.all()):
            step[0] += 1
            return False
        names = flag_names(model)
        found.update(step=step[0], nonfinite=[names[i] for i in (~flags).nonzero().flatten()],
                     localised=localise(model, x, y, state, device))
        return True

    train, held, vocab = data()
    with in_cluster_form(form, device):
        check.lm_run("lstm", name, {}, train, held, vocab, cfg, device, "bf16", deadline, watch)
    return found or {"step": None, "note": "no non-finite step when read back every step (the "
                     "first run's NaN depends on the device running ahead of the host)"}


def nan_forms(section) -> dict:
    """Which forms gave a non-finite LSTM run, which did not, which did not run."""
    out = {"nonfinite": [], "finite": [], "not_run": []}
    for key, row in section["lstm"].items():
        if isinstance(row, dict) and "finite" in row:
            out["finite" if row["finite"] else "nonfinite"].append(key)
        else:
            out["not_run"].append(key)
    return out


# -- checks 2 and 3 -------------------------------------------------------------------------------

def layer_alone(name, options, V, H, precision, cfg, device, deadline, layers) -> dict:
    """``name`` alone, forward + backward and with an Adagrad step, V words, H inputs
    (``check.bench_layer``, the layer built once per settings in ``layers``)."""
    import torch
    key = (name, tuple(sorted(options.items())), V, H)
    sizes = {**cfg, "hidden": H}
    if key not in layers:
        layers.clear()  # one at a time: the device's memory
        vocab = check.zipf_vocab(V)
        layers[key] = check.make_layer(name, options, vocab, sizes, device) + (vocab,)
    layer, built, vocab = layers[key]
    plain = check.bench_layer(layer, vocab, sizes, device, precision, deadline)
    optimizer = torch.optim.Adagrad(layer.parameters(), lr=0.1)
    stepped = check.bench_layer(layer, vocab, sizes, device, precision, deadline,
                                after_backward=optimizer.step)
    return {"layer": plain["layer"], "fwd_bwd_ms": plain["ms"],
            "with_adagrad_ms": stepped["ms"], "tokens": sizes["batch"] * sizes["bptt"],
            "peak_mib": stepped["peak_mib"], "build_s": built}


def lm_tokens_per_s(name, overrides, precision, cfg, device, deadline, data) -> dict:
    train, held, vocab = data()
    row = check.lm_run("lstm", name, overrides, train, held, vocab, cfg, device, precision,
                       deadline)
    return {k: row[k] for k in ("layer", "tokens_per_s", "steps", "first_loss", "last_loss",
                                "heldout_ppl_after", "peak_mib", "ok")}


def semhuff_lm_settings(name) -> dict:
    from semhuff.lm.settings import LMSettings
    return {dev: LMSettings(output=name, device=dev).layer_settings() for dev in ("cuda", "cpu")}


def dense_over_sparse(section) -> dict:
    out = {}
    for precision in check.PRECISIONS:
        dense, sparse = (section["lstm"][f"{g} {precision}"] for g in ("dense", "sparse"))
        if isinstance(dense, dict) and isinstance(sparse, dict):
            out[f"lstm {precision}"] = dense["tokens_per_s"] / sparse["tokens_per_s"]
    return out or "skipped: a run it needs did not run"


def step_read_backs(cfg, device, data) -> dict:
    """A steady-state LSTM step (the trainer's: forward, backward, clip, Adagrad, after_step)
    with the binary self-organized layer as semhuff-lm makes it on this device, under the CUDA
    sync debug mode, after 3 warm-up steps, no re-assignment due."""
    if device.type != "cuda":
        raise Skip("needs CUDA (torch.cuda.set_sync_debug_mode)")
    train, _, vocab = data()
    model, layer, optimizer = check.lm_model("lstm", "self-organized-binary",
                                             {"reassign_every": 10 ** 6}, vocab, cfg, device)
    state = None
    batches = check.lm_batches(train, cfg["lm_bptt"], 4)
    for x, y, _ in batches:
        _, state, _ = check.lm_step(model, layer, optimizer, x, y, state, "fp32", device)
        if layer.steps == 3:
            break
    x, y, _ = next(batches)
    where = correctness.sync_points(
        lambda: check.lm_step(model, layer, optimizer, x, y, state, "fp32", device))
    return {"layer": layer.describe(), "syncs": where or None,
            "in_semhuff_lm": [w for w in where if "semhuff/lm/" in w] or None}


def layer_read_backs(options, device) -> dict:
    if device.type != "cuda":
        raise Skip("needs CUDA (torch.cuda.set_sync_debug_mode)")
    return correctness.read_backs("self-organized-binary", options, device)


# -- the plan and its runner ----------------------------------------------------------------------

def plan(cfg, device, deadline_of, result):
    """[(section, key, fn)] in the order they run; ``fn()`` gives the result's value."""
    memo, layers = {}, {}
    small = {**cfg, **cfg["in_cluster_lm"]}

    def data(sizes=cfg):
        key = tuple(sizes[k] for k in ("lm_vocab", "lm_batch", "lm_bptt", "lm_steps",
                                       "lm_heldout"))
        if key not in memo:
            memo[key] = check.lm_data(sizes, device)
        return memo[key]

    items = []
    s = "in_cluster_bf16"
    for probe, scale in PROBES.items():
        for name in TWO_LEVEL:
            items.append((s, ("same_batch", f"{name}, {probe}"),
                          lambda name=name, scale=scale: same_batch(name, scale, cfg, device)))
    for name, form in LSTM_RUNS:
        items.append((s, ("lstm", f"{name}, {form}"),
                      lambda name=name, form=form: in_cluster_lstm(
                          name, form, small, device, deadline_of("in_cluster_bf16"),
                          lambda: data(small))))
    items.append((s, ("nan_forms",), lambda: nan_forms(result["in_cluster_bf16"])))

    s = "dense_tree"
    items.append((s, ("semhuff_lm_settings",), lambda: semhuff_lm_settings("tree")))
    V = cfg["tree_vocab"]
    for H in cfg["tree_hidden"]:
        for grad in ("dense", "sparse"):
            for precision in check.PRECISIONS:
                items.append((s, ("layer_alone", f"V {V} H {H} {grad} {precision}"),
                              lambda H=H, grad=grad, precision=precision: layer_alone(
                                  "tree", {"sparse": grad == "sparse"}, V, H, precision, cfg,
                                  device, deadline_of("dense_tree"), layers)))
    for precision in check.PRECISIONS:
        for grad in ("dense", "sparse"):
            items.append((s, ("lstm", f"{grad} {precision}"),
                          lambda grad=grad, precision=precision: lm_tokens_per_s(
                              "tree", {"sparse": grad == "sparse"}, precision, cfg, device,
                              deadline_of("dense_tree"), data)))
    items.append((s, ("dense_over_sparse",), lambda: dense_over_sparse(result["dense_tree"])))

    s = "pinned_statistic"
    items.append((s, ("semhuff_lm_settings",),
                  lambda: semhuff_lm_settings("self-organized-binary")))
    for grad in ("dense", "sparse"):
        items.append((s, ("layer_read_backs", grad),
                      lambda grad=grad: layer_read_backs({"sparse": grad == "sparse"}, device)))
    items.append((s, ("step_read_backs",), lambda: step_read_backs(cfg, device, data)))
    V, H = cfg["binary_vocab"], cfg["binary_hidden"]
    for grad in ("dense", "sparse"):
        items.append((s, ("layer_alone", f"V {V} H {H} {grad} fp32"),
                      lambda grad=grad: layer_alone(
                          "self-organized-binary", {"sparse": grad == "sparse"}, V, H, "fp32",
                          cfg, device, deadline_of("pinned_statistic"), layers)))
    for precision in check.PRECISIONS:
        items.append((s, ("lstm", precision), lambda precision=precision: lm_tokens_per_s(
            "self-organized-binary", {}, precision, cfg, device,
            deadline_of("pinned_statistic"), data)))
    return items


def place(result, section, key, value) -> None:
    node = result[section]
    for part in key[:-1]:
        node = node.setdefault(part, {})
    node[key[-1]] = value


def write(path, result) -> None:
    """``result`` to ``path`` (when given), non-finite numbers as null (strict JSON)."""
    from semhuff.io_utils import json_safe
    if path:
        check.write_json(path, json_safe(result))


def brief(value, width=400) -> str:
    """One line: a result's fields, nested ones in brackets, floats to 4 significant digits;
    no layer descriptions (they are in the JSON)."""
    def wordy(v):
        return isinstance(v, str) and len(v) > 60 and not v.startswith("skipped")

    def shown(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        if isinstance(v, dict):
            return "(" + ", ".join(f"{k}={shown(x)}" for k, x in v.items() if not wordy(x)) + ")"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(shown(x) for x in v) + "]"
        return str(v)
    if not isinstance(value, dict):
        return str(value)[:width]
    line = "; ".join(f"{k}={shown(v)}" for k, v in value.items() if not wordy(v))
    return line if len(line) <= width else line[:width - 3] + "..."


def is_failure(section, key, value) -> bool:
    """A check that raised, or semhuff's own form (the float32 feed) wrong: not finite in an
    LSTM run, or not the loop's numbers on a batch. The old bf16 feed's NaN is a finding."""
    if not isinstance(value, dict):
        return False
    if "error" in value:
        return True
    if section != "in_cluster_bf16":
        return False
    if key[0] == "lstm":
        return FLOAT32_FEED in key[-1] and value.get("finite") is False
    ours = value.get(FLOAT32_FEED)
    return key[0] == "same_batch" and isinstance(ours, dict) and not (
        ours["finite"] and ours.get("max_rel_diff_vs_loop", math.inf) <= BF16_TOLERANCE)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m semhuff.eval.bench.lm_gpu_open",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--out", metavar="PATH", help="the JSON, rewritten after every result")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    p.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    p.add_argument("--time-budget", type=float, default=150.0, metavar="SECONDS",
                   help="skip what is left after this long")
    p.add_argument("--threads", type=int,
                   help="PyTorch's CPU threads (default: its own; --quick on a CPU: 1)")
    args = p.parse_args(argv)
    if args.time_budget <= 0:
        p.error("--time-budget must be positive")
    if args.device == "cpu":  # Triton's interpreter: read when Triton is imported (by torch)
        os.environ.setdefault("TRITON_INTERPRET", "1")
    started = time.perf_counter()
    import torch
    try:
        device = torch.device(args.device)
    except RuntimeError as exc:
        print(f"lm_gpu_open: --device {args.device}: {exc}", file=sys.stderr)
        return 2
    cfg = dict(QUICK if args.quick else FULL)
    if args.threads or (args.quick and device.type == "cpu"):
        torch.set_num_threads(args.threads or 1)  # the smoke test: on a shared machine, one
    result = {"device": str(device), "torch": torch.__version__, "cuda": torch.version.cuda,
              "triton": None, "quick": args.quick, "config": cfg, "seconds": None,
              "failures": [], "in_cluster_bf16": {}, "dense_tree": {}, "pinned_statistic": {}}
    try:
        import triton
        result["triton"] = triton.__version__
    except ImportError:
        result["triton"] = "skipped: not installed"
    if device.type == "cuda" and not torch.cuda.is_available():
        why = "skipped: no CUDA device here (--device cpu --quick is the smoke test)"
        for section in SHARES:
            result[section] = why
        print(f"lm_gpu_open: {why}")
        write(args.out, result)
        return 0
    if device.type == "cuda":
        result["device"] = torch.cuda.get_device_name(device)
    torch.sparse.check_sparse_tensor_invariants.disable()  # as the trainer: torch's own grads
    deadline = started + args.time_budget

    def deadline_of(section):
        return started + SHARES[section] * args.time_budget

    items = plan(cfg, device, deadline_of, result)
    for section, key, _ in items:
        place(result, section, key, NOT_REACHED)
    write(args.out, result)
    print(f"lm_gpu_open on {result['device']}, torch {torch.__version__}, triton "
          f"{result['triton']}; {'quick' if args.quick else 'full'} sizes", flush=True)
    for section, key, fn in items:
        t0 = time.perf_counter()
        if t0 > min(deadline, deadline_of(section)):
            value = f"skipped: out of the time budget ({args.time_budget:.0f} s)"
        else:
            try:
                value = fn()
                if isinstance(value, dict):
                    value["seconds"] = round(time.perf_counter() - t0, 2)
            except Skip as exc:
                value = f"skipped: {exc}"
            except check.OutOfTime:
                value = f"skipped: out of the time budget ({args.time_budget:.0f} s)"
            except Exception as exc:  # noqa: BLE001 - reported, the others still run
                value = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        if is_failure(section, key, value):
            result["failures"].append(f"{section} / {' / '.join(key)}")
        place(result, section, key, value)
        result["seconds"] = round(time.perf_counter() - started, 1)
        write(args.out, result)
        print(f"  {section} / {' / '.join(key)}: {brief(value)}", flush=True)
    failures = result["failures"]
    print(f"lm_gpu_open: {result['seconds']:.0f} s; " + (
        f"{len(failures)} failure(s): {failures}" if failures else "no failure"), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
