"""The word2vec part of the prepared GPU check (``eval/bench/gpu_session.sh``): the GPU trainer
against the CPU trainer, same corpus, same settings, speed and quality, into one JSON file.

    python -m semhuff.eval.bench.gpu_word2vec_check --corpus PATH --eval-data DIR --out FILE
        [--epochs 5] [--configs sg-hs sg-ns cbow-hs] [--forms sentence batched]
        [--extra blocks=512 updates=plain ...] [--time-budget SECONDS] [--quick]

For each configuration (skip-gram HS, skip-gram NS, CBOW HS: dim 100, window 5, min_count 5,
sample 1e-3, alpha 0.025 -> 0.0001, Huffman tree, the layers' default orders) it trains the
CPU trainer (all cores) and ``--device cuda`` in each form (the sentence-per-block kernel, the
default; and the batched p-tHSM form), and writes, per run: ``words_per_second`` (raw words over
the training time, compilation excluded), the same after the first epoch (which tokenises),
``peak_device_mib``, ``ws353``, ``simlex``, ``analogy`` (``light_quality``: gensim's protocol,
no gensim needed), the loss per prediction of the last epoch, and what the device did. The file
is rewritten after every run, and every run prints one line: a check cut short still reports.
The vocabulary is scanned once and shared by every run. ``--extra`` adds sentence-form runs of
the first configuration with other device settings, one run per argument (``blocks=0``: one
block a sentence, thousands in flight, the staleness docs/gpu.md's concurrency estimate is
about; ``updates=plain``: plain stores). Past ``--time-budget`` the remaining runs are recorded
as skipped.

``--quick``: a smoke test on any machine (the CUDA simulator where there is no GPU): a 600-
token corpus, dim 16, window 3, one epoch; its figures mean nothing but that every step runs.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

CONFIGS = {"sg-hs": dict(sg=1, loss="hs"), "sg-ns": dict(sg=1, loss="ns"),
           "cbow-hs": dict(sg=0, loss="hs")}
FORMS = ("sentence", "batched")


def settings(args) -> dict:
    return dict(vector_size=args.dim, window=args.window, min_count=args.min_count, sample=1e-3,
                alpha=0.025, min_alpha=0.0001, epochs=args.epochs, seed=1, progress=False)


def train(corpus, vocab, config, args, device_options=None) -> dict:
    """One run; its figures (or the one-line reason it failed)."""
    from semhuff import Word2Vec
    from semhuff.errors import SemhuffError
    from semhuff.eval.bench.light_quality import quality
    on_device = device_options is not None
    try:
        model = Word2Vec(**settings(args), **CONFIGS[config], workers=os.cpu_count(),
                         device="cuda" if on_device else "cpu",
                         device_options=device_options or {})
        model.set_vocab(vocab)
        report = model.train(corpus, _epoch_words=(vocab.retained_tokens, vocab.total_tokens))
    except SemhuffError as exc:
        return {"failed": " ".join(str(exc).split())}
    later = report.epochs[1:]
    later_seconds = sum(e.seconds for e in later)
    out = {"words_per_second": round(report.words_per_second),
           "words_per_second_after_epoch_1": (round(sum(e.raw_words for e in later)
                                                    / later_seconds) if later_seconds else None),
           "seconds": round(report.seconds, 2), "compile_seconds": round(report.compile_seconds, 2),
           "loss_per_prediction": round(report.epochs[-1].loss_per_pair, 4)}
    stats = report.device_stats
    if stats:
        out.update(peak_device_mib=round(stats["peak_memory_bytes"] / 2 ** 20, 1),
                   model_mib=round(stats["model_bytes"] / 2 ** 20, 1),
                   device_seconds=round(stats["device_seconds"], 2),
                   device=stats["device"], mode=stats.get("mode", "batched"))
        out.update({k: stats[k] for k in ("blocks", "sentences", "chunks", "batches")
                    if k in stats})
    else:
        out["peak_device_mib"] = None
    # the vocabulary and input vectors themselves: ``model.wv`` would need gensim
    scores = quality(model.vocab.words, model.syn0, args.eval_data)
    out.update({k: round(v, 4) if v == v else None for k, v in scores.items()})  # NaN: no pair
    return out


def line(config: str, name: str, r: dict) -> str:
    if "failed" in r or "skipped" in r:
        return f"{config:8} {name:16} {r.get('failed') or r.get('skipped')}"
    after = r["words_per_second_after_epoch_1"]
    return (f"{config:8} {name:16} {r['words_per_second']:>12,} words/s"
            + (f" ({after:,} after epoch 1)" if after else "")
            + "  " + " ".join(f"{k} {r[k]:.3f}" if r[k] is not None else f"{k} -"
                              for k in ("ws353", "simlex", "analogy"))
            + f"  loss {r['loss_per_prediction']:.3f}"
            + (f"  peak {r['peak_device_mib']:,.0f} MiB" if r.get("peak_device_mib") else ""))


def _options(text: str) -> dict:
    """``blocks=512,updates=plain`` -> {"blocks": 512, "updates": "plain"}."""
    out = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        out[name.strip()] = int(value) if value.strip().lstrip("-").isdigit() else value.strip()
    return out


def quick_corpus(folder: str) -> str:
    """A small corpus with structure (a Markov chain over 60 words), for --quick."""
    import numpy as np
    rng = np.random.default_rng(0)
    nxt = rng.integers(0, 60, size=(60, 3))
    w, words = 0, []
    for k in rng.integers(0, 3, size=600):
        w = nxt[w, k]
        words.append(f"w{w}")
    path = os.path.join(folder, "quick.txt")
    with open(path, "w") as fh:
        for i in range(0, len(words), 40):
            fh.write(" ".join(words[i:i + 40]) + "\n")
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gpu_word2vec_check", description=__doc__.split("\n")[0])
    p.add_argument("--corpus", help="the training corpus (default: the shared corpus)")
    p.add_argument("--eval-data", help="folder holding wordsim353.tsv, simlex999.txt and "
                   "questions-words.txt (default: gensim's copies)")
    p.add_argument("--out", required=True, help="the JSON file written")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    p.add_argument("--forms", nargs="+", choices=FORMS, default=list(FORMS))
    p.add_argument("--extra", nargs="*", default=[], metavar="NAME=VALUE[,NAME=VALUE]",
                   help="more sentence-form runs of the first configuration, each with these "
                        "device settings (blocks=N, updates=plain, sentence_words=N, ...)")
    p.add_argument("--time-budget", type=float, default=0, help="seconds (0: none)")
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("semhuff").setLevel(logging.ERROR)
    import tempfile
    from semhuff.corpus import Corpus
    from semhuff.vocab import Vocab
    folder = tempfile.mkdtemp(prefix="semhuff-gpu-check-")
    if args.quick:
        args.corpus = args.corpus or quick_corpus(folder)
        args.dim, args.epochs, args.min_count, args.window = 16, 1, 1, 3
    if args.corpus is None:
        from semhuff.data_paths import shared_corpus
        args.corpus = str(shared_corpus())
    if args.eval_data is None:
        from semhuff.eval.bench.light_quality import gensim_data_folder
        args.eval_data = gensim_data_folder()
    started = time.perf_counter()
    corpus = Corpus(args.corpus)
    vocab = Vocab.build(corpus, args.min_count)
    result = {"corpus": args.corpus, "tokens": vocab.total_tokens, "vocabulary": len(vocab),
              "settings": {**settings(args), "configs": args.configs},
              "cpu_cores": os.cpu_count(), "runs": {}}
    print(f"corpus {args.corpus}: {vocab.total_tokens:,} tokens, {len(vocab):,} words; "
          f"{args.epochs} epochs, dim {args.dim}; {os.cpu_count()} CPU cores "
          f"(vocabulary {time.perf_counter() - started:.1f} s)", flush=True)

    def save():
        tmp = args.out + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(result, fh, indent=1)
        os.replace(tmp, args.out)

    # the most wanted first, so that a check cut short by its budget has them: the CPU trainer
    # and the default form for every configuration, then the batched form, then the extras
    plan = []
    for config in args.configs:
        plan += [(config, "cpu", None)]
        plan += [(config, "sentence", {"mode": "sentence"})] if "sentence" in args.forms else []
    plan += [(config, "batched", {"mode": "batched"}) for config in args.configs
             if "batched" in args.forms]
    plan += [(args.configs[0], f"sentence {extra}", {"mode": "sentence", **_options(extra)})
             for extra in args.extra]
    for config, name, options in plan:
        runs = result["runs"].setdefault(config, {"cpu": None, "device": {}})
        if args.time_budget and time.perf_counter() - started > args.time_budget:
            r = {"skipped": f"the time budget ({args.time_budget:.0f} s) was spent"}
        else:
            r = train(corpus, vocab, config, args, options)
        if options is None:
            runs["cpu"] = r
        else:
            runs["device"][name] = r
        save()
        print(line(config, name, r), flush=True)
    result["seconds"] = round(time.perf_counter() - started, 1)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
