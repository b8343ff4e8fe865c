"""semhuff-train: train word vectors from the command line.

    semhuff-train CORPUS [CORPUS ...] -o OUT [options]

CORPUS is a text file (plain, gzip, bz2, xz; one sentence per line, or one huge text8-style
line) or a directory of them. The name ``lee`` stands for gensim's bundled lee_background.cor.
"""
from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import List, Optional

import numpy as np

from semhuff.devices import DEVICES, backend_names
from semhuff.errors import OptionError
from semhuff.io_utils import check_writable, is_stdout
from semhuff.layers import OUTPUT_LAYERS, declared_layer_options, layer_class
from semhuff.options import add_option_flags, parse_assignments, refuse_unused_flags
from semhuff.lean_numba import skip_blas_probe
from semhuff.memory import return_large_blocks
from semhuff.model import Word2Vec, default_workers
from semhuff.numba_cache import compile_seconds
from semhuff.training_report import check_report_writable, write_training_report
from semhuff.trees.spec import check_tree_spec
from semhuff.vectors_io import FORMATS, resolve_format
from semhuff.wording import counted

from .common import (HelpFormatter, add_deprecated_spelling, add_plugin_option, cli_main,
                     console_script, deprecated_value, resolve_corpus)
from .resume import continue_model, given_options
from .scale import (add_scale_options, check_scale_options, checkpoint_kept, dask_training,
                    report_extra, resume_run, train_kwargs)

PROG = "semhuff-train"
logger = logging.getLogger(PROG)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Train word vectors (skip-gram or CBOW) with "
                                "hierarchical softmax over a Huffman / SemHuff tree, or negative sampling.",
                                formatter_class=HelpFormatter)
    p.add_argument("corpus", nargs="+", help="text file(s) or directory; 'lee' = gensim's lee_background.cor")
    p.add_argument("-o", "--output", required=True, help="output file")
    p.add_argument("--format", default="auto", choices=("auto",) + FORMATS,
                   type=deprecated_value(PROG, "--format", "model", "npz"),
                   help="output format; auto: .npz the full model, .kv gensim KeyedVectors, "
                        ".txt/.vec word2vec text, .bin word2vec binary (any other name needs "
                        "--format); gensim: gensim's whole Word2Vec (gensim loads and trains it)")
    p.add_argument("--save-model", metavar="PATH", help="also save the full model (.npz) to keep training later")
    p.add_argument("--init-model", metavar="PATH", help="continue training this saved model (its vocabulary and settings)")
    p.add_argument("--init-vectors", metavar="FILE",
                   help="pretrained vectors (any format semhuff reads, same --dim): the words "
                        "they share with the vocabulary start from them and keep training, the "
                        "others at random")
    p.add_argument("--freeze-init-vectors", action="store_true",
                   help="with --init-vectors: the words taken from the file keep its vectors "
                        "exactly (lock factor 0, gensim's intersect_word2vec_format default); "
                        "the other words train (CPU only)")
    g = p.add_argument_group("model")
    g.add_argument("--dim", "--size", "--vector-size", dest="dim", type=int, default=100, help="vector dimension")
    g.add_argument("--window", type=int, default=5, help="maximum context half-width")
    arch = g.add_mutually_exclusive_group()  # --cbow --sg: refused, not the last one winning
    arch.add_argument("--model", choices=("sg", "cbow"), default="sg", help="skip-gram or CBOW")
    arch.add_argument("--sg", dest="model", action="store_const", const="sg", help="same as --model sg")
    arch.add_argument("--cbow", dest="model", action="store_const", const="cbow", help="same as --model cbow")
    g.add_argument("--loss", choices=sorted(OUTPUT_LAYERS), default="hs",
                   help="output layer: hs (hierarchical softmax over --tree), hs-self-organized "
                        "(hierarchical softmax over clusters learned while training, Shen et al.), "
                        "class (two-level class softmax over --clustering), ns (negative "
                        "sampling), or one a --plugin registered")
    g = p.add_argument_group("output layer options (each names the --loss values that take it; "
                             "any other is an error)")
    add_option_flags(g, [option for option, _ in declared_layer_options().values()],
                     {name: ", ".join(layers) for name, (_, layers) in
                      declared_layer_options().items()})
    g.add_argument("--layer-option", action="append", default=[], metavar="NAME=VALUE",
                   help="any option the chosen --loss declares, e.g. a --plugin layer's "
                        "(repeatable)")
    g = p.add_argument_group("vocabulary")
    g.add_argument("--min-count", type=int, default=5, help="drop words seen fewer times")
    g.add_argument("--max-vocab-size", type=int, help="prune while counting when the table exceeds this (word2vec.c)")
    g.add_argument("--max-final-vocab", type=int, help="keep only the N most frequent words")
    g.add_argument("--sample", type=float, default=1e-3,
                   help="word2vec's down-sampling threshold, a fraction of the corpus "
                        "(1e-5 .. 1e-2 are usual; 0 = off)")
    g.add_argument("--max-sentence-length", type=int, default=10_000, help="longer lines are cut into pieces (no token is dropped)")
    g = p.add_argument_group("training")
    g.add_argument("--epochs", "--iter", dest="epochs", type=int, default=5, help="passes over the corpus")
    g.add_argument("--alpha", type=float, default=0.025, help="initial learning rate")
    g.add_argument("--min-alpha", type=float, default=0.0001, help="final learning rate")
    g.add_argument("--workers", dest="workers", type=int, default=default_workers(),
                   help="training threads (more than the CPUs available: capped, with a "
                        "warning)")
    g.add_argument("--seed", type=int, default=1, help="random seed (workers=1: bit-reproducible)")
    g.add_argument("--device", choices=sorted(DEVICES), default="cpu",
                   help="where training runs: cpu (Hogwild threads) or cuda (one NVIDIA GPU, "
                        "needs semhuff[cuda]; docs/gpu.md)")
    g.add_argument("--backend", choices=backend_names(), default=argparse.SUPPRESS,
                   help="--device cuda: numba (numba.cuda kernels, default) or cupy")
    g.add_argument("--device-mode", dest="mode", choices=("sentence", "batched"),
                   default=argparse.SUPPRESS,
                   help="--device cuda: sentence (one GPU block a sentence, word2vec's order; "
                        "the default with numba) or batched (pairs made on the CPU, trained in "
                        "synchronous batches: the CuPy backend's form; docs/gpu.md)")
    g.add_argument("--device-blocks", dest="blocks", type=int, metavar="N",
                   default=argparse.SUPPRESS,
                   help="--device cuda: the GPU grid of a launch (sentence form: N blocks, each "
                        "walking every N-th sentence; 0, the default: one block a sentence)")
    g.add_argument("--device-updates", dest="updates", choices=("atomic", "plain"),
                   default=argparse.SUPPRESS,
                   help="--device cuda, sentence form: atomic adds (default: concurrent changes "
                        "of a row all land) or plain stores (faster where rows collide; some "
                        "changes are lost)")
    g.add_argument("--sentence-words", type=int, metavar="N", default=argparse.SUPPRESS,
                   help="--device cuda, sentence form: the longest sentence a block walks; "
                        "longer ones are cut (default 1000, word2vec.c's)")
    g.add_argument("--device-chunk-words", dest="chunk_words", type=int, metavar="N",
                   default=argparse.SUPPRESS,
                   help="--device cuda, sentence form: the fewest raw words one launch trains "
                        "(default 2,000,000: enough sentences to fill a large GPU)")
    g.add_argument("--batch-pairs", type=int, metavar="N", default=argparse.SUPPRESS,
                   help="--device cuda, batched form: (input, target) pairs per GPU batch "
                        "(default 8192; larger is faster, smaller closer to the CPU's quality)")
    add_deprecated_spelling(p, "--threads", "--workers")
    add_plugin_option(p)
    add_scale_options(p)
    g = p.add_argument_group("output")
    g.add_argument("--probe", nargs="*", metavar="WORD",
                   help="print nearest neighbours of these words (default: a few frequent words)")
    g.add_argument("--topn", type=int, default=5, help="neighbours per probe word")
    g.add_argument("--report", metavar="PATH",
                   help="write a training report: settings, timings, words/s and the loss per "
                        "chunk and per epoch as JSON, and a plot of them beside it (PATH's .png)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("-q", "--quiet", action="count", default=0, help="no summary, no progress bar")
    g.add_argument("-v", "--verbose", action="count", default=0, help="log each step (-vv: debug)")
    return p


# the --device cuda flags, by their device option's name (``gpu.device.CudaDevice``)
DEVICE_OPTIONS = ("mode", "blocks", "updates", "sentence_words", "chunk_words", "batch_pairs")


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    return_large_blocks()  # large temporaries go back to the OS when freed (semhuff.memory)
    skip_blas_probe()  # no kernel calls BLAS: Numba's start skips scipy.linalg (semhuff.lean_numba)
    started = time.time()
    return cli_main(PROG, build_parser, lambda args: _run(args, given_options(build_parser, argv)),
                    argv, interrupted=lambda args: checkpoint_kept(args, started))


def _run(args, given=frozenset()) -> int:
    fmt = resolve_format(args.output, args.format)
    check_writable(args.output)
    if args.save_model:
        check_writable(args.save_model)
    if args.report:
        check_report_writable(args.report)
    check_scale_options(args, given)
    corpus = resolve_corpus(args.corpus)
    progress = not args.no_progress and args.quiet == 0
    started = time.perf_counter()
    compiled_before = compile_seconds()  # a cold first run compiles the scan in its set-up
    settings = layer_settings(args, given)
    check_tree_spec(settings.get("tree"))  # a name or a file, before any work
    device_options = {k: getattr(args, k) for k in DEVICE_OPTIONS if hasattr(args, k)}
    backend = getattr(args, "backend", None)
    if args.init_vectors and (args.resume or args.init_model):
        other = "--resume" if args.resume else "--init-model"
        raise OptionError(f"--init-vectors starts a new model; {other} continues one whose "
                          f"vectors are trained already")
    if args.freeze_init_vectors and not args.init_vectors:
        raise OptionError("--freeze-init-vectors goes with --init-vectors (the vectors to freeze)")
    resumed = None
    if args.resume:
        model, resumed = resume_run(args, given, corpus, progress)
    elif args.init_model:
        model = continue_model(args, given, progress)
        # this command line says where this run trains
        model.backend, model.device_options = backend, device_options
    else:
        model = Word2Vec(vector_size=args.dim, window=args.window, min_count=args.min_count,
                         max_vocab_size=args.max_vocab_size, max_final_vocab=args.max_final_vocab,
                         sample=args.sample, sg=args.model == "sg", loss=args.loss,
                         layer_options=settings,
                         alpha=args.alpha, min_alpha=args.min_alpha, epochs=args.epochs,
                         workers=args.workers, seed=args.seed, device=args.device,
                         backend=backend, device_options=device_options,
                         max_sentence_length=args.max_sentence_length, progress=progress,
                         dask=dask_training(args, given), init_vectors=args.init_vectors,
                         init_vectors_lockf=0.0 if args.freeze_init_vectors else 1.0)
        model.build_vocab(corpus)  # a tree file is read (and matched to the words) there
    model.tmp_dir, model.cache_ids = args.tmp_dir, not args.no_id_cache
    model.dask = dask_training(args, given)
    prepared = time.perf_counter()
    setup_compile = compile_seconds() - compiled_before
    if args.resume:
        report = model.reports[-1]
    else:
        report = model.train(corpus, epochs=args.epochs, **train_kwargs(args))
    model.save_vectors(args.output, fmt)
    if args.save_model:
        model.save(args.save_model)
    if args.report:
        write_training_report(args.report, model, report, {
            "timings": {"vocabulary_and_setup_seconds": prepared - started,
                        "compile_in_setup_seconds": setup_compile,
                        "total_seconds": time.perf_counter() - started},
            "corpus": corpus, "output": args.output, "init_model": args.init_model,
            "init_vectors": args.init_vectors,
            "init_vectors_used": getattr(model, "init_vectors_used", None),
            **report_extra(report)})
    if args.quiet == 0:
        _print_summary(model, report, args, fmt, time.perf_counter() - started, setup_compile,
                       resumed)
    return 0


def layer_settings(args, given: set) -> dict:
    """The output-layer options the command line gave (flags and ``--layer-option``), each one
    the chosen ``--loss`` declares; any other is an error naming its flag."""
    declared = layer_class(args.loss).declared_options()
    table = declared_layer_options()
    flagged = {name: getattr(args, name) for name, (option, _) in table.items()
               if option.cli and name in given}
    refuse_unused_flags(flagged, table, declared, f"--loss {args.loss}")
    settings = {**flagged, **parse_assignments(args.layer_option, declared, f"--loss {args.loss}")}
    if "heldout" in settings:
        settings["heldout"] = resolve_corpus([settings["heldout"]])[0]
    return settings


def _print_summary(model, report, args, fmt, seconds, setup_compile=0.0, resumed=None):
    out = sys.stderr if is_stdout(args.output) else sys.stdout  # -o /dev/stdout: vectors only
    compiled = (f" (the set-up included {setup_compile:.1f} s of compiling: the vocabulary "
                f"scan's code, once per configuration)" if setup_compile >= 0.05 else "")
    print(f"vocabulary: {len(model.vocab):,} words (min_count {model.min_count}) from "
          f"{model.vocab.total_tokens:,} tokens{compiled}", file=out)
    print(f"model: {'skip-gram' if model.sg else 'CBOW'}, {model.layer.describe()}, "
          f"dim {model.vector_size}, window {model.window}", file=out)
    if getattr(model, "init_vectors_used", None) is not None:
        kept = " and kept (frozen)" if getattr(args, "freeze_init_vectors", False) else ""
        print(f"init vectors: {model.init_vectors_used:,} of {len(model.vocab):,} words started "
              f"from {args.init_vectors}{kept}, the others at random", file=out)
    if resumed:
        print(resumed, file=out)
    print(f"training: {report.summary()}", file=out)
    gpu = report.device_stats
    if gpu:
        if gpu.get("mode") == "sentence":
            work = (f"sentence form, {gpu['sentences']:,} sentences in {gpu['chunks']:,} "
                    f"launches of up to {gpu['blocks']:,} blocks")
        else:
            work = f"batched form, {gpu['pairs']:,} pairs in {gpu['batches']:,} batches"
        print(f"device: {gpu['device']} ({gpu['backend']}, {work}), "
              f"{gpu['device_seconds']:.1f} s at the device, peak memory in use "
              f"{gpu['peak_memory_bytes'] / 2**20:,.0f} MiB", file=out)
    if getattr(report, "dask", None) is not None:
        d = report.dask
        print(f"dask: {counted(d.workers, 'worker')} ({'+'.join(map(str, d.threads))} "
              f"threads), {counted(len(d.rounds), 'round')} of "
              f"{d.round_words:,} words a worker, {d.overhead_seconds:.1f} s outside training",
              file=out)
    print(f"wrote {args.output} ({fmt})" + (f" and {args.save_model} (model)" if args.save_model else "")
          + f"; total {seconds:.1f} s", file=out)
    probes = args.probe if args.probe else _default_probes(model)
    norms = None
    for word in probes:
        i = model.vocab.find(word)  # not vocab.index: the dict would be built for a few lookups
        if i is None:
            print(f"  {word}: not in the vocabulary", file=out)
            continue
        if norms is None:  # row by row: np.linalg.norm(axis=1) makes a temporary of them all
            norms = np.sqrt(np.einsum("ij,ij->i", model.syn0, model.syn0))
            norms[norms == 0] = 1.0
        near = ", ".join(f"{w} {s:.2f}" for w, s in _neighbours(model, norms, i, args.topn))
        print(f"  {word} -> {near}", file=out)


def _neighbours(model, norms, i: int, topn: int) -> list:
    """gensim's ``most_similar(word, topn)`` for word ``i`` (cosine; itself left out) over the
    model's own array, in numpy (``norms``: its rows' lengths): the copy ``model.wv`` makes,
    gensim's import and its norms' temporary were the last 60 MB of a run's peak memory at
    147k words (docs/performance.md)."""
    vectors = model.syn0
    sims = (vectors @ (vectors[i] / norms[i])) / norms
    sims[i] = -np.inf
    top = np.argpartition(-sims, min(topn, len(sims) - 1))[:topn]
    top = top[np.argsort(-sims[top], kind="stable")]
    return [(model.vocab.words[j], float(sims[j])) for j in top if np.isfinite(sims[j])]


# Function words say little about vector quality; skip them when picking probe words.
_FUNCTION_WORDS = set("""about above after again against also among another around because been before
being below between both could during each either every first from further have having here into
just like made make many might more most much must never only other over same should since some
such than that their them then there these they this those through under until upon very were what
when where which while will with within without would your""".split())


def _default_probes(model, n=4):
    """A few frequent content words (alphabetic, not function words, not the very top)."""
    words = model.vocab.words
    picks = [w for w in words[30:600] if w.isalpha() and len(w) > 3 and w.lower() not in _FUNCTION_WORDS]
    return picks[:n] or words[:n]


console = console_script(main)  # the console script (setup.cfg)

if __name__ == "__main__":
    console()
