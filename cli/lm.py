"""semhuff-lm: train a language model (LSTM, GRU, Transformer) with a tree, cluster, adaptive or
full softmax.

    semhuff-lm CORPUS [CORPUS ...] (--heldout FILE | --heldout-chars N) [options]
    semhuff-lm score MODEL TEXT [TEXT ...]
    semhuff-lm sample MODEL [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K]
                      [--top-p P] [--no-unk] [--seed S]

The corpus is read as semhuff-train reads it (files or directories, plain / gzip / bz2 / xz;
``lee``); out-of-vocabulary words become <unk>, lines end with <eos> (not in a one-line text8
corpus). Needs PyTorch: ``pip install 'semhuff[torch]'``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import List, Optional

from semhuff.errors import OptionError
from semhuff.io_utils import check_writable
from semhuff.memory import keep_large_blocks
from semhuff.options import add_option_flags, parse_assignments, refuse_unused_flags
from semhuff.trees.spec import SIMILARITY, TREE, check_tree_spec

from .common import (HelpFormatter, add_deprecated_spelling, add_plugin_option, checkpoint_note,
                     cli_main, console_script, deprecation_note, resolve_corpus)

PROG = "semhuff-lm"


def _registries():
    """(LM_LAYERS, their options by name, the layers that can re-build their tree, LM_NETWORKS,
    theirs), or None without PyTorch."""
    try:
        from semhuff.lm.networks import LM_NETWORKS, declared_lm_network_options
        from semhuff.lm.layers.registry import LM_LAYERS, declared_lm_layer_options, layers_with
    except ImportError:
        return None
    return (LM_LAYERS, declared_lm_layer_options(), layers_with("retree"), LM_NETWORKS,
            declared_lm_network_options())


def build_parser() -> argparse.ArgumentParser:
    registries = _registries()
    layers, declared, retree_layers, networks, network_declared = \
        registries or ({}, {}, [], {}, {})
    p = argparse.ArgumentParser(prog=PROG, description="Train a language model whose output "
                                "layer is a tree softmax (any semhuff tree), a class softmax, a "
                                "self-organized softmax, PyTorch's adaptive softmax or a full "
                                "softmax; report held-out perplexity and speed.",
                                formatter_class=HelpFormatter, epilog=SUBCOMMANDS_HELP)
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
    g.add_argument("--loss", dest="output", choices=sorted(layers) if registries else None,
                   default=_default_layer(),
                   help="the output layer, as semhuff-train's --loss: tree: hierarchical "
                        "softmax over --tree; class: two-level over "
                        "--clustering; self-organized(-binary): clusters re-learned every "
                        "--reassign-every steps (Shen et al.); adaptive: PyTorch's "
                        "AdaptiveLogSoftmaxWithLoss; full: the full softmax; or one a --plugin "
                        "registered (default: tree)")
    layer_group = g = p.add_argument_group("output layer options (each names the --loss "
                                           "values that take it; any other is an error)")
    g.add_argument("--layer-option", action="append", default=[], metavar="NAME=VALUE",
                   help="any option the chosen --loss declares, e.g. a --plugin layer's "
                        "(repeatable)")
    g = p.add_argument_group("model and training (the paper's defaults where they fit)")
    g.add_argument("--emb", type=int, default=256, help="embedding size (default 256)")
    g.add_argument("--hidden", type=int, default=256, help="recurrent layer's size (default 256)")
    g.add_argument("--arch", dest="arch",
                   choices=sorted(networks) if registries else None, default="lstm",
                   help="the network: lstm (the self-organized HSM paper), gru (the p-tHSM "
                        "poster), transformer, or one a --plugin registered")
    arch_group = g
    g.add_argument("--dropout", type=float, default=0.0, help="dropout on the network's output")
    g.add_argument("--batch-size", type=int, default=32, help="rows read in parallel (default 32)")
    g.add_argument("--bptt", type=int, default=20, help="truncated back-propagation steps (default 20)")
    g.add_argument("--epochs", type=int, default=1, help="passes over the training text (default 1)")
    g.add_argument("--lr", type=float, default=0.1, help="Adagrad's learning rate (default 0.1)")
    retree_with = " or ".join(f"--loss {name}" for name in retree_layers) or "a layer with a tree"
    g.add_argument("--retree-every", type=int, default=0, metavar="EPOCHS",
                   help=f"{retree_with}: after every EPOCHS epochs, re-build the tree as a SemHuff "
                        "tree over the network's own input embeddings, the rows carried over "
                        "(default 0: never)")
    g.add_argument("--clip", type=float, default=0.25, help="gradient norm clip (default 0.25)")
    g.add_argument("--workers", dest="threads", type=int, metavar="N",
                   help="PyTorch's threads (default: its own)")
    g.add_argument("--seed", type=int, default=1)
    g = p.add_argument_group("device and long runs")
    g.add_argument("--device", default="cpu", metavar="cpu|cuda|cuda:N",
                   help="where the model, the batches and the evaluation run (default cpu)")
    g.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32",
                   help="torch.autocast's precision; fp16 on CUDA only (default fp32)")
    g.add_argument("--checkpoint", metavar="PATH",
                   help="write a checkpoint here (atomically) at each epoch's end and every "
                        "--checkpoint-steps steps; Ctrl-C keeps the last one")
    g.add_argument("--checkpoint-steps", type=int, default=0, metavar="STEPS",
                   help="steps between checkpoints within an epoch (default 0: epoch ends only)")
    g.add_argument("--resume", action="store_true",
                   help="continue the run in --checkpoint (the same corpus and settings)")
    add_plugin_option(p)
    g = p.add_argument_group("output")
    g.add_argument("-o", "--output", dest="output_model", metavar="PATH",
                   action=_OutputFileOrLayer, layers=tuple(layers),
                   help="save the trained model (.pt)")
    g.add_argument("--report", metavar="PATH", help="write the run's report as JSON")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("-q", "--quiet", action="count", default=0, help="no summary")
    g.add_argument("-v", "--verbose", action="count", default=0, help="log each step")
    # one flag per declared layer option, after semhuff-lm's own: an option whose flag is one
    # of those (a plugin's --seed, say) is reached by --layer-option only
    taken = set(p._option_string_actions)
    flags = [option for option, _ in declared.values()
             if option.cli and option.cli_flag not in taken]
    add_option_flags(layer_group, flags, {name: ", ".join(users) for name, (_, users) in
                                          declared.items()}, selector="--loss")
    taken = set(p._option_string_actions)
    arch_flags = [option for option, _ in network_declared.values()
                  if option.cli and option.cli_flag not in taken]
    add_option_flags(arch_group, arch_flags, {name: ", ".join(users) for name, (_, users) in
                                              network_declared.items()}, selector="--arch")
    p.set_defaults(layer_flags=tuple(option.name for option in flags),
                   network_flags=tuple(option.name for option in arch_flags))
    add_deprecated_spelling(p, "--threads", "--workers")
    add_deprecated_spelling(p, "--cell", "--arch")  # a Transformer is no recurrent cell
    # semhuff-train's --checkpoint-every is minutes: one unit a flag name across the scripts
    add_deprecated_spelling(p, "--checkpoint-every", "--checkpoint-steps")
    add_deprecated_spelling(p, "--output-model", "-o/--output",
                            target=p._option_string_actions["--output"])
    return p


def _default_layer() -> Optional[str]:
    try:
        from semhuff.lm.layers.registry import DEFAULT_LM_LAYER
    except ImportError:
        return None
    return DEFAULT_LM_LAYER


class _OutputFileOrLayer(argparse.Action):
    """``-o/--output PATH``: the model file, as every script's ``-o/--output`` is its output.
    ``--output NAME`` with a layer's name is the former spelling of ``--loss NAME`` (semhuff-lm
    had ``--output`` for the layer): taken so, with a note."""

    def __init__(self, option_strings, dest, layers=(), **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.layers = layers

    def __call__(self, parser, namespace, value, option_string=None):
        if option_string == "--output" and value in self.layers:
            deprecation_note(f"{parser.prog}: note: --output {value} is now --loss {value} "
                             f"(-o/--output is the model file, as in semhuff-train; the old "
                             f"spelling still works, for now)")
            namespace.output = value
            return
        setattr(namespace, self.dest, value)


def layer_settings(args) -> dict:
    """The output-layer options the command line gave (flags and ``--layer-option``), each one
    the chosen ``--output`` declares; any other is an error naming its flag."""
    from semhuff.lm.layers.registry import declared_lm_layer_options, layer_options, lm_layer_class
    declared = layer_options(lm_layer_class(args.output))
    flagged = {name: getattr(args, name) for name in args.layer_flags
               if hasattr(args, name)}  # (absent unless given)
    refuse_unused_flags(flagged, declared_lm_layer_options(), declared, f"--loss {args.output}")
    return {**flagged, **parse_assignments(args.layer_option, declared, f"--loss {args.output}")}


def network_settings(args) -> dict:
    """The network options the command line gave, each one the chosen ``--arch`` declares."""
    from semhuff.lm.networks import declared_lm_network_options, lm_network_class, \
        network_options
    declared = network_options(lm_network_class(args.arch))
    given = [name for name in args.network_flags if hasattr(args, name)]
    refuse_unused_flags(given, declared_lm_network_options(), declared, f"--arch {args.arch}")
    return {name: getattr(args, name) for name in given}


SUBCOMMANDS_HELP = ("using a trained model (-o FILE): 'semhuff-lm score MODEL TEXT...' (held-out "
                    "perplexity and tokens/s, per file) and 'semhuff-lm sample MODEL [--prompt "
                    "TEXT] [--tokens N] [--temperature T] [--seed S]'; see 'semhuff-lm score "
                    "--help'. (A corpus file named score or sample: write ./score.)")


def build_score_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"{PROG} score", description="Held-out perplexity of text "
                                "under a model semhuff-lm saved (-o): the text read as the "
                                "training run read its held-out text; on that text, the run's "
                                "reported perplexity.", formatter_class=HelpFormatter)
    p.add_argument("model", help="a model saved by semhuff-lm -o (.pt)")
    p.add_argument("text", nargs="+", help="text file(s) or directory; 'lee' = gensim's lee_background.cor")
    p.add_argument("--max-tokens", type=int, metavar="N",
                   help="score the first N tokens only (the run's --heldout-tokens)")
    p.add_argument("--batch-size", dest="batch", type=int, metavar="N",
                   help="rows scored in parallel (default: the "
                   "run's)")
    p.add_argument("--bptt", type=int, metavar="N", help="steps a row is read in (default: the run's)")
    p.add_argument("--device", default="cpu", metavar="cpu|cuda|cuda:N")
    p.add_argument("--workers", dest="threads", type=int, metavar="N",
                   help="PyTorch's threads (default: its own)")
    p.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    add_plugin_option(p)
    p.add_argument("-q", "--quiet", action="count", default=0, help="only errors")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log each step")
    add_deprecated_spelling(p, "--threads", "--workers")
    add_deprecated_spelling(p, "--batch", "--batch-size")
    return p


def build_sample_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"{PROG} sample", description="Words drawn from a model "
                                "semhuff-lm saved (-o), one at a time from its exact "
                                "distribution; <eos> printed as a line break.",
                                formatter_class=HelpFormatter)
    p.add_argument("model", help="a model saved by semhuff-lm -o (.pt)")
    p.add_argument("--prompt", metavar="TEXT", help="the text to continue (default: a line's start)")
    p.add_argument("--tokens", type=int, default=50, metavar="N", help="words to draw (default 50)")
    p.add_argument("--temperature", type=float, default=1.0, metavar="T",
                   help="log-probabilities divided by T; 0: the most probable word (default 1)")
    p.add_argument("--top-k", type=int, metavar="K", help="draw among the K most probable words "
                   "only (default: all)")
    p.add_argument("--top-p", type=float, metavar="P", help="draw among the fewest most "
                   "probable words holding P of the probability only (nucleus; default 1: all)")
    p.add_argument("--no-unk", action="store_true", help="never draw <unk> (the other words' "
                   "probabilities renormalised)")
    p.add_argument("--seed", type=int, default=1, help="the draws' seed (default 1)")
    p.add_argument("--device", default="cpu", metavar="cpu|cuda|cuda:N")
    add_plugin_option(p)
    p.add_argument("-q", "--quiet", action="count", default=0, help="only errors")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log each step")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # the subcommands, before the training parser (whose first argument is a corpus)
    if argv and argv[0] == "score":
        return cli_main(f"{PROG} score", build_score_parser, _score, argv[1:])
    if argv and argv[0] == "sample":
        return cli_main(f"{PROG} sample", build_sample_parser, _sample, argv[1:])
    started = time.time()
    return cli_main(PROG, build_parser, _run, argv, interrupted=lambda args: checkpoint_note(
        args.checkpoint, started, "the same command and --resume",
        "at the epoch's end" + (f" or after {args.checkpoint_steps:,} steps"
                                if args.checkpoint_steps else "")))


def _needs_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise OptionError("semhuff-lm needs PyTorch: pip install 'semhuff[torch]'") from None


def _score(args) -> int:
    _needs_torch()
    from semhuff.lm.generate import score_files
    from semhuff.lm.models import load_model
    if args.json:
        check_writable(args.json)
    for name, flag in (("max_tokens", "--max-tokens"), ("batch", "--batch-size"),
                       ("bptt", "--bptt"), ("threads", "--workers")):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise OptionError(f"{flag} must be >= 1, got {value}")
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    loaded = load_model(args.model, args.device)
    model, vocab, settings = loaded
    batch, bptt = args.batch or settings.eval_batch, args.bptt or settings.bptt
    # scored under the run's precision, as its report was (fp16 on a CPU: in fp32)
    precision = "fp32" if settings.precision == "fp16" and args.device == "cpu" \
        else settings.precision
    total, each = score_files(model, vocab, resolve_corpus(args.text), loaded.eos, batch, bptt,
                              args.max_tokens, precision=precision)
    if args.quiet == 0:
        for path, score in each if len(each) > 1 else []:
            print(f"{path}: perplexity {score.perplexity:,.4f}, {score.tokens:,} tokens, "
                  f"{score.tokens_per_second:,.0f} tokens/s")
        print(f"perplexity {total.perplexity:,.4f} over {total.tokens:,} tokens "
              f"({total.tokens_per_second:,.0f} tokens/s): {settings.arch} "
              f"{model.output.describe()}")
    if args.json:
        from dataclasses import asdict
        from semhuff.io_utils import atomic_output
        with atomic_output(args.json, "w") as fh:
            json.dump({"model": args.model, "total": asdict(total),
                       "files": {p: asdict(sc) for p, sc in each}}, fh, indent=1)
    return 0


def _sample(args) -> int:
    _needs_torch()
    from semhuff.lm.generate import sample
    from semhuff.lm.models import load_model
    model, vocab, _ = load_model(args.model, args.device)
    words = sample(model, vocab, tokens=args.tokens, temperature=args.temperature,
                   seed=args.seed, prompt=args.prompt, top_k=args.top_k, top_p=args.top_p,
                   no_unk=args.no_unk)
    text = " ".join(words).replace(" <eos> ", "\n").replace("<eos>", "\n").strip(" ")
    print(text)
    return 0


def _run(args) -> int:
    _needs_torch()
    keep_large_blocks()  # the process is ours: a step's large blocks reused, not re-faulted
    from semhuff.lm.checkpoint import check_checkpointing, read_checkpoint
    from semhuff.lm.models import save_model
    from semhuff.lm.report import write_report
    from semhuff.lm.settings import LMSettings
    from semhuff.lm.token_ids import load_data
    from semhuff.lm.trainer import LMTrainingRun
    for path in (args.output_model, args.report, args.checkpoint):
        if path:
            check_writable(path)
    check_checkpointing(args.checkpoint, args.checkpoint_steps, args.resume)
    if args.resume:
        read_checkpoint(args.checkpoint)  # not there / not a checkpoint: before the data is read
    layer = layer_settings(args)
    check_tree_spec(layer.get(TREE.name))  # a builder's name or a file, before any data is read
    _check_skipgram(layer)
    settings = LMSettings(output=args.output, layer_options=layer, emb=args.emb,
                          hidden=args.hidden, arch=args.arch,
                          network_options=network_settings(args), dropout=args.dropout,
                          batch_size=args.batch_size, bptt=args.bptt, epochs=args.epochs,
                          lr=args.lr, clip=args.clip, threads=args.threads, seed=args.seed,
                          retree_every=args.retree_every,
                          device=args.device, precision=args.precision,
                          progress=not args.no_progress and args.quiet == 0)
    settings.check()
    data = load_data(resolve_corpus(args.corpus),
                     resolve_corpus(args.heldout) if args.heldout else None,
                     args.heldout_chars, args.min_count, args.max_vocab, args.train_tokens,
                     args.heldout_tokens)
    settings = _bootstrapped(settings, data, args)
    run = LMTrainingRun(data, settings, checkpoint=args.checkpoint,
                        checkpoint_steps=args.checkpoint_steps, resume=args.resume,
                        on_epoch=lambda report: say and _say_epoch(len(report.epochs),
                                                                   report.epochs[-1]))
    say = args.quiet == 0 and run.rank == 0  # torchrun: rank 0 reports and writes
    if say:
        print(f"data: {data.describe()}")
        print(f"model: {args.arch.upper()} {args.emb}/{args.hidden}, {run.layer.describe()}")
        if run.resumed_at:
            print(_resumed_line(run, args.checkpoint))
        for i, epoch in enumerate(run.report.epochs, 1):  # the epochs before the checkpoint
            _say_epoch(i, epoch)
        sys.stdout.flush()
    model, report = run.run()
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
        if run.rank:
            return 0
    if args.output_model:
        save_model(args.output_model, model, data, report)
    if args.report:
        write_report(args.report, report)
    if say:
        print(f"untrained held-out perplexity {report.untrained.perplexity:,.1f}"
              + (f"; {len(report.reassignments)} re-assignments" if report.reassignments else ""))
        if args.output_model:
            print(f"wrote {args.output_model}")
        sys.stdout.flush()
    return 0


def _check_skipgram(layer: dict) -> None:
    """``--similarity skipgram`` is for the SemHuff tree only: refused before the data is read
    (the vectors would be trained for nothing)."""
    from semhuff.lm_bootstrap import SKIPGRAM
    if layer.get(SIMILARITY.name) == SKIPGRAM and layer.get(TREE.name) != "semhuff":
        raise OptionError("--similarity skipgram trains the vectors of the SemHuff tree: give "
                          "--tree semhuff with it")


def _bootstrapped(settings, data, args):
    """``settings`` with ``--similarity skipgram`` replaced by the path of skip-gram vectors
    trained on the training text (cached by the data's fingerprint: a resumed run names the
    same file, so its settings match its checkpoint's)."""
    from dataclasses import replace

    from semhuff.lm_bootstrap import SKIPGRAM, bootstrap_vectors
    layer = dict(settings.layer_options)
    if layer.get(SIMILARITY.name) != SKIPGRAM:
        return settings
    if args.quiet == 0:
        print("training skip-gram vectors on the training text for the SemHuff tree (once per "
              "training text; cached)", flush=True)
    layer[SIMILARITY.name] = bootstrap_vectors(data, workers=args.threads or None)
    return replace(settings, layer_options=layer)


def _say_epoch(number: int, e) -> None:
    """An epoch's line, as it ends (a long run with --no-progress says how it goes)."""
    h = e.heldout
    clusters = (f", cluster {h.cluster_perplexity:,.2f} / in-cluster "
                f"{h.in_cluster_perplexity:,.2f}" if h.cluster_perplexity else "")
    print(f"epoch {number}: train loss {e.train_loss:.4f}, held-out perplexity "
          f"{h.perplexity:,.2f}{clusters}, {e.tokens_per_second:,.0f} tokens/s, output "
          f"layer {e.output_seconds:.1f} s of {e.seconds:.1f} s", flush=True)


def _resumed_line(run, path: str) -> str:
    step, epoch = run.resumed_at
    epochs = run.settings.epochs
    if epoch > epochs:
        return f"resumed after the last epoch ({epochs} of {epochs}) from {path}: nothing to train"
    return (f"resumed at step {step:,} of epoch {epoch} ({len(run.steps):,} steps an epoch; "
            f"step {run.step:,} of the run) from {path}")


console = console_script(main)

if __name__ == "__main__":
    console()
