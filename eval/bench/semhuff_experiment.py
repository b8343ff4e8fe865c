"""The SemHuff paper's experiment (§4) on our English corpus (issue 4): skip-gram with

* ``huffman``       hierarchical softmax over word2vec's Huffman tree,
* ``semhuff-wn``    hierarchical softmax over a SemHuff tree from WordNet similarity,
* ``semhuff-boot``  hierarchical softmax over a SemHuff tree bootstrapped from the ``huffman``
                    vectors of the same dimension and seed (their top-30 cosine neighbours),
* ``ns7``           negative sampling with 7 negatives,
* ``huffman+ns7``, ``semhuff-wn+ns7``: both output layers on the same input vectors (gensim's
                    ``hs=1, negative=7``; ``loss="hs+ns"``) over the Huffman / WordNet SemHuff tree,

for every dimension and seed, the same epochs / window / corpus for all; every cell is scored with
the evaluation suite (``semhuff.eval``: word-pair similarity, analogy, synonym MR/MRR, POS).

    python -m semhuff.eval.bench.semhuff_experiment --out /tmp/semhuff_exp --epochs 3
    (installed: python -m semhuff.eval.bench.semhuff_experiment ...)
    python -m semhuff.eval.bench.semhuff_experiment --out /tmp/semhuff_exp --report-only   # tables from what exists

Resumable: a cell whose vectors (``d{dim}_s{seed}_{method}.bin``) and training record already
exist in ``--out`` is not trained again, a cell with an evaluation record is not evaluated again;
the WordNet tree is built once and cached there. Every heavy step (tree, training, evaluation)
holds an exclusive ``flock`` on ``--lock`` so that heavy jobs on a shared machine run one at a
time. Writes ``results.json`` and ``results.md`` (mean ± half-range over seeds per cell, tree and
training times) to ``--out``. Generated files belong in /tmp, never in the repository.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import gzip
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional

from semhuff.data_paths import data_root

METHODS = ("huffman", "semhuff-wn", "semhuff-boot", "ns7", "huffman+ns7", "semhuff-wn+ns7")
LABELS = {"huffman": "HS-Huffman", "semhuff-wn": "HS-SemHuff (WordNet)",
          "semhuff-boot": "HS-SemHuff (bootstrap)", "ns7": "NS-7",
          "huffman+ns7": "HS-Huffman + NS-7", "semhuff-wn+ns7": "HS-SemHuff (WordNet) + NS-7"}
DEFAULT_CORPUS = "corpus/corpus.txt.gz"


def _loss(method: str) -> str:
    return "ns" if method == "ns7" else "hs+ns" if method.endswith("+ns7") else "hs"

# Rows of the summary table: (task, dataset, metric, label); every other score stays in the JSON.
HEADLINE = [
    ("synonyms", "wordnet", "MR", "Synonyms MR (WordNet pairs) ↓"),
    ("synonyms", "wordnet", "MRR", "Synonyms MRR ↑"),
    ("analogy", "google", "3CosAdd", "Analogy 3CosAdd, all ↑"),
    ("analogy", "google:semantic", "3CosAdd", "Analogy 3CosAdd, semantic ↑"),
    ("analogy", "google:syntactic", "3CosAdd", "Analogy 3CosAdd, syntactic ↑"),
    ("analogy", "google", "3CosMul", "Analogy 3CosMul, all ↑"),
    ("pos", "conll2000", "accuracy", "POS CoNLL-2000 accuracy ↑"),
    ("similarity", "ws353", "spearman", "WS-353 ρ ↑"),
    ("similarity", "ws353-sim", "spearman", "WS-353 sim ρ ↑"),
    ("similarity", "ws353-rel", "spearman", "WS-353 rel ρ ↑"),
    ("similarity", "simlex999", "spearman", "SimLex-999 ρ ↑"),
    ("similarity", "rg65", "spearman", "RG-65 ρ ↑"),
    ("similarity", "mc30", "spearman", "MC-30 ρ ↑"),
    ("similarity", "mturk287", "spearman", "MTurk-287 ρ ↑"),
]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)




@contextlib.contextmanager
def heavy_lock(path: Optional[str], what: str):
    """Hold an exclusive flock on ``path`` (None: no lock) while a heavy step runs."""
    if not path:
        yield
        return
    with open(path, "a") as handle:
        started = time.perf_counter()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for {path} ({what})")
            fcntl.flock(handle, fcntl.LOCK_EX)
            log(f"got the lock after {time.perf_counter() - started:.0f} s")
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, allow_nan=False, default=str) + "\n")
    os.replace(tmp, path)


def write_prefix(source: str, target: Path, max_tokens: int) -> int:
    """Write the first ``max_tokens`` whitespace tokens of ``source`` (plain or gzip) to ``target``
    as one line (text8 style); returns the number written. Kept if it already exists."""
    if target.exists():
        return -1
    opener = gzip.open if source.endswith(".gz") else open
    written, carry = 0, ""
    tmp = target.with_name(target.name + ".tmp")
    with opener(source, "rt", encoding="utf-8", errors="replace") as src, open(tmp, "w") as out:
        while written < max_tokens:
            block = src.read(1 << 20)
            if not block:
                tokens = carry.split()
            else:
                text = carry + block
                cut = max(text.rfind(" "), text.rfind("\n"))
                tokens, carry = (text[:cut].split(), text[cut:]) if cut >= 0 else ([], text)
            tokens = tokens[:max_tokens - written]
            if tokens:
                out.write((" " if written else "") + " ".join(tokens))
                written += len(tokens)
            if not block:
                break
        out.write("\n")
    os.replace(tmp, target)
    return written


class Experiment:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.corpus_path = args.corpus
        self._vocab = None

    # -- files ----------------------------------------------------------------------------------
    def stem(self, dim: int, seed: int, method: str) -> Path:
        return self.out / f"d{dim}_s{seed}_{method}"

    def vectors_path(self, dim, seed, method) -> Path:
        return self.stem(dim, seed, method).with_suffix(".bin")

    def train_record(self, dim, seed, method) -> Path:
        return Path(str(self.stem(dim, seed, method)) + ".train.json")

    def eval_record(self, dim, seed, method) -> Path:
        return Path(str(self.stem(dim, seed, method)) + ".eval.json")

    # -- building blocks ------------------------------------------------------------------------
    def vocab(self):
        if self._vocab is None:
            from semhuff.corpus import Corpus
            from semhuff.vocab import Vocab
            started = time.perf_counter()
            self._vocab = Vocab.build(Corpus(self.corpus_path), self.args.min_count)
            log(f"vocabulary: {len(self._vocab):,} words, {self._vocab.total_tokens:,} tokens "
                f"({time.perf_counter() - started:.1f} s)")
        return self._vocab

    def build_tree(self, similarity):
        """A SemHuff tree over the vocabulary and the seconds it took (similarity + matching)."""
        from semhuff.trees import make_tree
        vocab = self.vocab()
        started = time.perf_counter()
        tree = make_tree("semhuff", vocab, similarity=similarity, top_k=self.args.top_k)
        seconds = time.perf_counter() - started
        tree.validate()
        huffman = make_tree("huffman", vocab)
        ecl, ecl_huff = tree.expected_code_length(vocab.counts), huffman.expected_code_length(vocab.counts)
        if not math.isclose(ecl, ecl_huff, rel_tol=1e-9):
            log(f"WARNING: SemHuff expected code length {ecl:.6f} != Huffman's {ecl_huff:.6f}")
        return tree, {"tree_seconds": round(seconds, 2), "expected_code_length": ecl,
                      "huffman_expected_code_length": ecl_huff, "max_depth": int(tree.max_depth)}

    def wordnet_tree(self):
        """Built once, cached in --out (``tree_wordnet.npz`` + its build record)."""
        from semhuff.trees.base import Tree
        path, record = self.out / "tree_wordnet.npz", self.out / "tree_wordnet.json"
        if path.exists() and record.exists():
            return Tree.load(str(path)), json.loads(record.read_text())
        log("building the WordNet SemHuff tree")
        tree, info = self.build_tree("wordnet")
        tree.save(str(path))
        write_json(record, info)
        log(f"WordNet tree: {info['tree_seconds']:.1f} s")
        return Tree.load(str(path)), info

    # -- one cell -------------------------------------------------------------------------------
    def train_cell(self, dim: int, seed: int, method: str) -> None:
        from semhuff import Word2Vec
        vec, record = self.vectors_path(dim, seed, method), self.train_record(dim, seed, method)
        if vec.exists() and record.exists():
            return
        tree_info: Dict = {}
        if method in ("huffman", "ns7", "huffman+ns7"):
            tree = "huffman"
        elif method in ("semhuff-wn", "semhuff-wn+ns7"):
            tree, tree_info = self.wordnet_tree()
            tree_info = {**tree_info, "tree_cached": True}
        else:  # semhuff-boot: top-k neighbours of the huffman vectors of this dim and seed
            source = self.vectors_path(dim, seed, "huffman")
            if not source.exists():
                raise SystemExit(f"{source} is missing: train the huffman cell first")
            log(f"building the bootstrapped SemHuff tree from {source.name}")
            tree, tree_info = self.build_tree(str(source))
            log(f"bootstrapped tree: {tree_info['tree_seconds']:.1f} s")
        log(f"training d{dim} s{seed} {method}, {self.args.epochs} epochs")
        model = Word2Vec(None, vector_size=dim, window=self.args.window, min_count=self.args.min_count,
                         sample=self.args.sample, sg=1, loss=_loss(method),
                         epochs=self.args.epochs, workers=self.args.workers, seed=seed,
                         progress=False, **self.layer_settings(method, tree))
        model.set_vocab(self.vocab())  # the same vocabulary for every cell: no second scan
        report = model.train(self.corpus_path)
        tmp = vec.with_name(vec.stem + ".tmp.bin")
        model.save_vectors(str(tmp))
        os.replace(tmp, vec)
        info = {"dim": dim, "seed": seed, "method": method, "epochs": self.args.epochs,
                "train_seconds": round(report.seconds, 2),
                "compile_seconds": round(report.compile_seconds, 2),
                "words_per_second": round(report.words_per_second),
                "raw_words": report.raw_words, "trained_words": report.trained_words,
                "loss_per_pair": [e.loss_per_pair for e in report.epochs],
                "vocab_size": len(model.vocab), "workers": self.args.workers,
                "layer": model.layer.describe(), "hs_order": getattr(model, "hs_order", None),
                **tree_info}
        write_json(record, info)
        log(f"d{dim} s{seed} {method}: {report.seconds:.1f} s, {report.words_per_second:,.0f} words/s, "
            f"loss {info['loss_per_pair'][-1]:.4f}")

    def layer_settings(self, method: str, tree) -> dict:
        """The output layer's own settings: negative sampling's, or the tree's and HS order."""
        if method == "ns7":
            return {"negative": self.args.negative}
        negative = {"negative": self.args.negative} if method.endswith("+ns7") else {}
        return {"tree": tree, **negative,
                **({"hs_order": self.args.hs_order} if self.args.hs_order else {})}

    def suite_config(self):
        from semhuff.eval import SuiteConfig
        return SuiteConfig(pos_corpora=tuple(self.args.pos_corpora.split(",")),
                           data_dir=Path(self.args.data_dir) if self.args.data_dir else None)

    def evaluate_cell(self, dim: int, seed: int, method: str) -> None:
        from semhuff.eval import dump_json, load_vectors, run_suite
        vec, record = self.vectors_path(dim, seed, method), self.eval_record(dim, seed, method)
        if record.exists() or not vec.exists():
            return
        started = time.perf_counter()
        report = run_suite([load_vectors(str(vec), name=f"d{dim}_s{seed}_{method}")],
                           self.suite_config(), threads=1)
        tmp = record.with_name(record.name + ".tmp")
        with open(tmp, "w") as handle:
            dump_json(report, handle)
        os.replace(tmp, record)
        log(f"evaluated d{dim} s{seed} {method} in {time.perf_counter() - started:.0f} s")

    def run(self) -> None:
        a = self.args
        for dim in a.dims:
            for seed in a.seeds:
                for method in a.methods:
                    if self.done(dim, seed, method):
                        continue
                    # one lock per cell (training + evaluation): heavy jobs take turns cell by cell
                    with heavy_lock(a.lock, f"d{dim} s{seed} {method}"):
                        self.train_cell(dim, seed, method)
                        if not a.no_eval:
                            self.evaluate_cell(dim, seed, method)

    def done(self, dim, seed, method) -> bool:
        trained = self.vectors_path(dim, seed, method).exists() and self.train_record(dim, seed, method).exists()
        return trained and (self.args.no_eval or self.eval_record(dim, seed, method).exists())

    # -- summary --------------------------------------------------------------------------------
    def collect(self) -> dict:
        a = self.args
        cells = {}
        for dim in a.dims:
            for method in a.methods:
                per_seed = {}
                for seed in a.seeds:
                    entry = {}
                    tr, ev = self.train_record(dim, seed, method), self.eval_record(dim, seed, method)
                    if tr.exists():
                        entry["train"] = json.loads(tr.read_text())
                    if ev.exists():
                        data = json.loads(ev.read_text())
                        model = data["models"][0]
                        entry["scores"] = {f"{s['task']}/{s['dataset']}/{s['metric']}": s["value"]
                                           for s in model["scores"]}
                        entry["coverage"] = {f"{s['task']}/{s['dataset']}/{s['metric']}":
                                             [s["covered"], s["total"]] for s in model["scores"]}
                        entry["eval_seconds"] = data["seconds"]
                        entry["skipped"] = data["skipped"]
                    if entry:
                        per_seed[str(seed)] = entry
                cells[f"d{dim}/{method}"] = {"dim": dim, "method": method, "seeds": per_seed,
                                             "summary": summarize(per_seed)}
        return {"settings": {k: v for k, v in vars(a).items() if k not in ("func",)},
                "methods": {m: LABELS[m] for m in a.methods}, "cells": cells,
                "spread": "half the range over seeds, (max - min) / 2", "written": time.strftime(
                    "%Y-%m-%d %H:%M:%S UTC", time.gmtime())}

    def write_report(self) -> dict:
        results = self.collect()
        write_json(self.out / "results.json", results)
        md = markdown(results, self.args)
        (self.out / "results.md").write_text(md)
        print(md)
        return results


def stats(values: List[float]) -> Optional[dict]:
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not values:
        return None
    return {"mean": sum(values) / len(values), "spread": (max(values) - min(values)) / 2,
            "n": len(values), "values": values}


def summarize(per_seed: dict) -> dict:
    keys = sorted({k for e in per_seed.values() for k in e.get("scores", {})})
    out = {"scores": {k: stats([e["scores"].get(k) for e in per_seed.values() if "scores" in e])
                      for k in keys}}
    for name in ("train_seconds", "tree_seconds", "words_per_second"):
        out[name] = stats([e["train"].get(name) for e in per_seed.values() if "train" in e])
    out["final_loss"] = stats([e["train"]["loss_per_pair"][-1] for e in per_seed.values() if "train" in e])
    out["eval_seconds"] = stats([e.get("eval_seconds") for e in per_seed.values() if "eval_seconds" in e])
    return out


def fmt(s: Optional[dict], metric: str) -> str:
    if s is None:
        return "–"
    if metric == "MR":
        return f"{s['mean']:,.0f} ± {s['spread']:,.0f}"
    if metric in ("MRR", "accuracy"):  # small differences that matter
        return f"{s['mean']:.4f} ± {s['spread']:.4f}"
    return f"{s['mean']:.3f} ± {s['spread']:.3f}"


def markdown(results: dict, args) -> str:
    lines = [f"Mean ± half-range over seeds {','.join(map(str, args.seeds))} "
             f"({args.epochs} epochs, window {args.window}). "
             "Verdict columns compare the means: ✓ SemHuff ≥ Huffman, ✗ worse; "
             "(≈) when the gap is within the sum of both spreads.", ""]
    methods = list(args.methods)
    for dim in args.dims:
        cells = {m: results["cells"][f"d{dim}/{m}"]["summary"] for m in methods}
        semhuffs = [m for m in methods if m.startswith("semhuff")]
        header = ["dim " + str(dim)] + [LABELS[m] for m in methods]
        header += [f"{LABELS[m].split(' ', 1)[1]} ≥ Huffman?" for m in semhuffs if "huffman" in methods]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for task, dataset, metric, label in HEADLINE:
            key = f"{task}/{dataset}/{metric}"
            row = [label] + [fmt(cells[m]["scores"].get(key), metric) for m in methods]
            if "huffman" in methods:
                base = cells["huffman"]["scores"].get(key)
                for m in semhuffs:
                    row.append(verdict(base, cells[m]["scores"].get(key), lower_better=(metric == "MR")))
            if any(c != "–" for c in row[1:1 + len(methods)]):
                lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    lines += ["Timings in seconds, mean ± half-range over seeds, except training time and words/s: "
              "fastest seed (slowest in brackets), since other jobs on the shared 2-core machine "
              "slowed some cells down. 2 workers.", "",
              "| dim | method | tree build | training | words/s | final loss/pair | evaluation |",
              "|---|---|---|---|---|---|---|"]
    for dim in args.dims:
        for m in methods:
            s = results["cells"][f"d{dim}/{m}"]["summary"]
            t = lambda x, p=1: "–" if x is None else f"{x['mean']:,.{p}f} ± {x['spread']:,.{p}f}"
            best = lambda x, low: "–" if x is None else (
                f"{min(x['values']):,.1f} ({max(x['values']):,.1f})" if low
                else f"{max(x['values']):,.0f} ({min(x['values']):,.0f})")
            tree = t(s["tree_seconds"]) + (" (built once, cached)" if m == "semhuff-wn" and s["tree_seconds"] else "")
            lines.append(f"| {dim} | {LABELS[m]} | {tree if m.startswith('semhuff') else '–'} | "
                         f"{best(s['train_seconds'], True)} | {best(s['words_per_second'], False)} | "
                         f"{t(s['final_loss'], 4)} | {t(s['eval_seconds'], 0)} |")
    lines.append("")
    return "\n".join(lines)


def verdict(base: Optional[dict], other: Optional[dict], lower_better: bool) -> str:
    if base is None or other is None:
        return "–"
    diff = other["mean"] - base["mean"]
    better = diff <= 0 if lower_better else diff >= 0
    close = abs(diff) <= base["spread"] + other["spread"]
    return ("✓" if better else "✗") + (" (≈)" if close else "")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default=None, help=f"training corpus (default: <data>/{DEFAULT_CORPUS})")
    p.add_argument("--max-tokens", type=int, default=0,
                   help="train on the first N tokens only (written once to <out>/prefix_N.txt); 0 = all")
    p.add_argument("--out", required=True, help="output folder (vectors, records, results); use /tmp")
    p.add_argument("--dims", default="50,200")
    p.add_argument("--seeds", default="1,2")
    p.add_argument("--methods", default=",".join(METHODS[:4]),
                   help=f"subset of {','.join(METHODS)} (default: the first four)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--window", type=int, default=5)
    p.add_argument("--min-count", type=int, default=5)
    p.add_argument("--sample", type=float, default=1e-3)
    p.add_argument("--negative", type=int, default=7)
    p.add_argument("--top-k", type=int, default=30, help="similarity neighbours per word for the trees")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--hs-order", choices=("mixed", "word2vec", "batched"), default=None,
                   help="skip-gram HS update order (default: the trainer's default; the documented "
                        "run used 'batched', the default before commit c230fb4)")
    p.add_argument("--pos-corpora", default="conll2000", help="POS corpora for the suite (default conll2000 only)")
    p.add_argument("--data-dir", default=None, help="evaluation data root (default $SEMHUFF_DATA)")
    p.add_argument("--lock", default="/tmp/semhuff-heavy.lock", help="flock file for heavy steps; '' = none")
    p.add_argument("--no-eval", action="store_true", help="train only")
    p.add_argument("--report-only", action="store_true", help="only write results.json / results.md")
    args = p.parse_args(argv)
    args.dims = [int(x) for x in args.dims.split(",")]
    args.seeds = [int(x) for x in args.seeds.split(",")]
    args.methods = [m for m in args.methods.split(",") if m]
    bad = [m for m in args.methods if m not in METHODS]
    if bad:
        p.error(f"unknown method(s): {', '.join(bad)}")
    if "semhuff-boot" in args.methods and "huffman" not in args.methods:
        p.error("semhuff-boot needs the huffman cells (add huffman to --methods)")
    args.methods = [m for m in METHODS if m in args.methods]  # huffman before semhuff-boot
    if args.corpus is None:
        args.corpus = str(data_root() / DEFAULT_CORPUS)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.max_tokens:
        prefix = out / f"prefix_{args.max_tokens}.txt"
        n = write_prefix(args.corpus, prefix, args.max_tokens)
        if n >= 0:
            log(f"wrote the first {n:,} tokens of {args.corpus} to {prefix}")
        args.corpus = str(prefix)
    experiment = Experiment(args)
    if not args.report_only:
        experiment.run()
    experiment.write_report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
