"""The one prepared GPU check of the language-model work (issue 35): run as it is by a session
with a lent GPU, in under 10 minutes on one H100.

    python eval/bench/lm_gpu_check.py --out lm_gpu_check.json        # on a CUDA machine
    python eval/bench/lm_gpu_check.py --device cpu --quick           # a smoke test anywhere

1. **The output layers alone** on the device: full softmax, PyTorch's adaptive softmax, the tree
   softmax (Huffman; dense and sparse weight gradient), the self-organized two-level and binary
   forms; V = 50,000 and 250,000 (Zipf counts), hidden 1024, batches of 64 x 128 = 8,192 tokens;
   float32 and bfloat16 (the input in bfloat16, as an autocast network's output, the layer
   under ``torch.autocast``). Per layer: forward + backward ms (median after warm-up, the device
   synchronised), tokens/s, x the full softmax, and the peak memory of the step
   (``torch.cuda.max_memory_allocated``, the weights included).
2. **A short LM run per layer and per network** (LSTM, Transformer) on synthetic ids (a random
   Markov chain over a Zipf-skewed vocabulary) on the device, the trainer's step (Adagrad 0.1,
   clip 0.25, the recurrent state carried detached, ``after_step`` after each step, the
   self-organized layers re-assigning every 100 steps), float32 and bfloat16 autocast: the loss
   must stay finite and fall (the mean of the last tenth of the steps below the first tenth's),
   and the held-out perplexity must fall.

Prints Markdown tables; ``--out PATH`` writes everything as JSON. Without a CUDA device (and
``--device cuda``, the default) it says so and exits 0 (the JSON, if asked for, says
``skipped``). Exit status 1 if a layer or a run failed (an error, a non-finite or rising loss),
after writing the rest. ``--time-budget`` (default 540 s) skips what is left, saying so, rather
than run past it. Only public ``semhuff.lm`` APIs are used: ``make_output_layer`` (weights
made on the device) and the networks.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time

import numpy as np

if __package__ in (None, ""):  # run as a file: the checkout's semhuff, not an installed one
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))))

LAYERS = (  # (label, make_output_layer name, options for the benchmark)
    ("full softmax", "full", {}),
    ("adaptive softmax", "adaptive", {}),
    ("tree (Huffman), dense grad", "tree", {"sparse": False}),
    ("tree (Huffman), sparse grad", "tree", {"sparse": True}),
    ("self-organized two-level", "self-organized", {}),
    ("class softmax, frequency bins", "class", {}),
    ("self-organized binary, sparse", "self-organized-binary", {"sparse": True}),
)
LM_LAYERS = (  # (label, make_output_layer name, options over LMSettings.layer_settings')
    ("full", "full", {}), ("adaptive", "adaptive", {}), ("tree", "tree", {}),
    ("tree sparse", "tree", {"sparse": True}), ("self-organized", "self-organized", {}),
    ("self-organized-binary", "self-organized-binary", {}))
NETWORKS = ("lstm", "transformer")
PRECISIONS = ("fp32", "bf16")

FULL = {"vocab": [50_000, 250_000], "hidden": 1024, "batch": 64, "bptt": 128, "repeats": 5,
        "warmup": 2, "lm_vocab": 20_000, "lm_hidden": 512, "lm_batch": 64, "lm_bptt": 64,
        "lm_steps": 300, "lm_heads": 8, "lm_layers": 2, "reassign_every": 100,
        "lm_heldout": 32_768}
QUICK = {"vocab": [400], "hidden": 32, "batch": 4, "bptt": 8, "repeats": 1, "warmup": 1,
         "lm_vocab": 120, "lm_hidden": 16, "lm_batch": 4, "lm_bptt": 8, "lm_steps": 30,
         "lm_heads": 2, "lm_layers": 1, "reassign_every": 7, "lm_heldout": 400}
# QUICK re-assigns every 7 of its 30 steps, not 5: at 5 the last re-assignment fell on the last
# step, and the binary layer's rows it resets were scored untrained (the smoke test failed on
# "held-out ppl 30.6 -> 30.6", a fact about the schedule, not a bug)


class OutOfTime(Exception):
    pass


def zipf_vocab(size: int):
    """``size`` words with counts ~ 1 / rank (ids in descending order of count)."""
    from semhuff.vocab import Vocab
    counts = np.maximum((1e9 / np.arange(1, size + 1)).astype(np.int64), 1)
    return Vocab([f"w{i}" for i in range(size)], counts, int(counts.sum()))


def markov_ids(V: int, n: int, seed: int = 1) -> np.ndarray:
    """``n`` ids of a first-order Markov chain: each word followed by one of 4 successors
    (probabilities 0.55, 0.25, 0.15, 0.05), the successors drawn Zipf-skewed, so a model that
    reads the previous word beats the unigram by far."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, V + 1)
    nxt = rng.choice(V, size=(V, 4), p=p / p.sum()).tolist()
    pick = rng.choice(4, size=n, p=[0.55, 0.25, 0.15, 0.05]).tolist()
    out, w = [0] * n, 0
    for i in range(n):
        w = nxt[w][pick[i]]
        out[i] = w
    return np.asarray(out, dtype=np.int64)


def frequency_vocab(ids: np.ndarray, V: int):
    """The ids renumbered in descending order of count (the adaptive and self-organized layers
    need it) and their Vocab."""
    from semhuff.vocab import Vocab
    counts = np.bincount(ids, minlength=V)
    order = np.argsort(-counts, kind="stable")
    rank = np.empty(V, np.int64)
    rank[order] = np.arange(V)
    sorted_counts = np.maximum(counts[order], 1)  # a word never drawn still gets a path
    return rank[ids], Vocab([f"w{i}" for i in range(V)], sorted_counts, int(sorted_counts.sum()))


def synchronize(device) -> None:
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def mib(n: int) -> float:
    return n / 2 ** 20


# -- 1. the layers alone ------------------------------------------------------------------------

def make_layer(name, options, vocab, cfg, device):
    from semhuff.lm import make_output_layer
    started = time.perf_counter()
    layer = make_output_layer(name, cfg["hidden"], vocab, device=device, seed=1, **options)
    return layer, time.perf_counter() - started


def bench_layer(layer, vocab, cfg, device, precision, deadline, after_backward=None):
    """Forward + backward of ``layer`` alone on one batch: median ms, peak memory.
    ``after_backward``: called inside the timed part after backward (an optimizer's step)."""
    import torch
    H, B, T = cfg["hidden"], cfg["batch"], cfg["bptt"]
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    weights = torch.cuda.memory_allocated(device) if cuda else None
    rng = np.random.default_rng(2)
    p = vocab.counts / vocab.counts.sum()
    target = torch.as_tensor(rng.choice(len(vocab.counts), size=(B, T), p=p), device=device)
    h = torch.randn(B, T, H, device=device)
    if precision == "bf16":  # as an autocast network's output
        h = h.bfloat16()
    h.requires_grad_()
    times = []
    for i in range(cfg["warmup"] + cfg["repeats"]):
        if time.perf_counter() > deadline:
            raise OutOfTime
        synchronize(device)
        t0 = time.perf_counter()
        with torch.autocast(device.type, torch.bfloat16, enabled=precision == "bf16"):
            loss = layer(h, target).loss
        loss.backward()
        if after_backward is not None:
            after_backward()
        synchronize(device)
        seconds = time.perf_counter() - t0
        value = float(loss.detach())
        if not math.isfinite(value):
            raise RuntimeError(f"non-finite loss {value}")
        if i >= cfg["warmup"]:
            times.append(seconds)
        layer.zero_grad(set_to_none=True)
        h.grad = None
    ms = 1e3 * statistics.median(times)
    return {"layer": layer.describe(), "ms": ms, "tokens_per_s": B * T / (ms / 1e3),
            "loss": value, "weights_mib": None if weights is None else mib(weights),
            "peak_mib": mib(torch.cuda.max_memory_allocated(device)) if cuda else None}


def layer_benchmark(cfg, device, deadline, failures):
    rows = []
    for V in cfg["vocab"]:
        vocab = zipf_vocab(V)
        full_ms = {}
        for label, name, options in picked(LAYERS, cfg.get("only_layers")):
            layer, error = None, None
            try:  # made once, timed in each precision
                layer, built = make_layer(name, options, vocab, cfg, device)
            except Exception as exc:  # noqa: BLE001 - reported, the others still run
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            for precision in picked(PRECISIONS, cfg.get("only_precisions")):
                row = {"V": V, "label": label, "name": name, "precision": precision}
                try:
                    if error is not None:
                        raise RuntimeError(error)
                    row.update(bench_layer(layer, vocab, cfg, device, precision, deadline),
                               build_s=built)
                except OutOfTime:
                    row["error"] = "skipped: out of the time budget"
                except Exception as exc:  # noqa: BLE001
                    row["error"] = (error or
                                    f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
                    failures.append(f"layer {label} V={V} {precision}: {row['error']}")
                if name == "full" and "ms" in row:
                    full_ms[precision] = row["ms"]
                if "ms" in row and precision in full_ms:
                    row["x_full"] = full_ms[precision] / row["ms"]
                rows.append(row)
                print(f"  {label:32s} V={V:>7,} {precision}: " + (
                    f"{row['ms']:9.2f} ms, peak {row['peak_mib'] or 0:,.0f} MiB" if "ms" in row
                    else row["error"]), flush=True)
            del layer
    # by V and precision; stable: the layers' order kept
    rows.sort(key=lambda r: (r["V"], PRECISIONS.index(r["precision"])))
    return rows


# -- 2. short LM runs ---------------------------------------------------------------------------

def build_network(arch, layer, V, cfg):
    from semhuff.lm.networks import LSTMLanguageModel
    H = cfg["lm_hidden"]
    if arch == "lstm":
        return LSTMLanguageModel(V, layer, emb=H, hidden=H)
    from semhuff.lm.transformer import TransformerLanguageModel
    return TransformerLanguageModel(V, layer, emb=H, hidden=H, layers=cfg["lm_layers"],
                                    heads=cfg["lm_heads"], max_len=cfg["lm_bptt"])


def heldout_nll(model, data, bptt, precision, device) -> float:
    """Mean -log P over the held-out rows (the state carried, as the trainer's evaluate)."""
    import torch
    model.eval()
    total, count, state = 0.0, 0, None
    with torch.no_grad(), torch.autocast(device.type, torch.bfloat16,
                                         enabled=precision == "bf16"):
        for t in range(0, data.shape[1] - 1, bptt):
            x, y = data[:, t:t + bptt], data[:, t + 1:t + 1 + bptt]
            out, state = model(x[:, :y.shape[1]], y, state)
            total -= float(out.output.double().sum())
            count += y.numel()
    model.train()
    return total / count


def lm_model(arch, name, overrides, vocab, cfg, device):
    """(the network over output layer ``name``, the layer, its Adagrad): the layer with
    semhuff-lm's own choice of its settings on this device, then ``overrides``."""
    import torch

    from semhuff.lm import make_output_layer
    from semhuff.lm.settings import LMSettings
    options = {**LMSettings(output=name, device=str(device)).layer_settings(), **overrides}
    if name.startswith("self-organized"):
        options.setdefault("reassign_every", cfg["reassign_every"])
    torch.manual_seed(1)
    layer = make_output_layer(name, cfg["lm_hidden"], vocab, device=device, seed=1, **options)
    model = build_network(arch, layer, len(vocab.counts), cfg).to(device)
    return model, layer, torch.optim.Adagrad(model.parameters(), lr=0.1)


def lm_batches(train, bptt, steps):
    """``steps`` (inputs, targets, whether the recurrent state starts afresh) of ``train``
    (batch, time), epoch after epoch."""
    t = 0
    for _ in range(steps):
        fresh = t + 1 >= train.shape[1]
        if fresh:
            t = 0  # the next epoch
        x, y = train[:, t:t + bptt], train[:, t + 1:t + 1 + bptt]
        t += bptt
        yield x[:, :y.shape[1]], y, fresh


def lm_step(model, layer, optimizer, x, y, state, precision, device, watch=None):
    """The trainer's step (Adagrad, clip 0.25, the recurrent state carried detached,
    ``after_step``): (the loss, on the device, the new state, whether the layer re-assigned).
    ``watch(model, x, y, state, loss)`` runs after backward, before the clip; a true answer
    stops there: (the loss, None, None), nothing stepped."""
    import torch

    from semhuff.lm import clip_grad_norm
    optimizer.zero_grad(set_to_none=True)
    if state is not None:  # networks.detach_state: (h, c), h, or None
        state = state.detach() if torch.is_tensor(state) else tuple(s.detach() for s in state)
    with torch.autocast(device.type, torch.bfloat16, enabled=precision == "bf16"):
        out, new_state = model(x, y, state)
    out.loss.backward()
    if watch is not None and watch(model, x, y, state, out.loss):
        return out.loss.detach(), None, None
    clip_grad_norm(model.parameters(), 0.25)
    optimizer.step()
    return out.loss.detach(), new_state, layer.after_step(optimizer) is not None


def lm_run(arch, name, overrides, train, held, vocab, cfg, device, precision, deadline,
           watch=None):
    """A short LM run (``lm_step`` ``cfg["lm_steps"]`` times; ``watch`` as there: the run
    stops where it says so, ``stopped`` then True)."""
    import torch
    model, layer, optimizer = lm_model(arch, name, overrides, vocab, cfg, device)
    bptt = cfg["lm_bptt"]
    before = heldout_nll(model, held, bptt, precision, device)
    losses, reassignments, state, stopped = [], 0, None, False
    synchronize(device)
    started = time.perf_counter()
    for x, y, fresh in lm_batches(train, bptt, cfg["lm_steps"]):
        if time.perf_counter() > deadline:
            raise OutOfTime
        loss, state, reassigned = lm_step(model, layer, optimizer, x, y,
                                          None if fresh else state, precision, device, watch)
        if reassigned is None:
            stopped = True
            break
        reassignments += reassigned
        losses.append(loss)
    synchronize(device)
    seconds = time.perf_counter() - started
    losses = [float(v) for v in losses]  # read back once, at the end
    after = heldout_nll(model, held, bptt, precision, device)
    tenth = max(1, len(losses) // 10)
    first, last = (statistics.fmean(losses[:tenth]), statistics.fmean(losses[-tenth:])) \
        if losses else (math.nan, math.nan)
    finite = all(math.isfinite(v) for v in losses) and math.isfinite(after)
    return {"layer": layer.describe(), "steps": len(losses), "stopped": stopped,
            "first_loss": first,
            "last_loss": last, "heldout_ppl_before": math.exp(min(before, 700)),
            "heldout_ppl_after": math.exp(min(after, 700)) if math.isfinite(after) else after,
            "tokens_per_s": len(losses) * x.numel() / seconds, "reassignments": reassignments,
            "peak_mib": mib(torch.cuda.max_memory_allocated(device))
            if device.type == "cuda" else None,
            "ok": bool(finite and last < first and after < before)}


def picked(items, wanted):
    """The items whose label (first field, or the item) contains one of ``wanted`` (all if
    None)."""
    def label(item):
        return item[0] if isinstance(item, tuple) else item
    return [i for i in items if wanted is None or any(w in label(i) for w in wanted)]


def lm_data(cfg, device):
    """(training ids (batch, time), held-out ids (rows, time), their Vocab) on ``device``: a
    Markov text over ``cfg["lm_vocab"]`` words, enough for 100 steps (the runs cycle)."""
    import torch

    from semhuff.lm.token_ids import batchify
    V = cfg["lm_vocab"]
    ids = markov_ids(V, cfg["lm_batch"] * cfg["lm_bptt"] * min(cfg["lm_steps"], 100)
                     + cfg["lm_heldout"] + 1)
    ids, vocab = frequency_vocab(ids, V)
    held_ids, train_ids = ids[:cfg["lm_heldout"]], ids[cfg["lm_heldout"]:]
    train = torch.as_tensor(batchify(train_ids, cfg["lm_batch"]), device=device)
    held = torch.as_tensor(batchify(held_ids, min(cfg["lm_batch"], 16)), device=device)
    return train, held, vocab


def lm_runs(cfg, device, deadline, failures):
    import torch
    train, held, vocab = lm_data(cfg, device)
    rows = []
    for arch in picked(NETWORKS, cfg.get("only_networks")):
        for precision in picked(PRECISIONS, cfg.get("only_precisions")):
            for label, name, overrides in picked(LM_LAYERS, cfg.get("only_lm_layers")):
                row = {"network": arch, "name": label, "precision": precision}
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats(device)
                try:
                    row.update(lm_run(arch, name, overrides, train, held, vocab, cfg, device,
                                      precision, deadline))
                    if not row["ok"]:
                        failures.append(f"LM {arch} {label} {precision}: loss "
                                        f"{row['first_loss']:.3f} -> {row['last_loss']:.3f}, "
                                        f"held-out ppl {row['heldout_ppl_before']:.1f} -> "
                                        f"{row['heldout_ppl_after']:.1f}")
                except OutOfTime:
                    row["error"] = "skipped: out of the time budget"
                except Exception as exc:  # noqa: BLE001
                    row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
                    failures.append(f"LM {arch} {label} {precision}: {row['error']}")
                rows.append(row)
                print(f"  {arch:11s} {label:22s} {precision}: " + (
                    f"loss {row['first_loss']:.3f} -> {row['last_loss']:.3f}, ppl "
                    f"{row['heldout_ppl_before']:.1f} -> {row['heldout_ppl_after']:.1f}, "
                    f"{row['tokens_per_s']:,.0f} tok/s" if "ok" in row else row["error"]),
                    flush=True)
    return rows


# -- report -------------------------------------------------------------------------------------

def _num(value, fmt):
    return "" if value is None else format(value, fmt)


def markdown(result) -> str:
    lines = [f"Device: {result['device']}; torch {result['torch']}; {result['seconds']:.0f} s.",
             "", "| V | layer | precision | fwd+bwd ms | tokens/s | x full | peak MiB |",
             "|---:|---|---|---:|---:|---:|---:|"]
    for r in result["layers"]:
        if "ms" in r:
            lines.append(f"| {r['V']:,} | {r['label']} | {r['precision']} | {r['ms']:,.2f} | "
                         f"{r['tokens_per_s']:,.0f} | {_num(r.get('x_full'), '.1f')} | "
                         f"{_num(r['peak_mib'], ',.0f')} |")
        else:
            lines.append(f"| {r['V']:,} | {r['label']} | {r['precision']} | {r['error']} "
                         f"| | | |")
    lines += ["", "| network | layer | precision | steps | loss first -> last | held-out ppl "
              "before -> after | tokens/s | re-assignments | peak MiB | ok |",
              "|---|---|---|---:|---|---|---:|---:|---:|---|"]
    for r in result["lm"]:
        if "ok" in r:
            lines.append(f"| {r['network']} | {r['name']} | {r['precision']} | {r['steps']} | "
                         f"{r['first_loss']:.3f} -> {r['last_loss']:.3f} | "
                         f"{r['heldout_ppl_before']:,.1f} -> {r['heldout_ppl_after']:,.1f} | "
                         f"{r['tokens_per_s']:,.0f} | {r['reassignments']} | "
                         f"{_num(r['peak_mib'], ',.0f')} | {'yes' if r['ok'] else 'NO'} |")
        else:
            lines.append(f"| {r['network']} | {r['name']} | {r['precision']} | {r['error']} "
                         f"| | | | | | |")
    return "\n".join(lines)


def write_json(path, result) -> None:
    from semhuff.io_utils import atomic_output
    with atomic_output(path, "w") as fh:
        json.dump(result, fh, indent=1)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    p.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    p.add_argument("--out", metavar="PATH", help="write the results as JSON")
    p.add_argument("--vocab", type=int, nargs="+", help="benchmark vocabulary sizes "
                   "(default 50000 250000; --quick 400)")
    p.add_argument("--hidden", type=int, help="benchmark hidden size (default 1024)")
    p.add_argument("--lm-steps", type=int, help="steps of each LM run (default 300)")
    p.add_argument("--threads", type=int, help="PyTorch's CPU threads (default: its own)")
    p.add_argument("--skip-layers", action="store_true", help="no layer benchmark")
    for flag, what in (("layers", "benchmarked layers"), ("lm-layers", "LM runs' layers"),
                       ("networks", "networks"), ("precisions", "precisions")):
        p.add_argument(f"--{flag}", type=lambda t: t.split(","), metavar="A,B",
                       dest="only_" + flag.replace("-", "_"),
                       help=f"only the {what} whose label contains one of these")
    p.add_argument("--skip-lm", action="store_true", help="no LM runs")
    p.add_argument("--time-budget", type=float, default=540.0, metavar="SECONDS",
                   help="skip what is left after this long")
    args = p.parse_args(argv)
    import torch
    started = time.perf_counter()
    deadline = started + args.time_budget
    try:
        device = torch.device(args.device)
    except RuntimeError as exc:
        print(f"lm_gpu_check: --device {args.device}: {exc}", file=sys.stderr)
        return 2
    if device.type == "cuda" and not torch.cuda.is_available():
        message = ("no CUDA device here: the GPU check is skipped (run it on a machine with a "
                   "GPU; --device cpu --quick is the smoke test)")
        print(f"lm_gpu_check: {message}")
        if args.out:
            write_json(args.out, {"skipped": message, "torch": torch.__version__})
        return 0
    cfg = dict(QUICK if args.quick else FULL)
    for key in ("vocab", "hidden", "lm_steps", "only_layers", "only_lm_layers",
                "only_networks", "only_precisions"):
        if getattr(args, key) is not None:
            cfg[key] = getattr(args, key)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.sparse.check_sparse_tensor_invariants.disable()  # as the trainer: torch's own grads
    torch.manual_seed(1)
    name = (torch.cuda.get_device_name(device) if device.type == "cuda"
            else f"cpu ({torch.get_num_threads()} threads)")
    print(f"lm_gpu_check on {name}, torch {torch.__version__}; "
          f"{'quick' if args.quick else 'full'} sizes: {cfg}", flush=True)
    failures: list = []
    result = {"device": name, "torch": torch.__version__, "config": cfg, "layers": [],
              "lm": []}
    if not args.skip_layers:
        print("output layers alone (forward + backward):", flush=True)
        result["layers"] = layer_benchmark(cfg, device, deadline, failures)
    if not args.skip_lm:
        print("short LM runs:", flush=True)
        result["lm"] = lm_runs(cfg, device, deadline, failures)
    result["seconds"] = time.perf_counter() - started
    result["failures"] = failures
    result["skipped"] = sum("skipped" in r.get("error", "") for r in
                            result["layers"] + result["lm"])
    print()
    print(markdown(result))
    if result["skipped"]:
        print(f"\n{result['skipped']} item(s) skipped: the time budget "
              f"({args.time_budget:.0f} s) ran out")
    if failures:
        print(f"\n{len(failures)} failure(s):\n  " + "\n  ".join(failures))
    if args.out:
        write_json(args.out, result)
    return 1 if failures else 0


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        sys.exit(main())
