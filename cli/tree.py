"""``semhuff-tree``: build, inspect and compare hierarchical-softmax trees.

    semhuff-tree build (CORPUS ... | --vocab FILE) [--tree semhuff --similarity SRC] -o TREE.npz
    semhuff-tree stats TREE.npz [--similarity SRC]
    semhuff-tree show TREE.npz WORD [WORD ...] [--up 4]

``stats`` and ``show`` also take a model file (``semhuff-train -o m.npz``): its output layer's
tree, with the model's vocabulary.

A tree file is the ``Tree`` npz (``Tree.load`` reads it; the trainer can use it as is) plus the
vocabulary it was built for (``Tree.save(path, vocab)`` / ``load_tree_file``), so ``stats`` and
``show`` need nothing else. A vocabulary file has one ``word count`` per line (word2vec's
``-save-vocab``; ``Vocab.read_text`` / ``Vocab.write_text``).
User errors print one line on stderr and exit with status 2.
"""
from __future__ import annotations

import argparse
import os
import logging
from typing import List, Optional

import numpy as np

from semhuff.corpus import Corpus
from semhuff.errors import SemhuffError
from semhuff.io_utils import check_writable
from semhuff.trees.base import Tree, load_tree_file
from semhuff.trees import TREE_BUILDERS, make_tree
from semhuff.trees.huffman import build_huffman
from semhuff.trees.semhuff import sibling_similarity
from semhuff.trees.similarity import DEFAULT_TOP_K, load_similarity
from semhuff.vocab import Vocab
from semhuff.wording import counted

from .common import (HelpFormatter, add_deprecated_spelling, cli_main, console_script,
                     resolve_corpus)

logger = logging.getLogger("semhuff.cli.tree")
PROG = "semhuff-tree"


# -- statistics and the neighbourhood view ---------------------------------------------------------

def format_statistics(tree: Tree, vocab: Optional[Vocab], similarity=None) -> str:
    lines = [f"tree: {tree.kind}, {tree.n_words} words, {tree.n_inner} inner nodes, "
             f"max depth {tree.max_depth}"]
    huffman = build_huffman(vocab.counts) if vocab is not None else None
    if vocab is not None:
        lines.append(f"expected code length: {tree.expected_code_length(vocab.counts):.6f} "
                     f"(Huffman: {huffman.expected_code_length(vocab.counts):.6f})")
    lengths = tree.lengths
    histogram = np.bincount(lengths)
    lines.append("depth histogram (depth: words):")
    lines.extend(f"  {d:3d}: {int(n)}" for d, n in enumerate(histogram) if n)
    if similarity is not None:
        total = float(sibling_similarity(tree, similarity).sum())
        line = f"total sibling similarity: {total:.4f}"
        if huffman is not None:
            line += f" (Huffman: {float(sibling_similarity(huffman, similarity).sum()):.4f})"
        lines.append(line)
    return "\n".join(lines)


def format_neighbourhood(tree: Tree, words, word_id: int, up: int = 4, max_words: int = 40) -> str:
    """The subtree ``up`` levels above a word, nested the way the SemHuff paper's Fig. 3 prints
    it: ``<levelN>`` for an inner node at depth N, ``<word>`` for a leaf."""
    V = tree.n_words
    depth = tree.node_depths()
    node = word_id
    for _ in range(up):
        if tree.parent[node] < 0:
            break
        node = int(tree.parent[node])
    children = np.full((max(V - 1, 0), 2), -1, dtype=np.int64)
    inner_children = np.flatnonzero(tree.parent >= 0)
    children[tree.parent[inner_children] - V, tree.branch[inner_children]] = inner_children
    out: List[str] = []
    shown = hidden = 0

    def leaves_under(n: int) -> int:
        return 1 if n < V else sum(leaves_under(int(c)) for c in children[n - V])

    def visit(n: int, indent: int) -> None:
        nonlocal shown, hidden
        if shown >= max_words:  # print no empty levels once the budget is spent
            hidden += leaves_under(n)
            return
        pad = "  " * indent
        if n < V:
            mark = "   <!-- query -->" if n == word_id else ""
            out.append(f"{pad}<word>{words[n]}</word>{mark}")
            shown += 1
            return
        out.append(f"{pad}<level{int(depth[n])}>")
        for child in children[n - V]:
            visit(int(child), indent + 1)
        out.append(f"{pad}</level{int(depth[n])}>")

    visit(node, 0)
    if hidden:
        out.append(f"<!-- {hidden} more words not shown -->")
    return "\n".join(out)


# -- commands --------------------------------------------------------------------------------------

def _load_vocab(args) -> Vocab:
    if args.vocab:
        return Vocab.read_text(args.vocab)
    return Vocab.build(Corpus(resolve_corpus(args.corpus)), min_count=args.min_count)


def _check_build_source(args) -> None:
    """One source of words: a corpus (positional, as semhuff-train's) or --vocab."""
    args.corpus = list(args.corpus) + list(args.old_corpus)  # (--corpus PATH: the old spelling)
    if bool(args.corpus) == bool(args.vocab):
        raise SemhuffError("give a corpus (CORPUS ...) or a vocabulary file (--vocab FILE), "
                           "one of them")


def cmd_build(args) -> int:
    _check_build_source(args)
    check_writable(args.output)
    if args.save_vocab:
        check_writable(args.save_vocab)
    if args.kind is None:  # semhuff-train's default; this command's was semhuff
        if args.similarity:
            raise SemhuffError("--similarity builds a SemHuff tree with --tree semhuff; the "
                               "default tree is huffman, as in semhuff-train (it was semhuff "
                               "here before): add --tree semhuff")
        args.kind = "huffman"
    if args.kind == "semhuff" and not args.similarity:
        raise SemhuffError("--tree semhuff needs --similarity (wordnet, a pairs file or vectors)")
    if args.kind == "huffman" and args.similarity:
        logger.info("--similarity is only used for the statistics of a huffman tree")
    vocab = _load_vocab(args)
    similarity = None
    if args.similarity:
        similarity = load_similarity(args.similarity, vocab, top_k=args.top_k,
                                     wordnet_dir=args.wordnet_dir)
    if args.kind == "semhuff":
        tree = make_tree("semhuff", vocab, similarity, matching=args.matching)
    else:
        tree = make_tree(args.kind, vocab)
    tree.save(args.output, vocab)
    if args.save_vocab:
        vocab.write_text(args.save_vocab)
    print(format_statistics(tree, vocab, similarity))
    print(f"saved {args.output}")
    return 0


def cmd_stats(args) -> int:
    tree, vocab = load_tree_file(args.tree, args.vocab)
    similarity = None
    if args.similarity:
        if vocab is None:
            raise SemhuffError("--similarity needs the tree's vocabulary (give --vocab)")
        similarity = load_similarity(args.similarity, vocab, top_k=args.top_k,
                                     wordnet_dir=args.wordnet_dir)
    print(format_statistics(tree, vocab, similarity))
    return 0


def cmd_show(args) -> int:
    tree, vocab = load_tree_file(args.tree, args.vocab)
    if vocab is None:
        raise SemhuffError("the tree file has no vocabulary; give --vocab")
    missing = [w for w in args.words if w not in vocab.index]
    if missing:
        raise SemhuffError(f"not in the tree's vocabulary: {', '.join(missing)}")
    for word in args.words:
        wid = vocab.index[word]
        print(f"# {word}: depth {int(tree.lengths[wid])}, code {tree.code_string(wid)}")
        print(format_neighbourhood(tree, vocab.words, wid, up=args.up, max_words=args.max_words))
    return 0


def cmd_clusters(args) -> int:
    """The clusters of a model with a clustered output layer (Shen et al.'s Table 3) and the
    cluster of given words; --plot draws the re-assignment history (their Fig. 1)."""
    from semhuff.io_utils import atomic_path
    from semhuff.layers.diagnostics import cluster_listing, plot_history
    from semhuff.model import Word2Vec
    model = Word2Vec.load(args.model, progress=False)
    organizer = getattr(model.layer, "organizer", None)
    if organizer is None:
        raise SemhuffError(f"{args.model}: {model.layer.describe()} has no clusters")
    vocab, cluster_of = model.vocab, organizer.cluster_of
    rows = cluster_listing(vocab.words, vocab.counts, cluster_of, organizer.n_clusters, args.top)
    print(f"{model.layer.describe()}: {counted(len(rows), 'non-empty cluster')}, "
          f"{counted(len(organizer.history), 're-assignment')}")
    if args.sample:
        rng = np.random.default_rng(args.seed)
        rows = [rows[i] for i in sorted(rng.choice(len(rows), min(args.sample, len(rows)), replace=False))]
    elif not args.words:
        rows = rows[:args.limit]
    if args.words:
        missing = [w for w in args.words if w not in vocab.index]
        if missing:
            raise SemhuffError(f"not in the model's vocabulary: {', '.join(missing)}")
        by_cluster = {r[0]: r for r in rows}
        for word in args.words:
            cluster, size, share, members = by_cluster[int(cluster_of[vocab.index[word]])]
            print(f"{word}: cluster {cluster}, {size} words, {100 * share:.2f}% of tokens: "
                  f"{' '.join(members)}")
        rows = []
    for cluster, size, share, members in rows:
        print(f"cluster {cluster:4d}: {size:5d} words, {100 * share:5.2f}% of tokens: {' '.join(members)}")
    if args.plot:
        if not len(organizer.history):
            raise SemhuffError("no re-assignment recorded: nothing to plot")
        with atomic_path(args.plot) as tmp:
            plot_history(organizer.history_dict(), tmp + ".png", model.layer.describe())
            os.replace(tmp + ".png", tmp)
        print(f"wrote {args.plot}")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    fmt = HelpFormatter
    parser = argparse.ArgumentParser(prog=PROG, description="Build and inspect SemHuff / Huffman trees.",
                                     formatter_class=fmt)
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="-v: similarity reports and level timings, -vv: debug")
    parser.add_argument("-q", "--quiet", action="count", default=0, help="quieter (warnings always show)")
    sub = parser.add_subparsers(dest="command", required=True)

    def similarity_options(p):
        p.add_argument("--similarity", help="'wordnet', a pairs / synonym-set file, or word vectors")
        p.add_argument("--top-k", type=_positive_int, default=DEFAULT_TOP_K,
                       help="neighbours kept per word")
        p.add_argument("--wordnet-dir", help="WordNet dict folder (default: shared data, then /usr/share/wordnet)")

    build = sub.add_parser("build", help="build a tree from a corpus or a vocabulary file",
                           formatter_class=fmt)
    build.add_argument("corpus", nargs="*", metavar="CORPUS",
                       help="text file(s) or directory, as semhuff-train's (plain, gz, bz2, xz; "
                            "'lee' = gensim's lee_background.cor); or give --vocab")
    build.add_argument("--vocab", help="vocabulary file: one 'word count' per line")
    build.add_argument("--min-count", type=_positive_int, default=5,
                       help="drop words seen fewer times (with a corpus)")
    build.add_argument("--tree", dest="kind", choices=sorted(TREE_BUILDERS),
                       help="tree builder (default huffman, as semhuff-train's; semhuff needs "
                            "--similarity)")
    similarity_options(build)
    build.add_argument("--matching", choices=("auto", "exact", "approx"), default="auto",
                       help="SemHuff pairing: exact maximum-weight matching, a faster approximation, "
                            "or auto (exact where the level is small enough)")
    build.add_argument("-o", "--output", required=True, help="tree file to write (.npz)")
    build.add_argument("--save-vocab", help="also write the vocabulary as a 'word count' file")
    add_deprecated_spelling(build, "--kind", "--tree")
    add_deprecated_spelling(build, "--corpus", "a positional CORPUS, as in semhuff-train",
                            target=argparse._AppendAction(["--corpus"], dest="old_corpus"))
    build.set_defaults(old_corpus=[])
    build.set_defaults(run=cmd_build)

    stats = sub.add_parser("stats", help="expected code length, depth histogram, sibling similarity",
                           formatter_class=fmt)
    stats.add_argument("tree", help="tree file (.npz) from semhuff-tree build, or a model "
                       "file (its output layer's tree)")
    stats.add_argument("--vocab", help="vocabulary file, if the tree file has none")
    similarity_options(stats)
    stats.set_defaults(run=cmd_stats)

    show = sub.add_parser("show", help="print the tree around words (the paper's Fig. 3)",
                          formatter_class=fmt)
    show.add_argument("tree", help="tree file (.npz) from semhuff-tree build, or a model "
                      "file (its output layer's tree)")
    show.add_argument("words", nargs="+", help="words to show the tree around")
    show.add_argument("--vocab", help="vocabulary file, if the tree file has none")
    show.add_argument("--up", type=int, default=4, help="levels above the word to start from")
    show.add_argument("--max-words", type=_positive_int, default=40, help="words shown per query")
    show.set_defaults(run=cmd_show)

    clusters = sub.add_parser("clusters", help="list the clusters of a self-organized (or class) "
                              "model with their most frequent words, or the clusters of given words",
                              formatter_class=fmt)
    clusters.add_argument("model", help="a full model (.npz) with a clustered output layer")
    clusters.add_argument("words", nargs="*", help="show only the clusters of these words")
    clusters.add_argument("--top", type=_positive_int, default=12,
                          help="members shown per cluster")
    clusters.add_argument("--limit", type=_positive_int, default=20,
                          help="clusters shown, heaviest first, without --sample or words")
    clusters.add_argument("--sample", type=_positive_int, help="show this many clusters at random")
    clusters.add_argument("--seed", type=int, default=1, help="for --sample")
    clusters.add_argument("--plot", help="write the re-assignment history as a PNG (Fig. 1)")
    clusters.set_defaults(run=cmd_clusters)
    for command in (build, stats, show, clusters):  # -q / -v after the command too
        _verbosity_options(command)
    return parser


def _verbosity_options(parser: argparse.ArgumentParser) -> None:
    """-v / -q on a command: the same counts as before it (absent unless given, so one given
    before the command stays)."""
    parser.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                        help="-v: similarity reports and level timings, -vv: debug")
    parser.add_argument("-q", "--quiet", action="count", default=argparse.SUPPRESS,
                        help="quieter (warnings always show)")


def main(argv: Optional[List[str]] = None) -> int:
    return cli_main(PROG, build_parser, lambda args: args.run(args), argv)


console = console_script(main)  # the console script (setup.cfg)

if __name__ == "__main__":
    console()
