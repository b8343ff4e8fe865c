"""The papers' language-model tables on the shared corpus, scaled to what a 2-core CPU allows.

    python -m semhuff.eval.bench.lm_tables --setting ptb|text8 [--corpus PATH] [--out DIR]

The corpus is built the text8 way (one line, 100M characters), so the self-organized HSM
paper's split applies: the last 1M characters are held out, the training text comes before.

* ``ptb``: a PTB-like setting (the p-tHSM poster's scale): the 10,000 most frequent words of
  the first 1M training tokens (the rest <unk>), 2 epochs, and every row: full softmax,
  adaptive softmax, class softmax over frequency bins, self-organized (two-level, binary; and
  the binary form with its clusters frozen after the first epoch, ``-frozen``), Huffman, SemHuff (WordNet; and bootstrapped from skip-gram vectors this project trains on the
  same training tokens), random and alphabetical trees;
* ``text8``: a text8-like vocabulary (44,000 words, counted on the first 2M training tokens),
  1 epoch over them, the fast layers and the adaptive softmax.

Every row has the same LSTM (embedding 256, hidden 256, one layer), Adagrad 0.1, clip 0.25,
20-step truncation, batches of 32 rows, seed 1 (``--seed``). The self-organized layers re-assign every 200
steps (``--reassign-every``): the paper's K = 1000 batches would give only three re-assignments
in so short a run. Each row's results go to ``OUT/<setting>.json`` as they finish (a re-run
skips the rows already there), and the table to ``OUT/<setting>.md``; ten sample clusters of each
self-organized layer go with it.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time

from semhuff.data_paths import missing_message, shared_corpus

SETTINGS = {
    "ptb": dict(max_vocab=10_000, train_tokens=1_000_000, heldout_tokens=100_000, epochs=2,
                rows=["full", "adaptive", "class-frequency", "self-organized",
                      "self-organized-binary", "self-organized-binary-frozen", "huffman",
                      "semhuff-wordnet", "semhuff-boot", "semhuff-self",
                      "random", "alphabetical"]),
    "text8": dict(max_vocab=44_000, train_tokens=2_000_000, heldout_tokens=100_000, epochs=1,
                  rows=["huffman", "self-organized-binary", "adaptive", "class-frequency",
                        "self-organized"]),
}


# issue 45: a flat head of the most frequent words and the other words in a tree below one (or a
# few) entries (head-tree), or a flat softmax over clusters with a tree inside each (class-tree):
# the tree Huffman, SemHuff bootstrapped (-boot), or Huffman re-built after epoch 1 as SemHuff
# from the LSTM's own embeddings (-self, as semhuff-self); class-tree-frequency: frequency bins;
# organized-tree[-frozen]: self-organized clusters of the tail
HEAD_TREE_ROWS = ("head-tree", "head-tree-boot", "head-tree-self", "class-tree",
                  "class-tree-boot", "class-tree-self", "class-tree-frequency")
BOOTSTRAPPED = ("semhuff-boot", "head-tree-boot", "class-tree-boot")  # need skip-gram vectors


def row_settings(row: str, args, boot_vectors: str):
    """(LMSettings keywords) of a table row."""
    common = dict(emb=256, hidden=256, batch_size=32, bptt=20, lr=0.1, clip=0.25,
                  seed=args.seed, progress=False, threads=args.threads, arch=args.arch)
    if args.arch == "transformer":  # issue 35's column: 2 layers, width 256, 4 heads
        common["network_options"] = {"layers": 2, "heads": 4}
    if row in ("full", "adaptive"):
        return dict(common, output=row)
    if row == "class-frequency":
        return dict(common, output="class", layer_options={"clustering": "frequency"})
    if row in HEAD_TREE_ROWS:  # issue 45's candidates; --layer-option head=, tail_entries=, ...
        output = "class-tree" if row.startswith("class-tree") else "head-tree"
        tree = dict(tree="semhuff", similarity=boot_vectors) if row.endswith("-boot") else \
            dict(cluster_by="frequency") if row.endswith("-frequency") else {}
        # class-tree's rows as measured: no head (its default before issue 45's text8 runs)
        head = dict(head=0) if output == "class-tree" else {}
        return dict(common, output=output, retree_every=int(row.endswith("-self")),
                    layer_options={**head, **tree, **given_options(output, args)})
    if row.startswith("organized-tree"):  # issue 45: the tail's clusters self-organized, to
        # the end (rows carried) or in the first epoch only (-frozen; rows from zero)
        given = given_options("organized-tree", args)
        if row.endswith("-frozen"):
            given.setdefault("freeze_after", args.steps_per_epoch)
        else:
            given.setdefault("new_rows", "carried")
        return dict(common, output="organized-tree", layer_options={
            "reassign_every": args.reassign_every, **given})
    if row.startswith("self-organized"):
        output = row.replace("-frozen", "")
        given = given_options(output, args)
        if row.endswith("-frozen"):  # the clusters re-learned in the first epoch only; new
            # rows from zero (measured better than carried rows when the tree is then kept:
            # docs/lm.md)
            given.setdefault("freeze_after", args.steps_per_epoch)
            given.setdefault("new_rows", "zero")
        return dict(common, output=output, layer_options={
            "reassign_every": args.reassign_every, **given})
    if row == "semhuff-wordnet":
        return dict(common, output="tree", layer_options={"tree": "semhuff",
                                                          "similarity": "wordnet"})
    if row == "semhuff-boot":
        return dict(common, output="tree", layer_options={"tree": "semhuff",
                                                          "similarity": boot_vectors})
    if row == "semhuff-self":  # issue 36's item 4: Huffman, then SemHuff from its own vectors
        return dict(common, output="tree", layer_options={"tree": "huffman"}, retree_every=1)
    return dict(common, output="tree", layer_options={"tree": row})


def given_options(output: str, args) -> dict:
    """``--layer-option`` values, typed by layer ``output``'s declarations."""
    from semhuff.lm.layers.registry import layer_options, lm_layer_class
    from semhuff.options import parse_assignments
    return parse_assignments([f"{name}={value}" for name, value in args.layer_option],
                             layer_options(lm_layer_class(output)), output)


def add_result(record: str, row: str, out: dict) -> dict:
    """``record`` (JSON) with ``row``'s results added, re-read under a lock first, so that
    several runs writing the same record (other rows at the same time) keep each other's rows;
    written atomically. Returns the whole record."""
    import fcntl
    with open(record + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        results = json.load(open(record)) if os.path.exists(record) else {}
        results[row] = out
        with open(record + ".tmp", "w") as fh:
            json.dump(results, fh, indent=1)
        os.replace(record + ".tmp", record)
    return results


def bootstrap_vectors(data, folder: str) -> str:
    """Skip-gram vectors (semhuff, Huffman HS) trained on the LM's own training tokens, for the
    bootstrapped SemHuff tree: ``semhuff.lm_bootstrap``'s (``--similarity skipgram``), kept in
    ``folder`` as the tables' runs name them."""
    from semhuff.lm_bootstrap import bootstrap_vectors as train
    return train(data, path=os.path.join(folder, "vectors.bin"), workers=2)


def sample_clusters(layer, vocab, n: int = 10, top: int = 10):
    """Ten clusters of a self-organized layer: the share of tokens, size and most frequent
    members, the clusters spread over the range of token shares."""
    from semhuff.layers.diagnostics import cluster_listing
    rows = cluster_listing(vocab.words, vocab.counts, layer.organizer.cluster_of,
                           layer.organizer.n_clusters, top)
    step = max(1, len(rows) // n)
    return [dict(cluster=c, size=size, share=share, words=words)
            for c, size, share, words in rows[::step][:n]]


def table(results: dict) -> str:
    lines = ["| output layer | held-out ppl | cluster ppl | in-cluster ppl | output layer fwd+bwd "
             "ms / 1k tokens | whole step tokens/s | minutes | re-assignments |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row, r in results.items():
        e = r["epochs"][-1]
        h = e["heldout"]
        fmt = (lambda v: f"{v:,.2f}" if v else "")
        ms = 1e6 * sum(x["output_seconds"] for x in r["epochs"]) / sum(x["tokens"] for x in r["epochs"])
        tps = sum(x["tokens"] for x in r["epochs"]) / sum(x["seconds"] for x in r["epochs"])
        lines.append(f"| {row} | {h['perplexity']:,.2f} | {fmt(h['cluster_perplexity'])} | "
                     f"{fmt(h['in_cluster_perplexity'])} | {ms:.1f} | {tps:,.0f} | "
                     f"{r['wall_seconds'] / 60:.1f} | {len(r['reassignments']) or ''} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--setting", choices=sorted(SETTINGS), default="ptb")
    p.add_argument("--corpus", default=str(shared_corpus()))
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "semhuff_lm_tables"))
    p.add_argument("--rows", help="comma-separated subset of the setting's rows")
    p.add_argument("--reassign-every", type=int, default=200)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--arch", choices=("lstm", "transformer"), default="lstm",
                   help="the network: the tables' LSTM, or a transformer (2 layers, width "
                   "256, 4 heads); results to OUT/<setting>-transformer.json")
    p.add_argument("--seed", type=int, default=1, help="the seed of every row (results to "
                   "OUT/<setting>[-transformer]-seed<S>.json unless 1)")
    p.add_argument("--layer-option", action="append", default=[], metavar="NAME=VALUE",
                   type=lambda t: tuple(t.split("=", 1)),
                   help="an option of the self-organized and head-tree rows (repeatable), "
                   "e.g. new_rows=carried, head=400; results to "
                   "OUT/<setting>...-<NAME>-<VALUE>.json")
    args = p.parse_args(argv)
    if not os.path.exists(args.corpus):
        raise SystemExit(missing_message(args.corpus, "the shared corpus"))
    from semhuff.memory import keep_large_blocks
    keep_large_blocks()  # as semhuff-lm: the rows' large per-step blocks reused
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from semhuff.lm.token_ids import load_data
    from semhuff.lm.settings import LMSettings
    from semhuff.lm.trainer import train_lm
    conf = SETTINGS[args.setting]
    os.makedirs(args.out, exist_ok=True)
    stem = args.setting + ("-transformer" if args.arch == "transformer" else "") + (
        f"-seed{args.seed}" if args.seed != 1 else "") + (
        f"-every{args.reassign_every}" if args.reassign_every != 200 else "") + "".join(
        f"-{name}-{value}" for name, value in args.layer_option)
    record = os.path.join(args.out, f"{stem}.json")
    results = json.load(open(record)) if os.path.exists(record) else {}
    started = time.perf_counter()
    data = load_data([args.corpus], heldout_chars=1_000_000, max_vocab=conf["max_vocab"],
                     train_tokens=conf["train_tokens"], heldout_tokens=conf["heldout_tokens"])
    print(f"{args.setting}: {data.describe()} (data in {time.perf_counter() - started:.0f} s)",
          flush=True)
    rows = args.rows.split(",") if args.rows else conf["rows"]
    from semhuff.lm.trainer import window_starts
    common = row_settings("huffman", args, None)
    args.steps_per_epoch = len(window_starts(len(data.train) // common["batch_size"],
                                             common["bptt"]))
    for row in rows:
        if row in results:
            continue
        boot = bootstrap_vectors(data, args.out) if row in BOOTSTRAPPED else None
        t0 = time.perf_counter()
        settings = LMSettings(epochs=conf["epochs"], **row_settings(row, args, boot))
        model, report = train_lm(data, settings)
        out = report.to_dict()
        out["wall_seconds"] = time.perf_counter() - t0
        if row.startswith("self-organized"):  # (and -frozen)
            out["sample_clusters"] = sample_clusters(model.output, data.vocab)
        results = add_result(record, row, out)
        print(f"{row}: {report.summary()} ({out['wall_seconds'] / 60:.1f} min)", flush=True)
    with open(os.path.join(args.out, f"{stem}.md"), "w") as fh:
        fh.write(table(results))
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
