"""The LM output layers' correctness on a GPU (issue 34), the part of the prepared GPU check
that is not timing: run by a session with a lent GPU, in about a minute.

    python eval/bench/lm_gpu_correctness.py --out lm_gpu_correctness.json   # on a CUDA machine
    python eval/bench/lm_gpu_correctness.py --device cpu                     # a smoke test

Per registered layer (and the tree's dense / sparse gradient, a deep tree):

1. **the same numbers on the device**: a layer made on the CPU and its ``copy.deepcopy(...)
   .to(device)``: loss, input gradient and weight gradients equal (float32, 1e-4 relative);
2. **no host read-back**: one steady-state forward + backward under
   ``torch.cuda.set_sync_debug_mode("error")`` (CUDA only): which layers synchronise, and where;
3. **torch.compile**: the compiled loss equals eager over 30 batches of varying targets, and
   no graph is compiled after the first 5 batches (the graphs are counted: a graph break
   inside the layer makes a graph per frame on the stack, a fixed number);
4. **Triton path kernels vs the static torch form** on the device (a depth-40 tree): scores and
   gradients, and their times;
5. **full distributions**: ``log_prob`` of 256 rows, tree vs adaptive softmax, V 50,000, H 512.

Prints one line per check and a summary; ``--out`` writes JSON. Exit status 1 if a check that
must hold (1, 3, 4) failed; the read-backs of 2 are reported, not failed on (the two-level
layers' one read-back a batch is documented in ``semhuff/lm/class_softmax.py``).
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time

import numpy as np

if __package__ in (None, ""):  # run as a file: the checkout's semhuff, not an installed one
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))

CASES = (  # (label, make_output_layer name, options)
    ("full", "full", {}),
    ("adaptive", "adaptive", {}),
    ("tree huffman dense", "tree", {"sparse": False}),
    ("tree huffman sparse", "tree", {"sparse": True}),
    ("tree random", "tree", {"tree": "random"}),
    ("class", "class", {}),
    ("self-organized", "self-organized", {}),
    ("self-organized-binary", "self-organized-binary", {"sparse": True}),
)


def zipf_vocab(V: int):
    from semhuff.vocab import Vocab
    counts = np.maximum((1e9 / np.arange(1, V + 1)).astype(np.int64), 1)
    return Vocab([f"w{i}" for i in range(V)], counts, int(counts.sum()))


def deep_vocab(V: int):
    """Counts halving for the first 40 words: a Huffman tree about 40 + log2(V - 40) deep."""
    from semhuff.vocab import Vocab
    counts = np.ones(V, np.int64)
    counts[:40] = 2 ** np.arange(60, 20, -1, dtype=np.int64)
    return Vocab([f"w{i}" for i in range(V)], counts, int(counts.sum()))


def batch(V, H, N, device, seed):
    import torch
    g = torch.Generator().manual_seed(seed)
    p = 1.0 / torch.arange(1, V + 1, dtype=torch.float64)
    target = torch.multinomial(p / p.sum(), N, replacement=True, generator=g)
    h = torch.randn(N, H, generator=g)
    return h.to(device), target.to(device)


def grads(layer, h, target):
    """(loss, dL/dh, {name: dense weight gradient}) of one forward + backward."""
    layer.zero_grad(set_to_none=True)
    h = h.detach().clone().requires_grad_()
    loss = layer(h, target).loss
    loss.backward()
    out = {}
    for name, p in layer.named_parameters():
        if p.grad is not None:
            out[name] = (p.grad.to_dense() if p.grad.is_sparse else p.grad).float().cpu()
    return float(loss.detach()), h.grad.float().cpu(), out


def rel(a, b) -> float:
    import torch
    a, b = torch.as_tensor(a).double(), torch.as_tensor(b).double()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))


def same_numbers(name, options, device, V=3000, H=64, N=1024):
    from semhuff.lm import make_output_layer
    cpu = make_output_layer(name, H, zipf_vocab(V), seed=1, **options)
    dev = copy.deepcopy(cpu).to(device)
    h, target = batch(V, H, N, "cpu", 3)
    want = grads(cpu, h, target)
    got = grads(dev, h.to(device), target.to(device))
    worst = max([rel(got[0], want[0]), rel(got[1], want[1])]
                + [rel(got[2][k], want[2][k]) for k in want[2]])
    return {"max_rel_diff": worst, "ok": worst < 1e-4}


def sync_points(fn) -> list:
    """``fn()`` under the CUDA sync debug mode ("warn"): the Python lines (file:line) of the
    calls that waited for the device, each once, in order."""
    import warnings

    import torch
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn()
    finally:
        torch.cuda.set_sync_debug_mode(0)
    return sorted({f"{os.path.relpath(w.filename)}:{w.lineno}" for w in caught
                   if "synchroniz" in str(w.message)})


def read_backs(name, options, device, V=3000, H=64, N=1024):
    """A steady-state forward + backward under the CUDA sync debug mode: the Python lines of
    the synchronising calls, or None."""
    from semhuff.lm import make_output_layer
    layer = make_output_layer(name, H, zipf_vocab(V), seed=1, device=device, **options)
    for seed in (4, 5):  # warm-up: caches, workspaces
        grads(layer, *batch(V, H, N, device, seed))
    h, target = batch(V, H, N, device, 6)
    h.requires_grad_()
    return {"syncs": sync_points(lambda: layer(h, target).loss.backward()) or None}


def compiled(name, options, device, V=600, H=32, N=256, steps=30):
    import torch
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    from semhuff.lm import make_output_layer
    layer = make_output_layer(name, H, zipf_vocab(V), seed=1, device=device, **options)
    body = torch.nn.Linear(H, H).to(device)

    def loss_of(x, t):
        return layer(torch.tanh(body(x)), t).loss

    dynamo.reset()
    counters.clear()
    fn = torch.compile(loss_of)
    worst, started, warm = 0.0, time.perf_counter(), None
    for i in range(steps):
        x, t = batch(V, H, N, device, 100 + i)
        got = fn(x, t)
        got.backward()
        if i == 4:  # the first calls fill caches (a recompile or two); none may follow
            warm = int(counters["stats"]["unique_graphs"])
        if i % 10 == 9:
            worst = max(worst, rel(got.detach(), loss_of(x, t).detach()))
    seconds = time.perf_counter() - started
    graphs = int(counters["stats"]["unique_graphs"])
    dynamo.reset()
    return {"max_rel_diff": worst, "graphs_after_5": warm, "graphs": graphs,
            "seconds": seconds, "ok": worst < 1e-4 and graphs == warm}


def timed(fn, device, repeats=5):
    import torch
    fn()
    out = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(out)


def triton_vs_torch(device, V=5000, H=256, N=4096):
    """The tree layer's scores and gradients by the Triton kernels and by the static torch
    form (``SEMHUFF_TRITON=0``), on a tree ~40 deep."""
    from semhuff.lm import make_output_layer
    from semhuff.lm import paths
    if device.type != "cuda":
        return {"skipped": "not a CUDA device"}
    rows = []
    for sparse in (False, True):
        layer = make_output_layer("tree", H, deep_vocab(V), seed=1, device=device,
                                  sparse=sparse)
        h, target = batch(V, H, N, device, 7)
        depth = int(paths.path_buffers(layer.tree)[2].max())
        result = {}
        for form, flag in (("triton", "1"), ("torch", "0")):
            os.environ["SEMHUFF_TRITON"] = flag
            result[form] = grads(layer, h, target)
            result[form + "_ms"] = timed(lambda: grads(layer, h, target), device)
        os.environ.pop("SEMHUFF_TRITON", None)
        a, b = result["triton"], result["torch"]
        worst = max([rel(a[0], b[0]), rel(a[1], b[1])] + [rel(a[2][k], b[2][k]) for k in b[2]])
        rows.append({"sparse": sparse, "depth": depth, "max_rel_diff": worst,
                     "triton_ms": result["triton_ms"], "torch_ms": result["torch_ms"],
                     "ok": worst < 1e-5})
    return {"rows": rows, "ok": all(r["ok"] for r in rows)}


def full_distribution(device, V=50_000, H=512, N=256):
    import torch

    from semhuff.lm import make_output_layer
    vocab = zipf_vocab(V)
    h = torch.randn(N, H, device=device)
    out = {}
    for name in ("full", "adaptive", "tree"):
        layer = make_output_layer(name, H, vocab, seed=1, device=device)
        with torch.no_grad():
            total = layer.log_prob(h).exp().sum(1)
            out[name + "_ms"] = timed(lambda: layer.log_prob(h), device)
        out[name + "_sums_to_one"] = float((total - 1).abs().max())
    out["tree_over_adaptive"] = out["tree_ms"] / out["adaptive_ms"]
    return out


def run_check(label, fn, failures, must_hold=True, deadline=None):
    started = time.perf_counter()
    try:
        if deadline is not None and started > deadline:
            raise TimeoutError("skipped: out of the time budget")
        row = fn()
    except Exception as exc:  # noqa: BLE001 - reported, the others still run
        row = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}", "ok": False}
    row["seconds"] = round(time.perf_counter() - started, 2)
    if must_hold and row.get("ok") is False:
        failures.append(label)
    shown = {k: (round(v, 8) if isinstance(v, float) else v) for k, v in row.items()}
    print(f"  {label}: {shown}", flush=True)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", metavar="PATH")
    p.add_argument("--cases", type=lambda t: t.split(","), metavar="A,B",
                   help="only the layers whose label contains one of these")
    p.add_argument("--skip-compile", action="store_true", help="no torch.compile checks")
    p.add_argument("--skip-extras", action="store_true",
                   help="no Triton-vs-torch and log_prob checks")
    p.add_argument("--time-budget", type=float, default=150.0, metavar="SECONDS",
                   help="skip the torch.compile checks left after this long")
    args = p.parse_args(argv)
    deadline = time.perf_counter() + args.time_budget
    import torch
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("lm_gpu_correctness: no CUDA device here: skipped (--device cpu is the smoke test)")
        return 0
    torch.sparse.check_sparse_tensor_invariants.disable()
    print(f"lm_gpu_correctness on {device} (torch {torch.__version__})", flush=True)
    failures, result = [], {"device": str(device), "torch": torch.__version__}
    for label, name, options in CASES:
        if args.cases and not any(c in label for c in args.cases):
            continue
        row = result.setdefault(label, {})
        if device.type != "cpu":
            row["same_numbers"] = run_check(f"{label}: CPU vs {device}", lambda: same_numbers(
                name, options, device), failures)
        if device.type == "cuda":
            row["read_backs"] = run_check(f"{label}: read-backs", lambda: read_backs(
                name, options, device), failures, must_hold=False)
        if not args.skip_compile:
            row["compiled"] = run_check(f"{label}: torch.compile", lambda: compiled(
                name, options, device), failures, deadline=deadline)
    if not args.skip_extras:
        result["triton"] = run_check("Triton vs torch path form",
                                     lambda: triton_vs_torch(device), failures)
        result["log_prob"] = run_check("full log_prob, V 50k",
                                       lambda: full_distribution(device), failures,
                                       must_hold=False)
    result["failures"] = failures
    print(f"{len(failures)} failure(s): {failures}" if failures else "all checks hold")
    if args.out:
        from semhuff.io_utils import atomic_output
        with atomic_output(args.out, "w") as fh:
            json.dump(result, fh, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
