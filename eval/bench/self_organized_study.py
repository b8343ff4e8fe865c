"""The self-organized tree's open choices, measured: the greedy's ranking (``criterion``: the
paper's log-prob, or lift), the smoothing of q (``smoothing``: the paper's printed 1/f_w, one
epoch, one re-assignment interval), the sampling density of the binary form
(``samples_per_word``), on one corpus, scored on held-out text.

    python -m semhuff.eval.bench.self_organized_study --train /tmp/prefix3m.txt --heldout /tmp/h.txt

Every run: skip-gram, the same vocabulary, seed, epochs and re-assignment interval; printed:
held-out perplexity, cluster and in-cluster perplexity (Shen et al. eqs. 5-6), training
words/s, the seconds spent re-assigning, and the share of words that moved at the last
re-assignment. Results in ``--json`` if given.
"""
from __future__ import annotations

import argparse
import json
import sys
import time


GRID = [
    # (label, loss, layer options)
    ("huffman (reference)", "hs", None, {}),
    ("random tree (reference)", "hs", "random", {}),
    ("binary: lift, epoch", "hs", "self-organized", dict(criterion="lift", smoothing="epoch")),
    ("binary: log-prob, epoch", "hs", "self-organized", dict(criterion="log-prob", smoothing="epoch")),
    ("binary: lift, printed", "hs", "self-organized", dict(criterion="lift", smoothing="printed")),
    ("binary: log-prob, printed (the paper)", "hs", "self-organized",
     dict(criterion="log-prob", smoothing="printed")),
    ("binary: lift, interval", "hs", "self-organized", dict(criterion="lift", smoothing="interval")),
    ("binary: lift, epoch, 8 samples/word", "hs", "self-organized",
     dict(criterion="lift", smoothing="epoch", samples_per_word=8)),
    ("binary: lift, epoch, frequency start", "hs", "self-organized",
     dict(criterion="lift", smoothing="epoch", cluster_init="frequency")),
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", required=True)
    p.add_argument("--heldout", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--dim", type=int, default=100)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--reassign-every", type=int, default=500_000)
    p.add_argument("--only", help="comma-separated indices into the grid")
    p.add_argument("--json")
    args = p.parse_args(argv)
    from semhuff import Word2Vec
    from semhuff.corpus import Corpus
    from semhuff.vocab import Vocab
    vocab = Vocab.build(Corpus(args.train), 5)
    rows = []
    grid = GRID if not args.only else [GRID[int(i)] for i in args.only.split(",")]
    for label, loss, tree, options in grid:
        layer_options = {}
        if tree == "self-organized":  # the grid's shorthand for the self-organized layers
            loss, tree = ("hs-self-organized" if loss == "hs" else loss), None
            layer_options = dict(options, reassign_every=args.reassign_every)
        model = Word2Vec(vector_size=args.dim, loss=loss, tree=tree, epochs=args.epochs,
                         workers=args.workers, seed=1, progress=False, layer_options=layer_options)
        model.set_vocab(vocab)
        report = model.train(args.train)
        clustered = getattr(model.layer, "has_clusters", False)
        score = model.score(args.heldout, clusters=clustered)
        organizer = getattr(model.layer, "organizer", None)
        history = organizer.history_dict() if organizer is not None else {}
        row = {"method": label, "perplexity": score.perplexity,
               "cluster_ppl": score.cluster_perplexity if clustered else None,
               "in_cluster_ppl": score.in_cluster_perplexity if clustered else None,
               "words_per_s": report.words_per_second, "hook_s": report.hook_seconds,
               "train_s": report.seconds,
               "last_changed": float(history["changed_share"][-1]) if len(history.get("changed_share", [])) else None}
        rows.append(row)
        print(f"{label:42s} ppl {row['perplexity']:8.1f}  cluster ppl "
              f"{row['cluster_ppl'] or float('nan'):7.1f}  in-cluster {row['in_cluster_ppl'] or float('nan'):7.1f}  "
              f"{row['words_per_s']:>9,.0f} w/s  hooks {row['hook_s']:4.1f} s of {row['train_s']:5.1f}  "
              f"last moved {row['last_changed'] if row['last_changed'] is not None else float('nan'):.3f}",
              flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "rows": rows, "written": time.strftime("%Y-%m-%d %H:%M")}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
