"""The GPU trainer against the CPU trainer: speed and quality, same corpus, same settings.

    python -m semhuff.eval.bench.gpu_training [--backend numba|cupy] [--tokens N] [--epochs E]
                                     [--batch-pairs N] [--no-damping] [--loss hs|ns] [--json OUT]

Trains the CPU trainer (all cores, Hogwild) and ``--device cuda`` with identical settings
(skip-gram, dim 100, window 5, min_count 5, sample 1e-3, alpha 0.025 -> 0.0001, Huffman tree) on
a prefix of the shared corpus, and prints the GPU it ran on, raw words/s (all epochs, and the
epochs after the first, which read ids from the cache instead of tokenising), pairs/s, the
device's peak memory in use, WS353 / SimLex Spearman and Google analogy accuracy (top 30k
words) of both, and the issue's targets: >= 10M words/s, >= 5x the CPU trainer, quality within
1 analogy point and 0.02 Spearman of the CPU run. Kernel compilation is excluded from the timings
and printed separately. Without a usable GPU it says so in one line and exits with code 2.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile

from semhuff.eval.bench.train import (add_corpus_options, layer_settings, parse_bench_args, quality,
                                      write_prefix)
from semhuff.model import default_workers

TARGET_WORDS_PER_S = 10e6
TARGET_SPEEDUP = 5.0
TARGET_ANALOGY = 0.01   # accuracy, i.e. 1 point
TARGET_SPEARMAN = 0.02


def train(path, tokens, args, device: str) -> dict:
    from semhuff import Word2Vec
    gpu = device == "cuda"
    options = {"batch_pairs": args.batch_pairs} if gpu and args.batch_pairs else {}
    if gpu and args.no_damping:
        options["damping"] = False
    model = Word2Vec(vector_size=args.dim, window=5, min_count=5, sample=1e-3, sg=1,
                     loss=args.loss, **layer_settings(args.loss, args), alpha=0.025,
                     min_alpha=0.0001,
                     epochs=args.epochs, workers=args.threads, seed=args.seed, progress=False,
                     device=device, backend=args.backend if gpu else None,
                     device_options=options)
    model.build_vocab(path)
    report = model.train(path)
    later = report.epochs[1:]
    later_s = sum(e.seconds for e in later)
    out = {"device": device, "seconds": report.seconds, "compile_s": report.compile_seconds,
           "words_per_s": report.words_per_second,
           "later_epochs_words_per_s": sum(e.raw_words for e in later) / later_s if later_s else None,
           "pairs": sum(e.pairs for e in report.epochs),
           "pairs_per_s": sum(e.pairs for e in report.epochs) / report.seconds,
           "loss_per_pair": report.epochs[-1].loss_per_pair, "vocab": len(model.vocab),
           **_quality(model.wv)}
    if report.device_stats:
        stats = report.device_stats
        out.update(gpu_name=stats["device"], backend=stats["backend"],
                   peak_memory_mib=stats["peak_memory_bytes"] / 2**20,
                   model_mib=stats["model_bytes"] / 2**20, batches=stats["batches"],
                   device_busy_s=stats["device_seconds"])
    del model
    gc.collect()
    return out


def _quality(kv) -> dict:
    try:
        return quality(kv)
    except ValueError:  # a tiny smoke-test corpus: no evaluation pair in the vocabulary
        return {"ws353": float("nan"), "simlex": float("nan"), "analogy": float("nan")}


def targets(cpu: dict, gpu: dict) -> list:
    """(what, measured, target, met) for the issue's targets."""
    speedup = gpu["words_per_s"] / cpu["words_per_s"]
    rows = [("GPU words/s", f"{gpu['words_per_s']:,.0f}", f">= {TARGET_WORDS_PER_S:,.0f}",
             gpu["words_per_s"] >= TARGET_WORDS_PER_S),
            ("GPU / CPU trainer", f"{speedup:.1f}x", f">= {TARGET_SPEEDUP:.0f}x",
             speedup >= TARGET_SPEEDUP),
            ("analogy, GPU - CPU", f"{gpu['analogy'] - cpu['analogy']:+.3f}",
             f">= -{TARGET_ANALOGY}", gpu["analogy"] - cpu["analogy"] >= -TARGET_ANALOGY)]
    for key, name in (("ws353", "WS353"), ("simlex", "SimLex")):
        diff = gpu[key] - cpu[key]
        rows.append((f"{name} Spearman, GPU - CPU", f"{diff:+.3f}", f">= -{TARGET_SPEARMAN}",
                     diff >= -TARGET_SPEARMAN))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_options(p)
    p.add_argument("--loss", default="hs", choices=["hs", "ns"])
    p.add_argument("--backend", default="numba", choices=["numba", "cupy"])
    p.add_argument("--batch-pairs", type=int, help="pairs per GPU batch (default: the device's)")
    p.add_argument("--no-damping", action="store_true",
                   help="turn the stale-sum damping off (an experiment: large batches diverge)")
    p.add_argument("--threads", type=int, default=default_workers(),
                   help="CPU trainer threads, and the GPU session's pair-generating threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--skip-cpu", action="store_true", help="train on the GPU only")
    args = parse_bench_args(p, argv, "bench_gpu")
    if args is None:
        return 2
    from semhuff.devices import make_device
    from semhuff.errors import SemhuffError
    try:
        device = make_device("cuda", args.backend)
    except SemhuffError as exc:
        print(f"bench_gpu: {exc}", file=sys.stderr)
        return 2
    gpu_name = device.backend.device_name()
    print(f"device: {gpu_name} (backend {args.backend}); CPU: {os.cpu_count()} cores, "
          f"{args.threads} threads", flush=True)
    results = {}
    with tempfile.TemporaryDirectory(prefix="semhuff-bench-gpu-") as folder:
        path, tokens = write_prefix(args.corpus, args.tokens, folder)
        print(f"corpus: {args.corpus}, {tokens:,} tokens; skip-gram {args.loss} dim {args.dim} "
              f"window 5 min_count 5 sample 1e-3, {args.epochs} epochs, seed {args.seed}",
              flush=True)
        for name in (("cuda",) if args.skip_cpu else ("cpu", "cuda")):
            results[name] = train(path, tokens, args, name)
            print_run(results[name], flush=True)
    if "cpu" in results:
        print("\ntargets (issue 9):")
        for what, got, want, met in targets(results["cpu"], results["cuda"]):
            print(f"  {what:28} {got:>14}  target {want:<14} {'met' if met else 'NOT met'}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "tokens": tokens, "device": gpu_name,
                       "results": results}, fh, indent=1)
    return 0


def print_run(r: dict, flush=False) -> None:
    later = r["later_epochs_words_per_s"]
    line = (f"{r['device']:4}: {r['words_per_s']:>12,.0f} words/s"
            + (f" ({later:,.0f} after epoch 1)" if later else "")
            + f", {r['pairs_per_s']:,.0f} pairs/s, {r['seconds']:.1f} s (+{r['compile_s']:.1f} s "
            f"compiling); WS353 {r['ws353']:.3f} SimLex {r['simlex']:.3f} analogy "
            f"{r['analogy']:.3f}; loss/pair {r['loss_per_pair']:.4f}")
    if "gpu_name" in r:
        line += (f"\n      {r['gpu_name']} ({r['backend']}): peak memory in use "
                 f"{r['peak_memory_mib']:,.0f} MiB (weights {r['model_mib']:,.0f} MiB), "
                 f"{r['batches']:,} batches, device busy {r['device_busy_s']:.1f} s")
    print(line, flush=flush)


if __name__ == "__main__":
    sys.exit(main())
