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
from typing import Dict, List, Optional

from ..corpus import as_corpus
from ..encode import encode_chunks
from ..scoring import score_on_host


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
