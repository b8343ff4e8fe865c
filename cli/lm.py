"""semhuff-lm: train an LSTM language model with a tree, cluster, adaptive or full softmax.

    semhuff-lm CORPUS [CORPUS ...] (--heldout FILE | --heldout-chars N) [options]

The corpus is read as semhuff-train reads it (files or directories, plain / gzip / bz2 / xz;
``lee``); out-of-vocabulary words become <unk>, lines end with <eos> (not in a one-line text8
corpus). Needs PyTorch: ``pip install 'semhuff[torch]'``.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from semhuff.errors import OptionError
from semhuff.io_utils import check_writable

from .common import cli_main, console_script
from .train import resolve_corpus

PROG = "semhuff-lm"
OUTPUTS = ("full", "adaptive", "tree", "class", "self-organized", "self-organized-binary")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Train an LSTM language model whose output "
                                "layer is a tree softmax (any semhuff tree), a class softmax, a "
                                "self-organized softmax, PyTorch's adaptive softmax or a full "
                                "softmax; report held-out perplexity and speed.")
    p.add_argument("corpus", nargs="+", help="text file(s) or directory; 'lee' = gensim's lee_background.cor")
    g = p.add_argument_group("data")
    g.add_argument("--heldout", nargs="+", metavar="FILE", help="held-out text to score")
    g.add_argument("--heldout-chars", type=int, metavar="N",
                   help="hold out the corpus's last N characters instead (text8's split: 1000000)")
    g.add_argument("--min-count", type=int, default=1, help="drop words seen fewer times (-> <unk>)")
    g.add_argument("--max-vocab", type=int, metavar="N",
                   help="keep the N - 1 most frequent words and <unk> (PTB: 10000)")
    g.add_argument("--train-tokens", type=int, metavar="N",
                   help="train on the first N tokens only (a scaled run; the vocabulary is "
                        "counted on them)")
    g.add_argument("--heldout-tokens", type=int, metavar="N", help="score the first N held-out tokens only")
    g = p.add_argument_group("output layer")
    g.add_argument("--output", choices=OUTPUTS, default="tree",
                   help="tree: hierarchical softmax over --tree; class: two-level over "
                        "--clustering; self-organized(-binary): clusters re-learned every "
                        "--reassign-every steps (Shen et al.); adaptive: PyTorch's "
                        "AdaptiveLogSoftmaxWithLoss; full: the full softmax (default: tree)")
    g.add_argument("--tree", default="huffman",
                   help="--output tree: huffman, semhuff, random, alphabetical, clusters "
                        "(default: huffman)")
    g.add_argument("--similarity", help="--tree semhuff: wordnet, a pairs file or a vectors file")
    g.add_argument("--clusters", type=int, help="clusters (default: round(sqrt V))")
    g.add_argument("--clustering", choices=("frequency", "random"),
                   help="--output class: frequency binning (Mikolov et al. 2011) or random")
    g.add_argument("--reassign-every", type=int, metavar="STEPS",
                   help="self-organized: steps between re-assignments (the paper: 1000)")
    g.add_argument("--layer-option", action="append", default=[], metavar="NAME=VALUE",
                   help="another option of the output layer (e.g. gamma=1.5, freq_budget=0.1, "
                        "sparse=false); repeatable")
    g = p.add_argument_group("model and training (the paper's defaults where they fit)")
    g.add_argument("--emb", type=int, default=256, help="embedding size (default 256)")
    g.add_argument("--hidden", type=int, default=256, help="recurrent layer's size (default 256)")
    g.add_argument("--cell", choices=("lstm", "gru"), default="lstm",
                   help="recurrent cell: lstm (the self-organized HSM paper) or gru (the p-tHSM "
                        "poster)")
    g.add_argument("--dropout", type=float, default=0.0, help="dropout on the LSTM's output")
    g.add_argument("--batch-size", type=int, default=32, help="rows read in parallel (default 32)")
    g.add_argument("--bptt", type=int, default=20, help="truncated back-propagation steps (default 20)")
    g.add_argument("--epochs", type=int, default=1, help="passes over the training text (default 1)")
    g.add_argument("--lr", type=float, default=0.1, help="Adagrad's learning rate (default 0.1)")
    g.add_argument("--clip", type=float, default=0.25, help="gradient norm clip (default 0.25)")
    g.add_argument("--threads", type=int, help="PyTorch's threads (default: its own)")
    g.add_argument("--seed", type=int, default=1)
    g = p.add_argument_group("output")
    g.add_argument("-o", "--output-model", metavar="PATH", help="save the trained model (.pt)")
    g.add_argument("--report", metavar="PATH", help="write the run's report as JSON")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("-q", "--quiet", action="count", default=0, help="no summary")
    g.add_argument("-v", "--verbose", action="count", default=0, help="log each step")
    return p


def _value(text: str):
    """A --layer-option value: an int, a float, true/false, or the text."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def layer_options(args) -> dict:
    options = {}
    for pair in args.layer_option:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise OptionError(f"--layer-option needs NAME=VALUE, got {pair!r}")
        options[name.strip().replace("-", "_")] = _value(text)
    if args.reassign_every is not None:
        options["reassign_every"] = args.reassign_every
    return options


def _check_layer_options(output: str, tree: str, options: dict) -> None:
    """Refuse an option the output layer (or its tree builder) does not take before any data
    is read."""
    from semhuff.lm.output import LAYER_OPTIONS
    from semhuff.trees import TREE_OPTIONS
    takes = set(LAYER_OPTIONS[output]) | ({"reassign_every"} if output.startswith("self") else
                                          set())
    if output == "tree":
        takes |= {o.name for o in TREE_OPTIONS.get(tree, ()) if o.cli}
    unknown = sorted(set(options) - takes)
    if unknown:
        raise OptionError(f"--layer-option {', '.join(unknown)}: not used by --output {output} "
                          f"(it takes: {', '.join(sorted(takes)) or 'none'})")


def main(argv: Optional[List[str]] = None) -> int:
    return cli_main(PROG, build_parser, _run, argv)


def _run(args) -> int:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise OptionError("semhuff-lm needs PyTorch: pip install 'semhuff[torch]'") from None
    from semhuff.lm.token_ids import load_data
    from semhuff.lm.trainer import LMSettings, save_model, train_lm, write_report
    for path in (args.output_model, args.report):
        if path:
            check_writable(path)
    settings = LMSettings(output=args.output, tree=args.tree, similarity=args.similarity,
                          clusters=args.clusters, clustering=args.clustering or "frequency",
                          layer_options=layer_options(args), emb=args.emb, hidden=args.hidden,
                          cell=args.cell, dropout=args.dropout, batch_size=args.batch_size, bptt=args.bptt,
                          epochs=args.epochs, lr=args.lr, clip=args.clip, threads=args.threads,
                          seed=args.seed, progress=not args.no_progress and args.quiet == 0)
    unused = [flag for flag, given, uses in (
        ("--tree", args.tree != "huffman", args.output == "tree"),
        ("--similarity", args.similarity is not None, args.output == "tree"),
        ("--clustering", args.clustering is not None, args.output == "class"),
        ("--reassign-every", args.reassign_every is not None, args.output.startswith("self")),
        ("--clusters", args.clusters is not None,
         args.output in ("class", "self-organized", "self-organized-binary")
         or args.tree == "clusters")) if given and not uses]
    if unused:
        raise OptionError(f"{', '.join(unused)}: not used by --output {args.output}")
    settings.check()
    _check_layer_options(args.output, args.tree, settings.layer_options)
    data = load_data(resolve_corpus(args.corpus),
                     resolve_corpus(args.heldout) if args.heldout else None,
                     args.heldout_chars, args.min_count, args.max_vocab, args.train_tokens,
                     args.heldout_tokens)
    model, report = train_lm(data, settings)
    if args.output_model:
        save_model(args.output_model, model, data, report)
    if args.report:
        write_report(args.report, report)
    if args.quiet == 0:
        print(f"data: {data.describe()}")
        print(f"model: {args.cell.upper()} {args.emb}/{args.hidden}, {model.output.describe()}")
        for i, e in enumerate(report.epochs, 1):
            h = e.heldout
            clusters = (f", cluster {h.cluster_perplexity:,.2f} / in-cluster "
                        f"{h.in_cluster_perplexity:,.2f}" if h.cluster_perplexity else "")
            print(f"epoch {i}: train loss {e.train_loss:.4f}, held-out perplexity "
                  f"{h.perplexity:,.2f}{clusters}, {e.tokens_per_second:,.0f} tokens/s, output "
                  f"layer {e.output_seconds:.1f} s of {e.seconds:.1f} s")
        print(f"untrained held-out perplexity {report.untrained.perplexity:,.1f}"
              + (f"; {len(report.reassignments)} re-assignments" if report.reassignments else ""))
        if args.output_model:
            print(f"wrote {args.output_model}")
        sys.stdout.flush()
    return 0


console = console_script(main)

if __name__ == "__main__":
    console()
