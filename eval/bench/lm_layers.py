"""Speed of the language-model output layers (``semhuff.lm``) side by side, the layer alone.

    python -m semhuff.eval.bench.lm_layers [--vocab-size 50000] [--hidden 512] [--batch 128]
        [--bptt 20] [--threads 2] [--repeats 7] [--corpus PATH | --zipf] [--thp] [--device cpu]

Every layer gets the same batch: ``batch x bptt`` hidden vectors (random, requiring a gradient
as an LSTM's output would) and targets drawn from the vocabulary's unigram distribution, so
tree paths have their real lengths. The vocabulary: the ``--vocab-size`` most frequent words of
``--corpus``, by default the shared corpus (``semhuff.data_paths.shared_corpus()``, i.e.
``$SEMHUFF_DATA/corpus/corpus.txt.gz``) when it is there, else (or with ``--zipf``) a Zipf count
vector over ``--vocab-size`` words. Timed, per layer, median over ``--repeats``
after two warm-up rounds, the layers taken in turn within each round (the machine's load
then weighs on all alike):

* forward + backward of the output layer alone;
* the same plus an Adagrad step (sparse gradients where the layer gives them: Adagrad then
  updates only the touched rows; dense otherwise, touching all V x D).

``--thp`` sets ``THP_MEM_ALLOC_ENABLE=1`` (PyTorch's CPU allocator then asks for transparent
huge pages for large arrays: a fresh 100 MB array costs far fewer page faults); all layers run
under the same setting, printed in the header.

Layers: full softmax; torch's AdaptiveLogSoftmaxWithLoss (cutoffs ``default_cutoffs``: 4% and
20% of V, div_value 4); tree softmax over the Huffman tree (sparse and dense gradient, and, for
reference, the plain autograd form ``NaiveTreeSoftmax``: what the custom forward and backward
of ``semhuff.lm.kernels.paths`` gain over it); issue 45's flat head with a tree below (head
2% and 4% of V) and flat clusters with a tree inside; the
class softmax over frequency-binned clusters; the self-organized softmax, two-level and binary
(the statistic included; a re-assignment, every 1,000 steps, timed apart and shown amortised).
Also: the tree softmax's static form (paths padded to the tree's depth, nothing read back to
the host: the form off the CPU), the adaptive and tree softmax under
``torch.autocast(bfloat16)`` with a bfloat16 input, and under ``torch.compile(layer)``
(``--modes`` picks among these); per layer the full ``log_prob`` of ``--log-prob-rows`` rows,
and the tree's former sparse-product ``log_prob`` for reference; the generation table:
``predict``, ``topk(10)``, ``sample`` of ``--generation-rows`` rows, one row's ``log_prob``.
Prints ms and tokens/s and the ratios to the full and the adaptive softmax (the issue's
targets: tree softmax forward + backward >= 20x the full softmax and >= 2x the adaptive one;
issue 34: the tree's full log_prob <= 2x the adaptive softmax's).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

ARMS = (  # (label, factory name, options, how it runs: see MODES)
    ("full softmax", "full", {}, ""),
    ("adaptive softmax", "adaptive", {}, ""),
    ("tree (Huffman), sparse grad", "tree", {"sparse": True}, ""),
    ("tree (Huffman), dense grad", "tree", {"sparse": False}, ""),
    # the form without read-back (the one off the CPU), timed on the CPU against the bucketed
    ("tree (Huffman), sparse, static", "tree", {"sparse": True}, "static"),
    ("tree (Huffman), dense, static", "tree", {"sparse": False}, "static"),
    ("tree (Huffman), naive autograd", "naive-tree", {}, ""),
    # a batch touches nearly every word row of the two-level forms (whole clusters): their
    # gradient is dense (measured: sparse was faster without the optimizer, 1.6x slower with it)
    ("class (frequency bins)", "class", {}, ""),
    ("self-organized two-level", "self-organized", {}, ""),
    ("self-organized binary, sparse", "self-organized-binary", {"sparse": True}, ""),
    # issue 45: a flat head of the most frequent words (2% and 4% of V: the adaptive softmax's
    # head is 4%), the other words in a Huffman tree below one entry
    ("head-tree, head 2% of V, sparse", "head-tree", {"sparse": True, "head": 0.02}, ""),
    ("head-tree, head 4% of V, sparse", "head-tree", {"sparse": True, "head": 0.04}, ""),
    ("head-tree, head 2% of V, dense", "head-tree", {"sparse": False, "head": 0.02}, ""),
    ("class-tree (sqrt V clusters), no head, sparse", "class-tree", {"sparse": True, "head": 0},
     ""),
    # the default since issue 45's text8 runs (class-tree-head-boot): the 2% most frequent words
    # entries of their own
    ("class-tree (sqrt V clusters), head 2% of V, sparse", "class-tree",
     {"sparse": True, "head": 0.02}, ""),
    ("organized-tree (head 2%), sparse", "organized-tree", {"sparse": True}, ""),
    # mixed precision: the input in bfloat16 (as an autocast LSTM's output), the layer run
    # under torch.autocast(bfloat16)
    ("adaptive softmax, autocast bf16", "adaptive", {}, "bf16"),
    ("tree (Huffman), sparse, autocast bf16", "tree", {"sparse": True}, "bf16"),
    ("tree (Huffman), dense, autocast bf16", "tree", {"sparse": False}, "bf16"),
    # torch.compile(layer) (the compile itself in the warm-up rounds; sparse=True compiles not)
    ("adaptive softmax, compiled", "adaptive", {}, "compile"),
    ("tree (Huffman), dense, compiled", "tree", {"sparse": False}, "compile"),
)
MODES = {"": "eager, float32", "static": "eager, float32, paths padded to the tree's depth "
         "(no read-back)", "bf16": "torch.autocast(bfloat16), bfloat16 input",
         "compile": "torch.compile(layer)"}


def zipf_vocab(size: int):
    from semhuff.vocab import Vocab
    counts = np.maximum((1e9 / np.arange(1, size + 1)).astype(np.int64), 1)
    return Vocab([f"w{i}" for i in range(size)], counts, int(counts.sum()))


def corpus_vocab(path: str, size: int):
    from semhuff import Corpus
    from semhuff.vocab import Vocab
    return Vocab.build(Corpus(path), min_count=1, max_final_vocab=size, workers=2)


class NaiveTreeSoftmax:
    """The p-tHSM form in plain autograd, for reference: gather the padded (N, depth, D) path
    rows, one bmm, log-sigmoid, masked sum; a dense weight gradient."""

    def __new__(cls, in_features, vocab):
        import torch

        from semhuff.lm.layers.tree import TreeSoftmax
        from semhuff.trees import make_tree

        class Naive(TreeSoftmax):
            def target_log_prob(self, h, target, keep=None):
                rows = self.weight[self.points[target]]
                scores = torch.bmm(rows, h.unsqueeze(2)).squeeze(2)
                signs = self.signs[target]
                return torch.where(signs != 0, torch.nn.functional.logsigmoid(scores * signs),
                                   0).sum(1)

            def describe(self):
                return "the same tree softmax in plain autograd (reference)"

        return Naive(in_features, make_tree("huffman", vocab))


def one_step(layer, optimizer, h, target, mode=""):
    import contextlib

    import torch

    from semhuff.lm.kernels import paths
    paths.BUCKETS_ON_CPU = mode != "static"
    if mode == "bf16":
        h = h.detach().bfloat16().requires_grad_()
    amp = torch.autocast(h.device.type, torch.bfloat16) if mode == "bf16" else \
        contextlib.nullcontext()
    started = time.perf_counter()
    with amp:
        out = layer(h, target)
    out.loss.backward()
    if optimizer is not None:
        optimizer.step()
    if h.is_cuda:
        import torch
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    layer.zero_grad(set_to_none=True)
    h.grad = None
    paths.BUCKETS_ON_CPU = True
    return seconds


def log_prob_time(layer, h, mode=""):
    """Seconds of one ``log_prob`` of ``h`` (no gradient)."""
    import torch
    if mode == "bf16":
        h = h.bfloat16()
    started = time.perf_counter()
    with torch.no_grad(), torch.autocast(h.device.type, torch.bfloat16, enabled=mode == "bf16"):
        layer.log_prob(h)
    if h.is_cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - started


GENERATION = (  # (what, call(layer, rows, generator)): generation, no whole distribution asked
    ("predict", lambda layer, h, g: layer.predict(h)),
    ("topk(10)", lambda layer, h, g: layer.topk(h, 10)),
    ("sample", lambda layer, h, g: layer.sample(h, generator=g)),
    ("sample top_k 50", lambda layer, h, g: layer.sample(h, top_k=50, generator=g)),
    ("log_prob of 1 row", lambda layer, h, g: layer.log_prob(h[:1])),
)


def generation_table(layers: dict, rows, repeats: int) -> None:
    """Issue 44's rows: each eager float32 layer's ``predict``, ``topk(10)``, ``sample`` (and
    with top_k 50) of ``rows`` and one row's whole ``log_prob``, medians of ``repeats`` after a
    warm-up round (the layers in turn within a round), with the ratio to the adaptive softmax
    (> 1: faster). The rows' distributions: their mean entropy and most probable word's mass."""
    import torch
    g = torch.Generator().manual_seed(1)
    times = {label: {what: [] for what, _ in GENERATION} for label in layers}
    for round_ in range(repeats + 1):
        for label, layer in layers.items():
            for what, call in GENERATION:
                started = time.perf_counter()
                with torch.no_grad():
                    call(layer, rows, g)
                if rows.is_cuda:
                    torch.cuda.synchronize()
                if round_:
                    times[label][what].append(time.perf_counter() - started)
    med = {label: {w: statistics.median(t) for w, t in by.items()} for label, by in times.items()}
    ref = med.get("adaptive softmax")
    print(f"\ngeneration, {rows.shape[0]} rows (ms, and x adaptive: > 1 faster)")
    print(f"{'layer':38s} {'entropy':>7s} {'top-1':>6s}"
          + "".join(f" | {what:>17s} {'x':>5s}" for what, _ in GENERATION))
    for label, layer in layers.items():
        with torch.no_grad():
            lp = layer.log_prob(rows).float()
        entropy = float(-(lp.exp() * lp).sum(1).mean())
        top = float(lp.max(1).values.exp().mean())
        line = f"{label:38s} {entropy:7.2f} {top:6.3f}"
        for what, _ in GENERATION:
            m = med[label][what]
            line += f" | {1e3 * m:17.2f} {ref[what] / m if ref else float('nan'):5.2f}"
        print(line)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--vocab-size", type=int, default=50_000)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--bptt", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--corpus", help="take the vocabulary (and its counts) of this corpus "
                   "(default: the shared corpus when present)")
    p.add_argument("--zipf", action="store_true", help="a Zipf count vector, not a corpus's")
    p.add_argument("--device", default="cpu")
    p.add_argument("--as-library", action="store_true", help="torch's plain Adagrad and glibc's "
                   "default heap, as in a user's own loop (default: as semhuff-lm runs, its "
                   "fused dense Adagrad group and freed large blocks kept for reuse)")
    p.add_argument("--only", nargs="*", help="factory names to run (default: all)")
    p.add_argument("--modes", nargs="*", choices=list(MODES), default=list(MODES),
                   help="ways to run them ('' eager float32; default: all)")
    p.add_argument("--log-prob-rows", type=int, default=256, help="rows of the full log_prob "
                   "timed (0: none)")
    p.add_argument("--generation-rows", type=int, default=256, help="rows of the generation "
                   "table (predict, topk, sample) (0: none)")
    p.add_argument("--thp", action="store_true", help="PyTorch's huge-page allocation for large "
                   "CPU arrays (THP_MEM_ALLOC_ENABLE=1)")
    args = p.parse_args(argv)
    if args.thp:
        if "torch" in sys.modules:
            print("bench_lm_layers: --thp must be set before torch is imported", file=sys.stderr)
            return 2
        os.environ["THP_MEM_ALLOC_ENABLE"] = "1"
    try:
        import torch
        from semhuff.lm import make_output_layer
        from semhuff.lm.kernels.optimizer_state import trainer_optimizer
    except ImportError as exc:
        print(f"bench_lm_layers: {exc}", file=sys.stderr)
        return 2
    if not args.as_library:
        from semhuff.memory import keep_large_blocks
        keep_large_blocks()
    torch.set_num_threads(args.threads)
    torch.sparse.check_sparse_tensor_invariants.disable()  # explicit: Adagrad's sparse path warns
    torch.manual_seed(1)
    from semhuff.data_paths import shared_corpus
    corpus = args.corpus or (str(shared_corpus()) if shared_corpus().is_file() else None)
    if args.corpus and not os.path.isfile(args.corpus):
        print(f"bench_lm_layers: no corpus at {args.corpus}", file=sys.stderr)
        return 2
    corpus = None if args.zipf else corpus
    vocab = corpus_vocab(corpus, args.vocab_size) if corpus else zipf_vocab(args.vocab_size)
    V, D, N = len(vocab), args.hidden, args.batch * args.bptt
    device = torch.device(args.device)
    rng = np.random.default_rng(1)
    p_word = vocab.counts / vocab.counts.sum()
    target = torch.as_tensor(rng.choice(V, size=(args.batch, args.bptt), p=p_word), device=device)
    h = torch.randn(args.batch, args.bptt, D, device=device).requires_grad_()
    print(f"V = {V:,} ({'the vocabulary of ' + corpus if corpus else 'Zipf counts'}), hidden {D}, "
          f"batch {args.batch} x {args.bptt} = {N:,} tokens, {args.threads} threads, "
          f"{device}, torch {torch.__version__}, THP_MEM_ALLOC_ENABLE="
          f"{os.environ.get('THP_MEM_ALLOC_ENABLE', 'unset')}, "
          f"{'as a library' if args.as_library else 'as semhuff-lm'}, load average "
          f"{os.getloadavg()[0]:.2f}")
    arms = [a for a in ARMS if (not args.only or a[1] in args.only) and a[3] in args.modes]
    layers, optimizers, runs = {}, {}, {}
    for label, name, options, mode in arms:
        extra = {"reassign_every": 1 << 40} if name.startswith("self") else {}
        if isinstance(options.get("head"), float):  # a share of V
            options = dict(options, head=round(options["head"] * V))
        layer = (NaiveTreeSoftmax(D, vocab) if name == "naive-tree" else
                 make_output_layer(name, D, vocab, **options, **extra)).to(device)
        with torch.no_grad():  # trained-looking weights (the tree's start at zero)
            for param in layer.parameters():
                param.normal_(0, 0.05)
        layers[label] = layer
        optimizers[label] = (torch.optim.Adagrad(layer.parameters(), lr=0.1) if args.as_library
                             else trainer_optimizer(layer, 0.1, device))
        runs[label] = torch.compile(layer) if mode == "compile" else layer
        print(f"  {label}: {layer.describe()} [{MODES[mode]}]")
    rows = h.detach().reshape(-1, D)[:args.log_prob_rows]
    times = {label: {"fb": [], "step": [], "lp": []} for label, *_ in arms}
    for round_ in range(args.repeats + 2):
        for label, _, _, mode in arms:
            fb = one_step(runs[label], None, h, target, mode)
            step = one_step(runs[label], optimizers[label], h, target, mode)
            lp = log_prob_time(runs[label], rows, mode) if args.log_prob_rows else 0.0
            if round_ >= 2:
                times[label]["fb"].append(fb)
                times[label]["step"].append(step)
                times[label]["lp"].append(lp)
        print(f"round {round_ + 1}/{args.repeats + 2} done", file=sys.stderr, flush=True)
    reassign = {}
    for label, name, _, mode in arms:
        if name.startswith("self") and not mode:
            started = time.perf_counter()
            layers[label].reassign(optimizers[label])
            reassign[label] = time.perf_counter() - started
    med = {label: {k: statistics.median(v) for k, v in t.items()} for label, t in times.items()}
    print()
    print(f"{'layer':38s} {'fwd+bwd ms':>10s} {'tokens/s':>9s} {'x full':>7s} {'x adapt':>7s}"
          f" | {'+Adagrad ms':>11s} {'tokens/s':>9s} {'x full':>7s} {'x adapt':>7s}"
          f" | {'log_prob ms':>11s} {'x adapt':>7s}")
    for label, *_ in arms:
        row = f"{label:38s}"
        for key in ("fb", "step", "lp"):
            m = med[label][key]
            ratios = [med[ref][key] / m if ref in med and m else float("nan")
                      for ref in ("full softmax", "adaptive softmax")]
            if key == "lp":
                row += f" {1e3 * m:11.1f} {ratios[1]:7.2f}"
            else:
                row += f" {1e3 * m:10.1f} {N / m:9,.0f} {ratios[0]:7.1f} {ratios[1]:7.2f} |"
        print(row)
    adaptive = min(times["adaptive softmax"]["fb"]) if "adaptive softmax" in times else None
    print("fwd+bwd, the least of the rounds (ms" + (", x adaptive" if adaptive else "") + "): "
          + "; ".join(f"{label} {1e3 * min(t['fb']):.1f}"
                      + (f" ({adaptive / min(t['fb']):.2f})" if adaptive else "")
                      for label, t in times.items()))
    if args.log_prob_rows:
        print(f"log_prob: the whole distribution of {rows.shape[0]} rows, no gradient")
        tree_label = "tree (Huffman), dense grad"
        if tree_label in layers:  # the tree's log_prob as it was before issue 34, for reference
            from semhuff.lm.kernels.paths import leaf_matrix, paths_log_prob
            layer = layers[tree_label]
            matrix = leaf_matrix(layer.tree, device)
            seconds = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                with torch.no_grad():
                    paths_log_prob(rows, layer.weight, matrix)
                seconds.append(time.perf_counter() - started)
            print(f"{tree_label}: log_prob by the sparse path-matrix product (the form before "
                  f"issue 34) {1e3 * statistics.median(seconds):.1f} ms")
    if args.generation_rows:
        generation_table({label: layers[label] for label, name, _, mode in arms
                          if not mode and name != "naive-tree"},
                         h.detach().reshape(-1, D)[:args.generation_rows], args.repeats)
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (this machine's other work "
          f"slows the two-thread runs most)")
    for label, seconds in reassign.items():
        print(f"{label}: one re-assignment {1e3 * seconds:.0f} ms = {1e3 * seconds / 1000:.2f} ms "
              f"a step at reassign_every=1000")
    return 0


if __name__ == "__main__":
    sys.exit(main())
