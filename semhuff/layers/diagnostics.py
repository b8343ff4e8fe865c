"""Cluster diagnostics for clustered output layers (Shen et al. eqs. 5-6): the cluster perplexity
exp(mean -log P(c(w) | h)) (how hard it is to pick the right cluster) and the in-cluster
perplexity exp(mean -log P(w | c(w), h)); their product is the perplexity. A clustered layer's
``score_args(1)`` makes its scoring kernel return only the cluster part, so the in-cluster part
is the total minus that.

During training the re-assignment hook measures them on a small held-out sample (the layer's
``heldout`` option: a corpus path or token lists, the first ``heldout_tokens`` tokens), single
threaded on the quiescent weights; ``model.score(corpus, clusters=True)`` measures them on any
corpus with all threads.
"""
from __future__ import annotations

import math
import textwrap
from typing import Dict, List, Optional

import numpy as np

from ..corpus import as_corpus
from ..encode import encode_chunks
from ..options import Option, positive_int
from ..scoring import score_on_host

HELDOUT_OPTIONS = (
    Option("heldout", str, None, "measure cluster / in-cluster perplexity on FILE's first "
           "tokens at every re-assignment (semhuff-tree clusters MODEL --plot draws them)",
           metavar="FILE"),
    Option("heldout_tokens", int, 20_000, "how many held-out tokens --heldout scores",
           check=positive_int),
)


class ClusterDiagnostics:
    """Mixin for output layers with ``score_args(part)`` and ``score_kernel``."""

    has_clusters = True
    heldout_chunks: Optional[List] = None

    def set_heldout(self, vocab, heldout, tokens: int) -> None:
        """Encode the first ``tokens`` tokens of ``heldout`` for the in-training diagnostics."""
        if heldout is None:
            self.heldout_chunks = None
            return
        sentences, n = [], 0
        for sentence in as_corpus(heldout):
            sentences.append(list(sentence[: tokens - n]))
            n += len(sentences[-1])
            if n >= tokens:
                break
        self.heldout_chunks = list(encode_chunks(sentences, vocab.index))

    def diagnose(self, context, chunks) -> Dict[str, float]:
        syn0 = context.vectors()
        kernel = self.score_kernel(context.sg, syn0.shape[1], context.cbow_mean)
        nll, pairs = score_on_host(kernel, syn0, self.weights, self.score_args(0), chunks,
                                   context.window)
        cluster_nll, _ = score_on_host(kernel, syn0, self.weights, self.score_args(1), chunks,
                                       context.window)
        if not pairs:
            return {}
        return {"ppl": math.exp(nll / pairs), "cluster_ppl": math.exp(cluster_nll / pairs),
                "in_cluster_ppl": math.exp((nll - cluster_nll) / pairs)}


def cluster_listing(words, counts, cluster_of, n_clusters: int, top: int = 12):
    """Per cluster, by descending token share: (cluster id, size, share, most frequent members)."""
    counts = np.asarray(counts, np.float64)
    share = np.bincount(cluster_of, weights=counts, minlength=n_clusters) / counts.sum()
    sizes = np.bincount(cluster_of, minlength=n_clusters)
    rows = []
    for c in np.argsort(-share, kind="stable"):
        if sizes[c]:
            members = np.flatnonzero(cluster_of == c)[:top]  # ids are frequency-sorted
            rows.append((int(c), int(sizes[c]), float(share[c]), [words[w] for w in members]))
    return rows


def plot_history(history: Dict[str, np.ndarray], path: str, title: str = "") -> None:
    """Shen et al.'s Fig. 1 for one run: held-out perplexity, cluster and in-cluster perplexity
    (when measured), and the share of words and of token mass that changed cluster, against the
    words trained."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    words = history["words_done"] / 1e6
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    for key, label in (("ppl", "perplexity"), ("cluster_ppl", "cluster perplexity"),
                       ("in_cluster_ppl", "in-cluster perplexity")):
        if np.isfinite(history[key]).any():
            top.plot(words, history[key], marker=".", label=label)
    top.set_yscale("log")
    top.set_ylabel("held-out (sample)")
    top.legend()
    top.set_title(textwrap.fill(title or "self-organized clusters while training", 70),
                  fontsize=10)
    bottom.plot(words, 100 * history["changed_share"], marker=".", label="words that changed cluster")
    bottom.plot(words, 100 * history["changed_mass"], marker=".", label="their token mass")
    bottom.set_ylabel("% at each re-assignment")
    bottom.set_xlabel("words trained (millions)")
    bottom.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
