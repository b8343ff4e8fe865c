"""semhuff-score: how well a saved model predicts held-out text.

    semhuff-score MODEL.npz CORPUS [CORPUS ...] [--workers N] [--json OUT]

Prints the mean negative log-likelihood per prediction (nats) and the perplexity: skip-gram
scores every (context, centre) pair of the full window, CBOW every centre from its full-window
context mean; no down-sampling; out-of-vocabulary words are dropped (semhuff.scoring). Needs a
model whose output layer gives normalised probabilities (hierarchical softmax over any tree).
"""
from __future__ import annotations

import argparse
import json
from typing import List, Optional

from semhuff.errors import CorpusError, OptionError
from semhuff.io_utils import atomic_output, check_writable
from semhuff.model import Word2Vec, default_workers

from .common import (HelpFormatter, add_deprecated_spelling, add_plugin_option, cli_main,
                     console_script, resolve_corpus)

PROG = "semhuff-score"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Held-out mean negative log-likelihood and "
                                "perplexity of a saved semhuff model (.npz).",
                                formatter_class=HelpFormatter)
    p.add_argument("model", help="a full model saved by semhuff-train (-o/--save-model *.npz)")
    p.add_argument("corpus", nargs="+", help="held-out text file(s) or directory; 'lee' = gensim's lee_background.cor")
    p.add_argument("--workers", type=int, default=default_workers(), help="scoring threads")
    p.add_argument("--json", help="also write the figures as JSON")
    add_plugin_option(p)
    p.add_argument("-q", "--quiet", action="count", default=0, help="only errors")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log each step (-vv: debug)")
    add_deprecated_spelling(p, "--threads", "--workers")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    return cli_main(PROG, build_parser, _run, argv)


def _run(args) -> int:
    if args.json:
        check_writable(args.json)
    if args.workers < 1:
        raise OptionError(f"--workers must be >= 1, got {args.workers}")
    _refuse_torch_file(args.model)
    model = Word2Vec.load(args.model, progress=False)
    report = model.score(resolve_corpus(args.corpus), workers=args.workers)
    if not report.predictions:  # not a perplexity of nan and exit 0
        raise CorpusError(nothing_to_score(args.corpus, report))
    print(f"model: {'skip-gram' if model.sg else 'CBOW'}, {model.layer.describe()}, "
          f"window {model.window}, {len(model.vocab):,} words")
    print(f"score: {report.summary()}")
    if args.json:
        figures = {"model": args.model, "corpus": args.corpus, "mean_nll": report.mean_nll,
                   "perplexity": report.perplexity, "predictions": report.predictions,
                   "tokens": report.tokens, "oov_tokens": report.oov_tokens,
                   "seconds": report.seconds, "words_per_second": report.words_per_second}
        with atomic_output(args.json, "w") as fh:
            json.dump(figures, fh, indent=1)
    return 0


def nothing_to_score(corpus: List[str], report) -> str:
    """Why a text gave no prediction: no words, none in the vocabulary, or no sentence with
    two of them (a prediction is a word from another of its sentence)."""
    where = ", ".join(corpus)
    known = report.tokens - report.oov_tokens
    if not report.tokens:
        return f"nothing to score: {where} holds no words"
    if not known:
        return (f"nothing to score: all {report.tokens:,} words of {where} are out of the "
                f"model's vocabulary")
    return (f"nothing to score: no sentence of {where} has two words in the model's vocabulary "
            f"({known:,} of its {report.tokens:,} words are in it)")


def _refuse_torch_file(path: str) -> None:
    """A PyTorch file (a zip holding data.pkl: semhuff-lm's models and checkpoints) is not a
    semhuff model: say which command takes it (without loading torch)."""
    import zipfile
    try:
        with zipfile.ZipFile(path) as archive:
            torch_file = any(n.endswith("data.pkl") for n in archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return
    if torch_file:
        raise OptionError(f"{path} is a PyTorch file (a semhuff-lm language model or "
                          f"checkpoint), not a semhuff-train model: score it with "
                          f"semhuff-lm score {path} TEXT...")


console = console_script(main)  # the console script (setup.cfg)

if __name__ == "__main__":
    console()
