"""Held-out scoring: the mean negative log-likelihood per prediction, and its perplexity.

Hierarchical softmax gives normalised probabilities (the path probabilities of all leaves sum to
1), so the likelihood of held-out text compares trees directly: the language-model view of the
SemHuff and self-organized HSM papers. What is scored:

* **skip-gram**: every ordered pair (context word, centre word) within the **full** window
  (no reduced window), ``-log P(centre | context)`` through the centre's path, exactly as the
  model was trained to predict (word2vec.c's direction; over a full window the set of pairs is
  symmetric, so it is also the centre -> context view);
* **CBOW**: every centre word with at least one context word, ``-log P(centre | mean (or sum,
  ``cbow_mean=0``) of the full-window context vectors)``;
* **no down-sampling**; out-of-vocabulary words are dropped before windowing, as in training
  (``oov_tokens`` counts them), so compare perplexities of models with the same vocabulary.

Exact float64 arithmetic (no sigmoid table, no clipping), threads over chunks like training.

Reading the figure: with all output weights at zero, HS over a Huffman tree *is* the unigram
model (every branch 1/2, P(w) = 2^-code length), so an untrained model's perplexity is the
unigram baseline. A model trained with down-sampling (word2vec's default ``sample=1e-3``) has
learned to predict the down-sampled, much flatter distribution of centre words; scored on full
text it can come out *worse* than that baseline even when its vectors are good. Compare trees
trained with the same settings; to read the figure as a language model, train with
``sample=0`` (measured in docs/design.md).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .cpu_session import Plan
from .encode import DEFAULT_CHUNK_WORDS, encode_chunks
from .kernels import loop
from .trainer import TrainSettings, prefetch, run_chunks


@dataclass
class ScoreReport:
    nll: float = 0.0          # summed negative log-likelihood, nats
    cluster_nll: float = float("nan")  # its cluster part, for clustered layers (clusters=True)
    predictions: int = 0
    tokens: int = 0           # tokens read, out-of-vocabulary included
    oov_tokens: int = 0
    seconds: float = 0.0
    compile_seconds: float = 0.0

    @property
    def mean_nll(self) -> float:
        """Nats per prediction."""
        return self.nll / self.predictions if self.predictions else float("nan")

    @property
    def perplexity(self) -> float:
        return math.exp(self.mean_nll) if self.predictions else float("nan")

    @property
    def words_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    @property
    def cluster_perplexity(self) -> float:
        """exp(mean -log P(c(w) | h)), Shen et al. eq. 5 (nan unless scored with clusters)."""
        return math.exp(self.cluster_nll / self.predictions) if self.predictions else float("nan")

    @property
    def in_cluster_perplexity(self) -> float:
        """exp(mean -log P(w | c(w), h)), eq. 6."""
        nll = self.nll - self.cluster_nll
        return math.exp(nll / self.predictions) if self.predictions else float("nan")

    def summary(self) -> str:
        clusters = ("" if math.isnan(self.cluster_nll) else
                    f" (cluster perplexity {self.cluster_perplexity:,.2f}, in-cluster "
                    f"{self.in_cluster_perplexity:,.2f})")
        return (f"{self.predictions:,} predictions over {self.tokens:,} tokens "
                f"({self.oov_tokens:,} out of vocabulary): {self.mean_nll:.4f} nats per "
                f"prediction, perplexity {self.perplexity:,.2f}{clusters}; {self.seconds:.1f} s "
                f"= {self.words_per_second:,.0f} words/s")


def score(session, sentences, index, sg: bool, window: int,
          chunk_words: int = DEFAULT_CHUNK_WORDS, cbow_mean: bool = True,
          clusters: bool = False) -> ScoreReport:
    """Score ``sentences`` with the session's threads; ``clusters``: also the cluster part of
    every prediction (a second pass with the layer's ``score_args(1)``)."""
    plan = Plan.from_settings(TrainSettings(sg=sg, window=window, cbow_mean=cbow_mean),
                              np.full(len(index), 0xFFFFFFFF, np.uint32), score=True)
    report = ScoreReport(compile_seconds=session.warm_up(plan, score=True))
    started = time.perf_counter()

    if clusters:
        report.cluster_nll = 0.0

    def run(chunk):
        out = session.score_chunk(plan, chunk)
        return out + (session.score_chunk(plan, chunk, part=1)[0] if clusters else 0.0,)

    def handle(chunk, out):
        nll, pairs, cluster_nll = out
        report.nll += nll
        report.cluster_nll += cluster_nll
        report.predictions += pairs
        report.tokens += chunk.raw_tokens
        report.oov_tokens += chunk.raw_tokens - len(chunk.ids)

    chunks = prefetch(encode_chunks(sentences, index, chunk_words), 2 * session.concurrency)
    run_chunks(session, chunks, run, handle, 2 * session.concurrency)
    report.seconds = time.perf_counter() - started
    return report


def score_on_host(kernel, syn0, weights, larg, chunks, window: int):
    """(summed nll, predictions) of ``chunks`` with a scoring kernel on host arrays, in this
    thread (for hooks, which run while the workers wait)."""
    keep = np.full(syn0.shape[0], 0xFFFFFFFF, np.uint32)
    nll, pairs = 0.0, 0
    for chunk in chunks:
        out = kernel(chunk.ids, chunk.bounds, syn0, weights, larg, np.zeros((1, 2)), keep, window,
                     False, 0.0, 0.0, 0, 1, np.uint64(0), loop.NO_HOT, loop.NO_HOT)
        nll += out[0]
        pairs += out[1]
    return nll, pairs
