"""What ``semhuff.gensim`` needs besides the adapter itself: trees over a vocabulary in gensim's
order (an online update appends words, as gensim does, so the counts are no longer sorted),
hierarchical softmax's exact probabilities (``predict_output_word``, ``score``), and reading a
model gensim saved (a pickle) into semhuff's layers."""
from __future__ import annotations

import json
import logging
from typing import Iterable, List

import numpy as np

from .errors import ModelFileError, OptionError
from .layers import layer_class
from .trees.base import Tree
from .trees.huffman import build_huffman
from .trees.spec import relabel_leaves
from .vocab import Vocab, frequency_order

logger = logging.getLogger(__name__)


def huffman_tree(counts) -> Tree:
    """word2vec's Huffman tree over words in any order: built over the counts sorted
    (stably) in descending order, then its leaves renamed back to the words' ids. Inner node
    ``i`` is the ``i``-th merge either way, so an online update keeps gensim's row order."""
    counts = np.asarray(counts, dtype=np.int64)
    order = frequency_order(counts)
    if order is None:
        return build_huffman(counts)
    return relabel_leaves(build_huffman(counts[order]), order)


def tree_from_paths(points: List[np.ndarray], codes: List[np.ndarray]) -> Tree:
    """The ``Tree`` of gensim's per-word ``point`` / ``code`` arrays (root first; points are
    rows of ``syn1``, as semhuff's)."""
    V = len(points)
    parent = np.full(2 * V - 1, -1, np.int32)
    branch = np.zeros(2 * V - 1, np.int8)
    for w, (path, code) in enumerate(zip(points, codes)):
        nodes = [V + int(p) for p in path] + [w]
        for depth in range(1, len(nodes)):
            parent[nodes[depth]] = nodes[depth - 1]
            branch[nodes[depth]] = int(code[depth - 1])
    tree = Tree(parent, branch, kind="huffman")
    tree.validate()
    return tree


def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def hs_log_probs(h: np.ndarray, weights: np.ndarray, tree: Tree) -> np.ndarray:
    """log P(w | h) of every word under hierarchical softmax (float64, exact: word2vec's node
    ``n`` predicts ``1 - code`` with sigmoid(h . syn1[n]), so the branch probabilities along a
    full binary tree sum to 1 over the leaves)."""
    scores = weights.astype(np.float64) @ np.asarray(h, np.float64)
    points, codes, lengths = tree.points, tree.codes, tree.lengths
    on_path = np.arange(points.shape[1]) < lengths[:, None]
    signed = scores[points] * (1.0 - 2.0 * codes)
    return np.where(on_path, _log_sigmoid(signed), 0.0).sum(axis=1)


def score_sentences(sentences: Iterable, index: dict, syn0: np.ndarray, weights: np.ndarray,
                    tree: Tree, sg: bool, window: int, cbow_mean: bool,
                    total_sentences: int) -> np.ndarray:
    """gensim's ``Word2Vec.score``: each sentence's log probability under hierarchical softmax,
    the full window around each in-vocabulary word (no down-sampling, no reduced window), its
    contexts each predicting it (skip-gram) or their mean (sum; a zero vector without context,
    as gensim) predicting it (CBOW). Exact
    float64 log-sigmoids, summed; gensim skips the terms whose score is beyond +-6."""
    points, codes, lengths = tree.points, tree.codes, tree.lengths
    out: List[float] = []
    for sentence in sentences:
        if len(out) >= total_sentences:
            break
        ids = [index[w] for w in sentence if w in index]
        total = 0.0
        for i, w in enumerate(ids):
            ctx = [ids[j] for j in range(max(0, i - window), min(len(ids), i + window + 1))
                   if j != i]
            if sg and not ctx:
                continue
            rows = weights[points[w, :lengths[w]]].astype(np.float64)
            sign = 1.0 - 2.0 * codes[w, :lengths[w]]
            inputs = syn0[ctx].astype(np.float64)
            if not sg:  # no context: a zero input, as gensim's CBOW score
                inputs = inputs.mean(axis=0, keepdims=True) if cbow_mean and ctx else \
                    inputs.sum(axis=0, keepdims=True) if ctx else np.zeros((1, syn0.shape[1]))
            total += float(_log_sigmoid((inputs @ rows.T) * sign).sum())
        out.append(total)
    return np.array(out, dtype=np.float32)


def cum_table(counts, ns_exponent: float, domain: int = 2 ** 31 - 1) -> np.ndarray:
    """gensim's ``make_cum_table``: the cumulative noise distribution, scaled to ``domain``."""
    weights = np.asarray(counts, np.float64) ** float(ns_exponent)
    if not len(weights):
        return np.zeros(0, np.uint32)
    return np.round(np.cumsum(weights) / weights.sum() * domain).astype(np.uint32)


#: gensim Word2Vec attributes read into the adapter when a gensim model is loaded
GENSIM_SETTINGS = ("vector_size", "window", "sample", "seed", "workers", "sg", "cbow_mean",
                   "alpha", "min_alpha", "epochs", "max_vocab_size", "hs", "negative",
                   "ns_exponent", "min_count", "max_final_vocab", "corpus_count",
                   "corpus_total_words", "comment", "compute_loss", "batch_words",
                   "train_count", "total_train_time", "running_training_loss",
                   "shrink_windows", "effective_min_count", "min_alpha_yet_reached")


def from_gensim(model, fname: str):
    """A model gensim saved, as ``(settings, vocab, syn0, layer)``: the vocabulary in gensim's
    order with its counts, the input vectors, and the output layer gensim trained
    (``syn1neg`` with the noise distribution of the counts, or ``syn1`` over gensim's own
    Huffman tree, read from the words' ``code`` / ``point``)."""
    settings = {k: getattr(model, k) for k in GENSIM_SETTINGS if hasattr(model, k)}
    # its history goes on in semhuff's model file (JSON: anything else as text)
    settings["lifecycle_events"] = json.loads(json.dumps(
        list(getattr(model, "lifecycle_events", None) or []), default=str))
    hs, negative = int(getattr(model, "hs", 0)), int(getattr(model, "negative", 0))
    wv = model.wv
    words = list(wv.index_to_key)
    if not words:
        raise ModelFileError(f"{fname} is a gensim model without a vocabulary")
    counts = np.array([int(wv.get_vecattr(i, "count")) for i in range(len(words))], np.int64)
    total = settings.get("corpus_total_words") or int(counts.sum())
    vocab = Vocab(words, counts, int(total), max(1, int(settings.get("min_count") or 1)))
    syn0 = np.ascontiguousarray(wv.vectors, dtype=np.float32)
    exponent = float(settings.get("ns_exponent", 0.75))
    if negative and not hs:
        layer = layer_class("ns")(negative, exponent)
        layer.set_noise(counts)
        layer.weights = np.ascontiguousarray(model.syn1neg, dtype=np.float32)
        return settings, vocab, syn0, layer
    if "code" in wv.expandos and "point" in wv.expandos:
        tree = tree_from_paths([wv.get_vecattr(i, "point") for i in range(len(words))],
                               [wv.get_vecattr(i, "code") for i in range(len(words))])
    else:  # gensim builds its tree from the counts in the same merge order
        tree = huffman_tree(counts)
    if negative:  # both output layers (hs=1, negative>0)
        layer = layer_class("hs+ns")(tree, negative=negative, exponent=exponent)
        layer.noise.set_noise(counts)
        layer.noise.weights = np.ascontiguousarray(model.syn1neg, dtype=np.float32)
    else:
        layer = layer_class("hs")(tree)
    layer.weights = np.ascontiguousarray(model.syn1[:max(len(words) - 1, 1)], dtype=np.float32)
    return settings, vocab, syn0, layer


def to_gensim(model):
    """A semhuff ``Word2Vec`` (``semhuff.model``) as gensim's ``Word2Vec``, which gensim saves
    (``.save``) and loads (``gensim.models.Word2Vec.load``) and can keep training: the vectors,
    the counts, and the output layer gensim knows, hierarchical softmax over this model's own
    tree (any tree: gensim reads each word's path from its ``code`` / ``point``) and/or negative
    sampling. Its vocabulary is gensim's (sorted by count, its down-sampling and noise tables
    from the counts); rows are matched by word. A class or self-organized softmax has no gensim
    form: an ``OptionError`` saying to export the vectors."""
    from gensim.models import Word2Vec as GensimWord2Vec

    loss = model.loss
    if loss not in ("hs", "ns", "hs+ns"):
        raise OptionError(f"gensim's Word2Vec has hierarchical softmax and negative sampling "
                          f"only, not {model.layer.describe()}: export the vectors instead "
                          f"(.kv, .bin, .txt)")
    words, counts = list(model.vocab.words), np.asarray(model.vocab.counts, np.int64)
    negative = int(model.negative) if loss in ("ns", "hs+ns") else 0
    out = GensimWord2Vec(vector_size=model.vector_size, window=model.window, min_count=1,
                         sample=model.sample, sg=int(model.sg), hs=int(loss != "ns"),
                         negative=negative, ns_exponent=float(model.ns_exponent or 0.75),
                         cbow_mean=int(model.cbow_mean), alpha=model.alpha,
                         min_alpha=model.min_alpha, epochs=model.epochs, workers=model.workers,
                         seed=model.seed, max_vocab_size=model.max_vocab_size,
                         shrink_windows=bool(model.shrink_windows))
    # every word kept (min_count 1 while building; the model's own min_count after)
    out.build_vocab_from_freq(dict(zip(words, (int(c) for c in counts))))
    out.min_count, out.max_final_vocab = model.min_count, model.max_final_vocab
    out.corpus_total_words = int(model.vocab.total_tokens)
    rows = np.array([out.wv.key_to_index[w] for w in words], dtype=np.int64)
    out.wv.vectors[rows] = model.syn0[:len(words)]
    if loss != "ns":
        tree, weights = model.layer.tree, model.layer.weights
        points, codes, lengths = tree.points, tree.codes, tree.lengths
        for i, word in enumerate(words):
            out.wv.set_vecattr(word, "code", np.array(codes[i, :lengths[i]], dtype=np.uint8))
            out.wv.set_vecattr(word, "point", np.array(points[i, :lengths[i]], dtype=np.uint32))
        inner = min(len(weights), len(words))  # V - 1 rows (gensim keeps V, the last zero)
        out.syn1 = np.zeros((len(words), model.vector_size), dtype=np.float32)
        out.syn1[:inner] = weights[:inner]
    if negative:
        noise = model.layer.weights if loss == "ns" else model.layer.syn1neg
        out.syn1neg[rows] = noise[:len(words)]
    out.wv.norms = None
    return out
