"""Held-out comparison of output layers and trees: the same skip-gram model, the same vocabulary,
trained on the corpus minus its last N tokens, scored on those N tokens (``model.score``: mean
negative log-likelihood per prediction and perplexity, full window, no down-sampling), with
tree-building time, training words/s, scoring speed and, with ``--suite``, the evaluation suite.

    python -m semhuff.eval.bench.compare_trees --out /tmp/trees            # huffman, semhuff-wn, semhuff-boot
    python -m semhuff.eval.bench.compare_trees --out /tmp/trees --methods huffman,ns --suite

Methods (``METHODS``: name -> (loss, tree, layer options)):

* ``unigram``: an untrained Huffman model (every branch 1/2, i.e. the unigram distribution);
* ``huffman``; ``semhuff-wn`` (SemHuff over WordNet similarity); ``semhuff-boot`` (SemHuff over
  the top-30 cosine neighbours of this run's ``huffman`` vectors);
* ``random``, ``alphabetical``: balanced trees over the words in a random / alphabetical order
  (the p-tHSM poster's baselines); ``clusters``: random clusters in binary form, never
  re-organized (the self-organized tree's starting point);
* ``so-binary``: the self-organized binary tree (defaults: re-organized during the first third);
  ``so-binary-paper``: re-organized to the end, as the paper does; ``so-binary-lift-paper``: the
  same, ranked by lift;
* ``so-two-level``: the self-organized two-level class softmax; ``freq-class``: the two-level
  class softmax over frequency-binned classes (Mikolov et al. 2011);
* ``ns``: negative sampling (no probabilities: suite only).

Self-organized methods measure cluster / in-cluster perplexity on the first 20,000 held-out
tokens at every re-assignment (their history, saved in ``<method>.npz``, plotted by
``semhuff-tree clusters MODEL --plot``).

Resumable: a method whose record (``<method>.json``) exists in ``--out`` is not run again. The
split files, vectors and records stay in ``--out`` (use /tmp, never the repository);
``results.json`` and ``results.md`` are rewritten from all records at the end.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Dict

import numpy as np

from semhuff.data_paths import missing_message, shared_corpus

from .semhuff_experiment import HEADLINE


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def split_corpus(source: str, out: Path, held_out: int):
    """Write ``train.txt`` (all but the last ``held_out`` tokens) and ``heldout.txt`` (the last
    ``held_out``), one corpus piece per line; kept if they exist. Returns their paths."""
    from semhuff.corpus import Corpus
    train, test = out / "train.txt", out / "heldout.txt"
    if train.exists() and test.exists():
        return train, test
    total = sum(len(piece) for piece in Corpus(source))
    if total <= held_out:
        raise SystemExit(f"the corpus has {total:,} tokens, not more than --held-out {held_out:,}")
    cut, seen = total - held_out, 0
    with open(str(train) + ".tmp", "w") as ft, open(str(test) + ".tmp", "w") as fh:
        for piece in Corpus(source):
            head = piece[: max(0, cut - seen)]
            tail = piece[len(head):]
            if head:
                ft.write(" ".join(head) + "\n")
            if tail:
                fh.write(" ".join(tail) + "\n")
            seen += len(piece)
    os.replace(str(train) + ".tmp", train)
    os.replace(str(test) + ".tmp", test)
    log(f"split {source}: {cut:,} training tokens, {held_out:,} held out")
    return train, test


class Comparison:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.train_path, self.test_path = split_corpus(args.corpus, self.out, args.held_out)
        self._vocab = None

    def vocab(self):
        if self._vocab is None:
            from semhuff.vocab import Vocab
            from semhuff.corpus import Corpus
            self._vocab = Vocab.build(Corpus(str(self.train_path)), self.args.min_count)
        return self._vocab

    def vectors(self, method: str) -> Path:
        return self.out / f"{method}.bin"

    # -- trees -------------------------------------------------------------------------------
    def semhuff_tree(self, similarity):
        from semhuff.trees import make_tree
        return make_tree("semhuff", self.vocab(), similarity=similarity)

    def tree_for(self, method: str):
        """(tree spec for Word2Vec, loss, layer options)."""
        loss, tree, options = METHODS[method]
        if tree == "semhuff-wn":
            tree = self.semhuff_tree("wordnet")
        elif tree == "semhuff-boot":
            source = self.vectors("huffman")
            if not source.exists():
                raise SystemExit(f"{source} is missing: run the huffman method first")
            tree = self.semhuff_tree(str(source))
        if loss == "hs-self-organized" or (loss == "class" and "clustering" not in options):
            options = dict(options, heldout=str(self.test_path), heldout_tokens=20_000)
        return tree, loss, options

    # -- one method ----------------------------------------------------------------------------
    def run(self, method: str) -> dict:
        from semhuff import Word2Vec
        a = self.args
        record = self.out / f"{method}.json"
        if record.exists():
            return json.loads(record.read_text())
        started = time.perf_counter()
        tree, loss, options = self.tree_for(method)
        tree_seconds = time.perf_counter() - started
        model = Word2Vec(vector_size=a.dim, window=a.window, min_count=a.min_count,
                         sample=a.sample, sg=1, loss=loss, tree=tree, epochs=a.epochs,
                         workers=a.workers, seed=a.seed, progress=False, layer_options=options)
        model.set_vocab(self.vocab())
        info = {"method": method, "layer": model.layer.describe(),
                "tree_seconds": round(tree_seconds, 2), "vocab_size": len(model.vocab)}
        if model.tree is not None:
            info["expected_code_length"] = model.tree.expected_code_length(model.vocab.counts)
        if method != "unigram":
            log(f"{method}: training ({model.layer.describe()})")
            report = model.train(str(self.train_path))
            info.update(train_seconds=round(report.seconds, 2),
                        words_per_second=round(report.words_per_second),
                        loss_per_pair=[e.loss_per_pair for e in report.epochs],
                        hook_seconds=round(report.hook_seconds, 2))
            model.save_vectors(str(self.vectors(method)))
        organizer = getattr(model.layer, "organizer", None)
        if organizer is not None and len(organizer.history):
            history = organizer.history_dict()
            info.update(reassign_seconds=round(float(np.nansum(history["seconds"])), 2),
                        diagnose_seconds=round(float(np.nansum(history["diagnose_seconds"])), 2),
                        history={k: [None if np.isnan(v) else float(v) for v in vs]
                                 for k, vs in history.items()})
            model.save(str(self.out / f"{method}.npz"))
        if model.layer.normalised:
            clustered = getattr(model.layer, "has_clusters", False)
            score = model.score(str(self.test_path), clusters=clustered)
            info.update(heldout_mean_nll=score.mean_nll, heldout_perplexity=score.perplexity,
                        heldout_predictions=score.predictions, score_seconds=round(score.seconds, 2),
                        score_words_per_second=round(score.words_per_second))
            if clustered:
                info.update(cluster_perplexity=score.cluster_perplexity,
                            in_cluster_perplexity=score.in_cluster_perplexity)
            log(f"{method}: {score.summary()}")
        if a.suite and method != "unigram":
            info["suite"] = self.suite(method)
        record.write_text(json.dumps(info, indent=1))
        return info

    def suite(self, method: str) -> Dict[str, float]:
        from semhuff.eval import SuiteConfig, load_vectors, run_suite
        report = run_suite([load_vectors(str(self.vectors(method)), name=method)],
                           SuiteConfig(pos_corpora=("conll2000",)), threads=1)
        return {f"{s.task}/{s.dataset}/{s.metric}": s.value for s in report.models[0].scores}


def markdown(records: list, args) -> str:
    lines = [f"Skip-gram, dim {args.dim}, window {args.window}, {args.epochs} epochs, sample "
             f"{args.sample}, min_count {args.min_count}, seed {args.seed}, {args.workers} workers; "
             f"trained on all but the last {args.held_out:,} tokens of {args.corpus}, scored on those.",
             "", "| method | layer | held-out nll/prediction | perplexity | cluster / in-cluster "
             "ppl | tree s | train words/s | re-assign + diagnose s | score words/s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    f = lambda r, k, spec: format(r[k], spec) if r.get(k) is not None else "–"
    for r in records:
        clusters = (f"{f(r, 'cluster_perplexity', ',.1f')} / {f(r, 'in_cluster_perplexity', ',.1f')}"
                    if "cluster_perplexity" in r else "–")
        hooks = (f"{f(r, 'reassign_seconds', '.1f')} + {f(r, 'diagnose_seconds', '.1f')}"
                 if "reassign_seconds" in r else "–")
        lines.append(f"| {r['method']} | {r['layer']} | {f(r, 'heldout_mean_nll', '.4f')} | "
                     f"{f(r, 'heldout_perplexity', ',.1f')} | {clusters} | {f(r, 'tree_seconds', '.1f')} | "
                     f"{f(r, 'words_per_second', ',')} | {hooks} | {f(r, 'score_words_per_second', ',')} |")
    suites = [r for r in records if "suite" in r]
    if suites:
        lines += ["", "| task | " + " | ".join(r["method"] for r in suites) + " |",
                  "|---|" + "---:|" * len(suites)]
        for task, dataset, metric, label in HEADLINE:  # every score stays in results.json
            values = [r["suite"].get(f"{task}/{dataset}/{metric}") for r in suites]
            fmt = ",.0f" if metric == "MR" else ".4f"
            lines.append(f"| {label} | " + " | ".join("–" if v is None else format(v, fmt) for v in values) + " |")
    return "\n".join(lines) + "\n"


METHODS = {
    "unigram": ("hs", "huffman", {}),
    "huffman": ("hs", "huffman", {}),
    "semhuff-wn": ("hs", "semhuff-wn", {}),
    "semhuff-boot": ("hs", "semhuff-boot", {}),
    "random": ("hs", "random", {}),
    "alphabetical": ("hs", "alphabetical", {}),
    "clusters": ("hs", "clusters", {}),
    "so-binary": ("hs-self-organized", None, {}),
    "so-binary-paper": ("hs-self-organized", None, {"reassign_until": 1.0}),
    "so-binary-lift-paper": ("hs-self-organized", None, {"criterion": "lift", "reassign_until": 1.0}),
    "so-two-level": ("class", None, {}),
    "freq-class": ("class", None, {"clustering": "frequency"}),
    "ns": ("ns", None, {}),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default=str(shared_corpus()))
    p.add_argument("--out", required=True, help="working folder (use /tmp)")
    p.add_argument("--held-out", type=int, default=1_000_000, help="tokens at the end to score on")
    p.add_argument("--methods", default="unigram,huffman,semhuff-wn,semhuff-boot")
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--sample", type=float, default=1e-3)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--suite", action="store_true", help="also run the evaluation suite")
    args = p.parse_args(argv)
    if not os.path.exists(args.corpus):
        print(f"compare_trees: {missing_message(args.corpus, 'corpus')}", file=sys.stderr)
        return 2
    methods = [m for m in args.methods.split(",") if m]
    bad = [m for m in methods if m not in METHODS]
    if bad:
        p.error(f"unknown method(s) {', '.join(bad)}; choose from {', '.join(METHODS)}")
    logging.basicConfig(level=logging.WARNING)
    comparison = Comparison(args)
    records = [comparison.run(m) for m in methods]
    (comparison.out / "results.json").write_text(json.dumps(records, indent=1))
    table = markdown(records, args)
    (comparison.out / "results.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
