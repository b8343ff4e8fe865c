"""Training in rounds: each Dask worker holds one shard of the corpus and trains it with its own
threads (the same kernels, chunks and id cache as one machine); every round it starts from the
weights the client sends, trains its next ``round_words`` words and sends its weights back; the
client combines them row by row and the next round starts from the result.

How rows are combined (``combine``). Every rule starts from the expected number of updates
each worker made to each row this round (``RowWeights``: a word's occurrences times its
down-sampling keep rate for an input row; for an HS node the same summed over the words below
it; for an NS output row its occurrences plus its share of the noise draws). A row no worker
touched stays as it was under every rule.

* ``"adaptive"`` (default): a row that worker k moved by d_k went a share f_k of the way to
  where its updates pull it, f_k = 1 - exp(-alpha x c x n_k) for n_k updates at learning rate
  alpha, c the contraction of one update (sigma'(0) x the mean squared norm of the other side's
  rows). Sequential SGD would have covered 1 - prod(1 - f_k) of that way with all the workers'
  updates; the row moves that far along sum(d_k) / sum(f_k). Rows that moved little (rare
  words, early training) get the sum of the changes, rows that saturated (frequent words,
  the top of the tree) the mean, a row one worker touched that worker's version.
* ``"weighted"``: the average of the workers' versions weighted by their update counts (Spark's
  fix for SPARK-24666 averages over the partitions that touched a row; this weighs them): safe,
  but a row every worker trains only progresses as fast as on one worker, so N workers need
  about N times the epochs for the frequent rows.
* ``"mean"``: the plain average of the workers' weights (model averaging).
* ``"sum"``: the start plus the sum of the changes (a synchronous parameter server): one
  machine's result while the steps are small, (workers x) too far for rows that saturate in a
  round; diverges with many workers. (Spark MLlib before SPARK-24666 added up the partitions'
  *vectors*, not their changes, which grows them without bound.)

The learning rate of each worker decays linearly over its own shard's words x epochs, so all
workers reach ``min_alpha`` together when the shards are balanced (they are cut to equal bytes).
Each worker's chunks are seeded from (seed, shard, epoch, chunk number): with one thread per
worker the whole run is reproducible.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from ..cpu_session import Plan
from ..devices import make_device
from ..encode import EpochSource
from ..errors import OptionError, TrainingDiverged
from ..id_cache import cache_dir, check_space, estimate_bytes
from ..kernels.common import mix_seed
from ..trainer import Job, TrainSettings, prefetch, run_chunks
from .splits import SplitCorpus

logger = logging.getLogger(__name__)

COMBINES = ("adaptive", "weighted", "mean", "sum")


def check_layer(layer, counts) -> None:
    """Layers whose rows can be combined: those that say how often each row is updated
    (``OutputLayer.row_updates``), without per-word statistics."""
    counts = np.asarray(counts, np.float64)
    if layer.word_stats is not None or layer.row_updates(counts, counts) is None:
        raise OptionError(f"training on Dask needs an output layer whose rows can be combined "
                          f"across workers (hierarchical softmax over a fixed tree, negative "
                          f"sampling, a layer defining row_updates), not {layer.describe()}")


@dataclass(frozen=True)
class ShardSettings:
    """What a Dask worker is sent to train its shard with: the call's ``TrainSettings`` (as on
    one machine) and what is its own."""

    train: TrainSettings
    threads: int
    total_words: int          # its shard's input words x epochs: its rate decays over these
    max_sentence_length: int  # of the corpus its splits are read as


class ShardTrainer:
    """A Dask actor: one worker's shard, its session and its place in the shard's epochs."""

    def __init__(self, shard: int, splits, words: List[str], layer, syn0_shape, keep_thr,
                 settings: ShardSettings, start=(0, 0), words_done: int = 0):
        self.settings = settings
        s = settings.train
        self.shard = shard
        self.index = {w: i for i, w in enumerate(words)}
        self.layer = layer
        self.syn0 = np.zeros(syn0_shape, dtype=np.float32)
        # a worker trains on its CPU, through the same session interface as one machine
        self.session = make_device("cpu").open(self.syn0, layer, settings.threads)
        self.plan = Plan.from_settings(s, keep_thr, settings.total_words)
        use_cache = s.cache_ids and s.epochs > 1
        if use_cache:
            check_space(cache_dir(s.tmp_dir),
                        estimate_bytes(settings.total_words // s.epochs, s.chunk_words))
        self.source = EpochSource(SplitCorpus(splits, settings.max_sentence_length), self.index,
                                  s.chunk_words, use_cache=use_cache, cache_dir=s.tmp_dir)
        # shard 0 draws one machine's streams: one worker, one thread is one machine's run
        self.seed = s.seed if shard == 0 else int(mix_seed(s.seed, 1_000_003, shard) >> 1)
        self.start = tuple(start)  # (epoch, chunk) to continue from (a checkpoint's)
        self.stream = self._stream()
        self._pending = None
        self.words_done = int(words_done)
        self.done = False
        self.session.warm_up(self.plan)

    def _stream(self):
        """(epoch, chunk number, chunk) from ``start`` on; the chunks before it are only read
        (to fill the id cache) when a later pass needs them."""
        for epoch in range(self.settings.train.epochs):
            cache = self.source.cache
            if epoch < self.start[0] and (cache is None or cache.complete):
                continue
            depth = 2 * self.session.concurrency
            for number, chunk in enumerate(prefetch(self.source.epoch(), depth)):
                if (epoch, number) >= self.start:
                    yield epoch, number, chunk

    def _next(self):
        item, self._pending = self._pending, None
        if item is None:
            item = next(self.stream, None)
        if item is None:
            self.done = True
            self.source.close()
        return item

    def train_round(self, syn0: np.ndarray, weights: np.ndarray, round_words: int) -> Dict:
        """Start from these weights, train the next ``round_words`` words of the shard; the
        weights, the expected update counts and what was trained."""
        started = time.perf_counter()
        words_before = self.words_done
        self.syn0[:] = syn0
        self.layer.weights[:] = weights
        occurrences = np.zeros(len(self.index), dtype=np.int64)
        chunks = []
        taken = [0]

        def jobs():
            while taken[0] < round_words:
                item = self._next()
                if item is None:
                    return
                epoch, number, chunk = item
                yield Job(epoch, number, chunk, self.words_done)
                self.words_done += len(chunk.ids)
                taken[0] += len(chunk.ids)
            self._pending = self._next()  # so a shard that has ended says so in this round

        def run(job):
            return self.session.train_chunk(self.plan, job.chunk, job.words_before,
                                            mix_seed(self.seed, job.epoch, job.number))

        def handle(job, out):
            loss, pairs, trained = out
            if not math.isfinite(loss):
                raise TrainingDiverged(f"training diverged on shard {self.shard} in epoch "
                                       f"{job.epoch + 1}: the loss became {loss}")
            occurrences[:] += np.bincount(job.chunk.ids, minlength=len(occurrences))
            chunks.append((job.epoch, job.number, job.chunk.raw_tokens, trained, pairs, loss))

        run_chunks(self.session, jobs(), run, handle, 2 * self.session.concurrency)
        return {"syn0": self.syn0, "weights": self.layer.weights, "occurrences": occurrences,
                "chunks": chunks, "done": self.done, "seconds": time.perf_counter() - started,
                "cache_bytes": self.source.cache_bytes, "words_done": self.words_done,
                "next": None if self._pending is None else list(self._pending[:2]),
                "alpha": self._alpha((words_before + self.words_done) / 2)}

    def _alpha(self, words: float) -> float:
        """The learning rate at ``words`` of this shard's training."""
        return self.plan.schedule.at(words)

    def close(self) -> None:
        self.source.close()


class RowWeights:
    """Per worker, the expected number of updates of every input and output row in a round,
    from the words it trained (``occurrences``) and the down-sampling keep rates."""

    def __init__(self, layer, keep_prob: np.ndarray, counts: np.ndarray):
        self.keep = np.asarray(keep_prob, np.float64)
        self.layer = layer
        self.counts = counts

    def moved(self, model, weights, alphas):
        """Per worker, (input rows, output rows): the share of the way to its optimum each row
        moved (``combine="adaptive"``). A step on an input row contracts its scores by about
        alpha x sigma'(0) x |output row|^2 and the other way round; about window + 1
        predictions use each trained occurrence."""
        per = model.window + 1.0
        n_in = float(np.mean(np.einsum("ij,ij->i", model.syn0, model.syn0)))
        n_out = float(np.mean(np.einsum("ij,ij->i", model.layer.weights, model.layer.weights)))
        k_in, k_out = 0.25 * n_out, 0.25 * n_in
        return ([moved_share(w[0] * per, a, k_in) for w, a in zip(weights, alphas)],
                [moved_share(w[1] * per, a, k_out) for w, a in zip(weights, alphas)])

    def __call__(self, occurrences: np.ndarray):
        """(input row weights, output row weights)."""
        trained = occurrences * self.keep
        return trained, self.layer.row_updates(trained, self.counts)


def combine(start: np.ndarray, versions: List[np.ndarray], weights: Optional[List[np.ndarray]],
            rule: str, moved: Optional[List[np.ndarray]] = None) -> np.ndarray:
    """The rows of ``versions`` (one array per worker) combined by ``rule`` (module doc).
    ``moved`` (``adaptive``): per worker, the share f of the way to its target each row is
    expected to have moved in the round."""
    if len(versions) == 1 and rule != "sum":
        return versions[0].copy()
    if rule == "adaptive":
        return _adaptive(start, versions, moved)
    if rule == "mean":
        out = np.zeros(start.shape, np.float64)
        for v in versions:
            out += v
        return (out / len(versions)).astype(np.float32)
    if rule == "sum":
        out = start.astype(np.float64)
        for v in versions:
            out += v - start
        return out.astype(np.float32)
    total = np.zeros(start.shape[0], np.float64)
    out = np.zeros(start.shape, np.float64)
    for v, w in zip(versions, weights):
        out += w[:, None] * v
        total += w
    touched = total > 0
    result = start.copy()
    result[touched] = (out[touched] / total[touched, None]).astype(np.float32)
    return result


def moved_share(updates: np.ndarray, alpha: float, curvature: float) -> np.ndarray:
    """The share of the way to its optimum a row moves in ``updates`` SGD steps of learning rate
    ``alpha`` when each step contracts the distance by ``alpha x curvature``."""
    return -np.expm1(-alpha * curvature * updates)


def _adaptive(start, versions, moved):
    """Each worker moved row r by d_k = f_k (t - x0) towards a common target t: estimate
    (t - x0) = sum d_k / sum f_k and move by the share sequential SGD would have covered with
    all the workers' steps, 1 - prod(1 - f_k). Small steps (rare rows, early training): the sum
    of the changes; saturated rows (frequent words late): their mean; one worker: its row."""
    f_sum = np.zeros(start.shape[0])
    stay = np.ones(start.shape[0])
    delta = np.zeros(start.shape, np.float64)
    for v, f in zip(versions, moved):
        delta += v
        delta -= start
        f_sum += f
        stay *= 1.0 - f
    touched = f_sum > 0
    scale = np.where(touched, (1.0 - stay) / np.where(touched, f_sum, 1.0), 0.0)
    return (start + delta * scale[:, None]).astype(np.float32)
