"""Training on a Dask cluster (``pip install 'semhuff[dask]'``; docs/scaling.md).

``Word2Vec(corpus, dask="tcp://scheduler:8786")`` or ``dask="local:4"`` (a ``LocalCluster`` of 4
worker processes on this machine), or a ``distributed.Client``, or ``DaskTraining(...)`` for the
round length and the combination rule; ``semhuff-train --dask ADDRESS`` the same.

1. The vocabulary is a map-reduce over byte-range splits of the input files (``vocab.py``):
   exactly the single pass's vocabulary.
2. The output layer (the tree) is built once, on the client, and sent to every worker with the
   initial weights.
3. Training runs in rounds (``rounds.py``): every worker trains the next ``round_words`` words
   of its shard with its own threads, the client combines the weights row by row and sends the
   result back for the next round, until every shard has been trained ``epochs`` times.

The result is an ordinary ``Word2Vec``: it saves, exports and scores as any other.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np

from ..corpus import Corpus, is_url
from ..errors import CheckpointError, OptionError, SemhuffError, TrainingDiverged
from ..trainer import ChunkStats, EpochStats, TrainReport, TrainSettings
from .round_plan import DEFAULT_ROUND_WORDS, plan_rounds
from .rounds import COMBINES, RowWeights, ShardSettings, ShardTrainer, check_layer, combine
from .splits import corpus_files, plan_splits
from .vocab import count_shards, count_vocab

logger = logging.getLogger(__name__)


@dataclass
class DaskTraining:
    """Where and how to train on Dask. ``scheduler``: an address (``tcp://host:8786``),
    ``local:N`` (a LocalCluster of N worker processes here) or a ``distributed.Client``.
    ``round_words``: words each worker trains between two combinations (None: 1,000,000, or
    fewer so that the run has a handful of rounds, ``round_plan``). ``threads``: training
    threads per worker (default: the worker's ``--nthreads``)."""

    scheduler: object
    round_words: Optional[int] = None
    combine: str = "adaptive"
    threads: Optional[int] = None

    def __post_init__(self):
        if self.round_words is not None and (
                not isinstance(self.round_words, (int, np.integer)) or self.round_words < 1):
            raise OptionError(f"round_words must be a positive number of words, got "
                              f"{self.round_words!r}")
        if self.combine not in COMBINES:
            raise OptionError(f"combine must be one of {', '.join(COMBINES)}, got {self.combine!r}")
        if self.threads is not None and self.threads < 1:
            raise OptionError(f"threads must be >= 1, got {self.threads!r}")


@dataclass
class RoundStats:
    seconds: float          # the round on the client: send, train, receive
    train_seconds: float    # the slowest worker's training inside it
    combine_seconds: float
    words: int


@dataclass
class DaskReport:
    workers: int
    threads: List[int]
    rounds: List[RoundStats] = field(default_factory=list)
    round_words: int = 0    # the words each worker trained in a round (given or chosen)

    @property
    def overhead_seconds(self) -> float:
        """Time of the rounds not spent training: transfers, waiting for the slowest worker's
        start, combining."""
        return sum(r.seconds - r.train_seconds + r.combine_seconds for r in self.rounds)


def as_training(spec) -> DaskTraining:
    return spec if isinstance(spec, DaskTraining) else DaskTraining(spec)


class Runtime:
    """A client for the duration of a training: connects to the scheduler, or starts (and
    later stops) a LocalCluster for ``local:N``."""

    def __init__(self, spec: DaskTraining):
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise OptionError("training on Dask needs dask.distributed: pip install "
                              "'semhuff[dask]'") from None
        # dask narrates every connection at INFO from its own handler: only with -vv
        verbose = logging.getLogger("semhuff").getEffectiveLevel() <= logging.DEBUG
        logging.getLogger("distributed").setLevel(logging.INFO if verbose else logging.WARNING)
        self.cluster = None
        scheduler = spec.scheduler
        if isinstance(scheduler, Client):
            self.client, self.owned = scheduler, False
            return
        if not isinstance(scheduler, str) or not scheduler:
            raise OptionError(f"dask must be a scheduler address, 'local:N' or a Client, got "
                              f"{scheduler!r}")
        if scheduler.startswith("local:"):
            n = scheduler.split(":", 1)[1]
            if not n.isdigit() or int(n) < 1:
                raise OptionError(f"--dask local:N needs a number of workers >= 1, got {scheduler!r}")
            n = int(n)
            threads = spec.threads or max(1, (os.cpu_count() or 1) // n)
            self.cluster = LocalCluster(n_workers=n, threads_per_worker=threads, processes=True,
                                        dashboard_address=":0", silence_logs=logging.WARNING)
            scheduler = self.cluster
        try:
            self.client = Client(scheduler, timeout="30s")
        except (OSError, TimeoutError) as exc:
            raise OptionError(f"cannot reach the Dask scheduler {scheduler}: {exc}") from None
        self.owned = True

    def workers(self):
        """(address, nthreads) of every worker, in a fixed order."""
        info = self.client.scheduler_info(n_workers=-1)["workers"]
        if not info:
            raise SemhuffError("the Dask cluster has no workers")
        return sorted((addr, w["nthreads"]) for addr, w in info.items())

    def close(self):
        if self.owned:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()


class DaskRunner:
    """How a ``Word2Vec`` with ``dask=`` builds its vocabulary and trains: the runner's own
    state (the cluster connection, kept from ``build_vocab`` to ``train``; the shards the
    map-reduce counted) lives here, not on the model. ``Word2Vec.dask_runner`` holds it."""

    def __init__(self, spec):
        self.spec = as_training(spec)
        self.runtime: Optional[Runtime] = None
        # files -> (shards, tokens per shard) as last counted on the cluster (build_vocab's
        # map-reduce: raw tokens; count_words: in-vocabulary ones): each shard's share
        self.shards: Dict[Tuple[str, ...], tuple] = {}

    def _connect(self, model) -> Runtime:
        if model.device != "cpu":  # the shards train with the CPU session
            raise OptionError(f"training on Dask runs on the workers' CPUs: --device "
                              f"{model.device} cannot be combined with --dask")
        if self.runtime is None:
            self.runtime = Runtime(self.spec)
        return self.runtime

    def build_vocab(self, model, sentences):
        """The vocabulary by map-reduce; the cluster stays up for ``train``."""
        runtime = self._connect(model)
        files = _files(sentences)
        shards = plan_splits(files, len(runtime.workers()))
        vocab, shard_tokens = count_vocab(runtime.client, shards, model.min_count,
                                          model.max_vocab_size, model.max_final_vocab,
                                          model.max_sentence_length)
        self.shards[tuple(files)] = (shards, shard_tokens)
        return vocab

    def count_words(self, model, sentences) -> Tuple[int, int]:
        """(in-vocabulary, raw) words an epoch of ``sentences`` holds (a corpus other than the
        one ``build_vocab`` counted: continued training), counted on the cluster shard by shard
        (``vocab.count_shards``), so that ``train`` runs each worker's learning rate over
        exactly its shard's words: every worker ends at min_alpha, none early."""
        runtime = self._connect(model)
        files = _files(sentences)
        shards = plan_splits(files, len(runtime.workers()))
        kept, raw = count_shards(runtime.client, shards, model.vocab.words,
                                 model.max_sentence_length)
        self.shards[tuple(files)] = (shards, kept)
        logger.info("this corpus, counted on %d workers: %d words an epoch, %d of them in the "
                    "vocabulary (the learning rate falls to min_alpha over these)", len(shards),
                    sum(raw), sum(kept))
        return max(1, sum(kept)), max(1, sum(raw))

    def train(self, model, corpus, settings: TrainSettings, words_per_epoch, checkpoint, hooks,
              start=None) -> TrainReport:
        """``Word2Vec.train`` on the cluster; the cluster of ``local:N`` stops at the end."""
        if hooks or model.hooks:
            raise OptionError("hooks do not run on Dask (each worker trains its own copy)")
        if start is not None and not isinstance(start, dict):
            raise CheckpointError("the checkpoint was written by a run on one machine: resume "
                                  "it without Dask")
        runtime = self._connect(model)
        try:
            files = _files(corpus)
            counted = self.shards.get(tuple(files))
            return train(model, corpus, settings, runtime, self.spec, words_per_epoch,
                         checkpoint, start, None if counted is None else (files, *counted))
        finally:
            self.close()

    def close(self) -> None:
        if self.runtime is not None:
            self.runtime.close()
            self.runtime = None


def _files(sentences) -> List[str]:
    if isinstance(sentences, Corpus):
        return list(sentences.files)
    if isinstance(sentences, (str, os.PathLike)) or (
            isinstance(sentences, (list, tuple)) and sentences
            and all(isinstance(s, (str, os.PathLike)) for s in sentences)):
        return corpus_files(sentences)
    raise OptionError("training on Dask reads the corpus on the workers: give file paths "
                      "(on a file system every worker sees) or fsspec URLs, not sentences")


def train(model, sentences, settings: TrainSettings, runtime: Runtime, spec: DaskTraining,
          words_per_epoch: Optional[int] = None, checkpoint=None,
          start: Optional[dict] = None, counted=None) -> TrainReport:
    """Train ``model`` (vocabulary and layer ready) on the cluster; its weights are replaced by
    the combined ones. ``settings``: the call's (``TrainSettings.from_model``), sent to every
    worker with its shard's share (``ShardSettings``). ``checkpoint`` (a ``Checkpointer``) is
    offered the position after every round; ``start``: such a position, to continue from;
    ``counted``: the map-reduce's
    ``(files, shards, tokens per shard)`` (``DaskRunner.shards``): each shard's share of the
    words; without it, of the bytes."""
    check_layer(model.layer, model.vocab.counts)
    files = _files(sentences)
    workers = runtime.workers()
    if start is not None and len(start["shards"]) != len(workers):
        raise CheckpointError(f"the checkpoint was written by a run on {len(start['shards'])} "
                              f"Dask workers; this cluster has {len(workers)}: resume on as many")
    if counted is not None and counted[0] == files and len(counted[1]) == len(workers):
        _, shards, shard_tokens = counted
    else:  # no map-reduce over these files: shard sizes from their bytes
        shards = plan_splits(files, len(workers))
        shard_tokens = None
    empty = sum(1 for shard in shards if not shard)
    if empty:
        logger.warning("%d of %d workers get no part of the corpus: a compressed file cannot be "
                       "split, so give plain text or at least as many files as workers",
                       empty, len(shards))
    vocab = model.vocab
    retained = vocab.retained_tokens if words_per_epoch is None else int(words_per_epoch)
    share = _shares(shards, shard_tokens)
    if start is not None:
        report = TrainReport.from_dict(start["report"])
        dask_report = DaskReport(len(workers), [], [RoundStats(**r) for r in start["rounds"]])
        places = {int(i): p for i, p in start["shards"].items()}
    else:
        report, dask_report = TrainReport(), DaskReport(len(workers), [])
        places = {i: {"next": [0, 0], "words_done": 0,
                      "total": max(1, round(retained * share[i])) * settings.epochs}
                  for i, shard in enumerate(shards) if shard}
    # chunks of about this many input words: a round is whole chunks
    chunk_words = settings.chunk_words * vocab.retained_tokens / max(vocab.total_tokens, 1)
    plan = plan_rounds([place["total"] for place in places.values()], settings.epochs,
                       chunk_words, spec.round_words)
    if plan.warning:
        logger.warning(plan.warning)
    elif spec.round_words is None and plan.round_words != DEFAULT_ROUND_WORDS:
        logger.info("rounds of %d words (fewer than %d would leave this corpus about %d rounds)",
                    plan.round_words, DEFAULT_ROUND_WORDS, plan.rounds)
    dask_report.round_words = plan.round_words
    seconds_before = report.seconds
    setup_started = time.perf_counter()
    actors = {}
    try:
        for i, place in sorted(places.items()):
            if place["next"] is None:
                continue  # this shard had ended
            addr, nthreads = workers[i]
            threads = spec.threads or nthreads
            dask_report.threads.append(threads)
            actors[i] = runtime.client.submit(
                ShardTrainer, i, shards[i], vocab.words, model.layer, model.syn0.shape,
                vocab.keep_thresholds(model.sample),
                ShardSettings(settings, threads, place["total"], model.max_sentence_length),
                tuple(place["next"]), place["words_done"],
                actor=True, workers=[addr], allow_other_workers=False, pure=False).result()
        # starting the workers' sessions (loading the kernels) is not training, as on one machine
        report.compile_seconds += time.perf_counter() - setup_started
        started = time.perf_counter()
        weigh = RowWeights(model.layer, vocab.keep_probabilities(model.sample), vocab.counts)
        while actors:
            results = _round(model, actors, weigh, spec, plan.round_words, dask_report, report,
                             seconds_before - started)
            for i, r in results.items():
                places[i].update(next=r["next"], words_done=r["words_done"])
                if r["done"]:
                    del actors[i]
            if checkpoint is not None and actors and checkpoint.due():
                report.seconds = seconds_before + time.perf_counter() - started
                checkpoint.write({"shards": places, "report": report.to_dict(),
                                  "rounds": [dataclasses.asdict(r) for r in dask_report.rounds]},
                                 key="dask")
    finally:
        for actor in actors.values():
            try:
                actor.close().result()
            except Exception:  # a worker that died has nothing left to close
                pass
        actors.clear()
    report.seconds = seconds_before + time.perf_counter() - started
    report.dask = dask_report
    logger.info("Dask: %d workers, %d rounds, %.1f s of them outside training",
                dask_report.workers, len(dask_report.rounds), dask_report.overhead_seconds)
    return report


def _round(model, actors: dict, weigh: RowWeights, spec: DaskTraining, round_words: int,
           dask_report: DaskReport, report: TrainReport, clock: float) -> dict:
    """One round: send the weights, let every worker train, combine what comes back into the
    model; each worker's result, by shard."""
    round_started = time.perf_counter()
    futures = {i: a.train_round(model.syn0, model.layer.weights, round_words)
               for i, a in actors.items()}
    results = {i: f.result() for i, f in futures.items()}
    received = time.perf_counter()
    ordered = [results[i] for i in sorted(results)]
    weights = [weigh(r["occurrences"]) for r in ordered]
    moved = weigh.moved(model, weights, [r["alpha"] for r in ordered])
    syn0 = combine(model.syn0, [r["syn0"] for r in ordered], [w[0] for w in weights],
                   spec.combine, moved[0])
    out = combine(model.layer.weights, [r["weights"] for r in ordered], [w[1] for w in weights],
                  spec.combine, moved[1])
    if not (np.isfinite(syn0).all() and np.isfinite(out).all()):
        raise TrainingDiverged(f"training diverged on Dask in round {len(dask_report.rounds) + 1} "
                               f"(combine={spec.combine!r}; learning rate {model.alpha} too high?)")
    model.syn0[:] = syn0
    model.layer.weights[:] = out
    now = time.perf_counter()
    words = 0
    for r in ordered:
        for epoch, number, raw, trained, pairs, loss in r["chunks"]:
            while len(report.epochs) <= epoch:
                report.epochs.append(EpochStats())
            e = report.epochs[epoch]
            e.raw_words += raw
            e.trained_words += trained
            e.pairs += pairs
            e.loss += loss
            report.chunks.append(ChunkStats(epoch, number, raw, trained, pairs, loss, clock + now))
            words += raw
    dask_report.rounds.append(RoundStats(received - round_started,
                                         max(r["seconds"] for r in ordered),
                                         now - received, words))
    report.id_cache_bytes = max(report.id_cache_bytes, sum(r["cache_bytes"] for r in ordered))
    logger.info("round %d: %d words, %.2f s (%.2f s combining)", len(dask_report.rounds), words,
                now - round_started, now - received)
    return results


def _shares(shards, shard_tokens) -> List[float]:
    """Each shard's share of the corpus: by tokens when the map-reduce counted them, else by
    bytes."""
    if shard_tokens is not None and sum(shard_tokens):
        return [t / sum(shard_tokens) for t in shard_tokens]
    from .splits import file_size
    sizes = []
    for shard in shards:
        size = 0
        for s in shard:
            size += (file_size(s.path) if s.end < 0 else s.end - s.start)
        sizes.append(size)
    return [s / max(sum(sizes), 1) for s in sizes]


__all__ = ["DaskRunner", "DaskTraining", "DaskReport", "Runtime", "train", "count_vocab",
           "plan_splits", "is_url"]
