"""The training loop. A reader thread turns the corpus into chunks of ids; the calling thread
hands them to the device session's workers (at most ``2 x concurrency`` in flight), collects the
results, drives the progress bar and runs the hooks; the workers only run kernels (nogil).

Hooks run at chunk boundaries with nothing in flight (``hooks.py``). A chunk whose loss is not
finite stops the run (``TrainingDiverged``), and so does an epoch that predicts far worse than
an untrained model (``health.py``): a diverged model is a failure, never a result.

Reproducibility: every chunk's random stream is seeded from (seed, epoch, chunk number), never
from the thread that runs it, so ``workers=1`` with a seed is bit-for-bit reproducible.

Checkpoints (``checkpoint.py``): at a chunk boundary, after the hooks due there, a due
checkpoint waits until nothing is in flight and is handed the ``Position``; a run started from a
``Position`` re-reads the epoch in progress (refilling the id cache), skips the chunks already
trained (checking that they are the same ids) and goes on as the killed run would have.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import queue
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Iterable, Iterator, List, Optional, Sequence

import numpy as np

from . import health
from .cpu_session import Plan
from .encode import DEFAULT_CHUNK_WORDS, EpochSource
from .errors import CheckpointError, OptionError, TrainingDiverged
from .hooks import Hook, HookContext, HookSchedule
from .id_cache import cache_dir, check_space, estimate_bytes
from .kernels.common import mix_seed
from .schedule import check_rate
from .wording import counted

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainSettings:
    """The settings of one ``train()`` call, made from the model by ``from_model``; a ``Plan``
    is made from them by ``Plan.from_settings`` (here, in scoring and on Dask's workers, which
    are sent this dataclass)."""

    sg: bool = True
    cbow_mean: bool = True
    window: int = 5
    alpha: float = 0.025
    min_alpha: float = 0.0001
    epochs: int = 5
    seed: int = 1
    chunk_words: int = DEFAULT_CHUNK_WORDS
    cache_ids: bool = True
    progress: bool = True
    tmp_dir: Optional[str] = None  # the id cache's folder (None: TMPDIR)
    shrink_windows: bool = True  # word2vec's reduced windows; False: always the full window
    lockf: Optional[np.ndarray] = None  # lock factor per word (``Plan.lockf``); None: none

    def __post_init__(self):
        # refused here, before a pass over the corpus counts its words, not when the Plan is made
        for name in ("window", "epochs", "chunk_words"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise OptionError(f"{name} must be a positive integer, got {value!r}")
        check_rate(self.alpha, self.min_alpha)

    @classmethod
    def from_model(cls, model, epochs: int, lockf: Optional[np.ndarray] = None
                   ) -> "TrainSettings":
        """A ``Word2Vec``'s settings for a call of ``epochs`` (its ``train_calls``-th: each
        call draws other streams), on one machine or on Dask."""
        return cls(sg=bool(model.sg), cbow_mean=bool(model.cbow_mean), window=model.window,
                   alpha=model.alpha, min_alpha=model.min_alpha, epochs=int(epochs),
                   seed=model.seed + model.train_calls, chunk_words=model.chunk_words,
                   progress=model.progress, cache_ids=model.cache_ids, tmp_dir=model.tmp_dir,
                   shrink_windows=model.shrink_windows, lockf=lockf)


@dataclass
class EpochStats:
    raw_words: int = 0       # tokens read, out-of-vocabulary included
    trained_words: int = 0   # after down-sampling
    pairs: int = 0           # (context, centre) predictions (skip-gram) or centre words (CBOW)
    loss: float = 0.0        # summed negative log-likelihood, nats (float64)
    seconds: float = 0.0

    @property
    def loss_per_pair(self) -> float:
        return self.loss / self.pairs if self.pairs else float("nan")


@dataclass
class ChunkStats:
    """One chunk's result (the loss curve of ``--report``); ``record_chunk`` keeps them in
    corpus order, (epoch, chunk number), whatever order the workers finished them in."""

    epoch: int
    number: int
    raw_words: int
    trained_words: int
    pairs: int
    loss: float
    at_seconds: float  # since training started
    count: int = 1     # chunks this record sums (long runs merge neighbours: see ``record_chunk``)


MAX_CHUNK_RECORDS = 4096  # a billion tokens is ~20,000 chunks: the report must not grow with them


def record_chunk(records: List[ChunkStats], new: ChunkStats, limit: int = MAX_CHUNK_RECORDS) -> None:
    """Append ``new``; past ``limit`` records, merge neighbours of the same epoch pairwise (sums,
    the later time), so the loss curve keeps its shape at half the resolution and the memory
    and the report stay bounded however long the run."""
    records.append(new)
    i = len(records) - 1  # with 2+ workers chunks finish out of order, a few places at most
    while i > 0 and (records[i - 1].epoch, records[i - 1].number) > (new.epoch, new.number):
        records[i] = records[i - 1]
        i -= 1
    records[i] = new
    if len(records) <= limit:
        return
    merged: List[ChunkStats] = []
    i = 0
    while i < len(records):
        a = records[i]
        b = records[i + 1] if i + 1 < len(records) else None
        if b is not None and b.epoch == a.epoch:
            merged.append(ChunkStats(a.epoch, a.number, a.raw_words + b.raw_words,
                                     a.trained_words + b.trained_words, a.pairs + b.pairs,
                                     a.loss + b.loss, b.at_seconds, a.count + b.count))
            i += 2
        else:
            merged.append(a)
            i += 1
    records[:] = merged


@dataclass
class TrainReport:
    seconds: float = 0.0
    compile_seconds: float = 0.0  # first use of a kernel on this machine; not in ``seconds``
    hook_seconds: float = 0.0     # time spent in hooks (inside ``seconds``)
    hook_calls: int = 0
    epochs: List[EpochStats] = field(default_factory=list)
    chunks: List[ChunkStats] = field(default_factory=list)
    device_stats: dict = field(default_factory=dict)  # what the session measured (a GPU's)
    id_cache_bytes: int = 0       # disk the first epoch's id cache took (0: none)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainReport":
        return cls(**{**d, "epochs": [EpochStats(**e) for e in d["epochs"]],
                      "chunks": [ChunkStats(**c) for c in d["chunks"]]})

    @property
    def raw_words(self) -> int:
        return sum(e.raw_words for e in self.epochs)

    @property
    def trained_words(self) -> int:
        return sum(e.trained_words for e in self.epochs)

    @property
    def words_per_second(self) -> float:
        return self.raw_words / self.seconds if self.seconds > 0 else float("nan")

    def summary(self) -> str:
        losses = [f"{e.loss_per_pair:.4f}" for e in self.epochs]
        if len(losses) > 6:
            losses = losses[:3] + ["..."] + losses[-2:]
        compiled = (f" (+{self.compile_seconds:.1f} s compiling the kernel, once per configuration)"
                    if self.compile_seconds >= 0.05 else "")
        hooks = (f"; hooks: {counted(self.hook_calls, 'call')}, {self.hook_seconds:.1f} s"
                 if self.hook_calls else "")
        return (f"{counted(len(self.epochs), 'epoch')}, {self.raw_words:,} raw words "
                f"({self.trained_words:,} after down-sampling) in {self.seconds:.1f} s = "
                f"{self.words_per_second:,.0f} words/s{compiled}; loss per prediction by epoch: "
                f"{', '.join(losses)}{hooks}")


@dataclass
class Position:
    """Where a ``train()`` call stands at a chunk boundary with nothing in flight: everything a
    continuation needs besides the model (JSON-able, saved in a checkpoint)."""

    epoch: int          # the epoch in progress (0-based)
    chunk: int          # the next chunk's number in it
    words_before: int   # that chunk's position in the call (the learning-rate decay)
    words_done: int     # in-vocabulary words finished in this call (the hooks' progress)
    digest: int         # crc32 of the ids and bounds of the epoch's chunks before ``chunk``
    epoch_seconds: float
    report: dict        # the ``TrainReport`` so far

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def chunk_digest(chunk, digest: int = 0) -> int:
    return zlib.crc32(chunk.bounds, zlib.crc32(chunk.ids, digest))


class Job:
    __slots__ = ("epoch", "number", "chunk", "words_before", "digest")

    def __init__(self, epoch, number, chunk, words_before, digest=0):
        self.epoch, self.number, self.chunk, self.words_before = epoch, number, chunk, words_before
        self.digest = digest  # of the epoch's chunks before this one


class WorkerPool:
    """``n`` threads running ``run(job)``; results come back in completion order. The owner
    bounds the jobs in flight, so the job queue never grows."""

    def __init__(self, run, n: int):
        self._jobs: "queue.Queue" = queue.Queue()
        self._results: "queue.Queue" = queue.Queue()
        self.in_flight = 0

        def work():
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                try:
                    self._results.put((job, run(job)))
                except BaseException as exc:  # re-raised by ``collect`` in the owner's thread
                    self._results.put((job, exc))

        self._threads = [threading.Thread(target=work, name=f"semhuff-worker-{i}", daemon=True)
                         for i in range(max(1, n))]
        for t in self._threads:
            t.start()

    def submit(self, job) -> None:
        self._jobs.put(job)
        self.in_flight += 1

    def collect(self):
        """The next finished (job, result); a worker's exception is raised here."""
        while True:
            try:  # a timeout keeps the wait interruptible by Ctrl-C
                job, out = self._results.get(timeout=0.5)
                break
            except queue.Empty:
                continue
        self.in_flight -= 1
        if isinstance(out, BaseException):
            raise out
        return job, out

    def close(self) -> None:
        """Let running jobs finish, drop their results, stop the threads."""
        for _ in self._threads:
            self._jobs.put(None)
        for t in self._threads:
            t.join()


def prefetch(items: Iterable, depth: int) -> Iterator:
    """Iterate ``items`` in a background thread, ``depth`` items ahead (the first epoch's
    tokenising overlaps the kernels). Exceptions surface in the consumer."""
    q: "queue.Queue" = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()
    end = object()

    def fill():
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.2)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put(end)
        except BaseException as exc:
            q.put(exc)

    thread = threading.Thread(target=fill, name="semhuff-reader", daemon=True)
    thread.start()
    try:
        while True:
            try:
                item = q.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def run_chunks(session, jobs: Iterable, run, handle, max_in_flight: int,
               before_submit=None) -> None:
    """Feed ``jobs`` to a pool of ``session.concurrency`` threads running ``run(job)``; call
    ``handle(job, result)`` in this thread for each result; ``before_submit(job, drain)`` may
    call ``drain()`` to wait until nothing is in flight (then run code on quiescent weights)."""
    pool = WorkerPool(run, session.concurrency)

    def drain():
        while pool.in_flight:
            handle(*pool.collect())

    try:
        for job in jobs:
            if before_submit is not None:
                before_submit(job, drain)
            while pool.in_flight >= max_in_flight:
                handle(*pool.collect())
            pool.submit(job)
        drain()
    finally:
        if hasattr(jobs, "close"):
            jobs.close()  # stops the reader thread of a generator of jobs
        pool.close()


def train(session, keep_thr: np.ndarray, sentences, vocab, retained_tokens: int,
          raw_tokens_per_epoch: int, settings: TrainSettings, counts: np.ndarray,
          hooks: Sequence[Hook] = (), checkpoint=None, start: Optional[Position] = None
          ) -> TrainReport:
    """Train the session's weights in place over ``settings.epochs`` passes. ``vocab``: a
    ``Vocab`` or a word -> id dict (``encode.EpochSource``). ``checkpoint``:
    an object with ``due()`` and ``write(position)`` (``checkpoint.Checkpointer``); ``start``:
    the ``Position`` of a checkpoint to continue from."""
    run = TrainingRun(session, keep_thr, sentences, vocab, retained_tokens, settings, counts,
                      hooks, checkpoint, start)
    return run.execute(raw_tokens_per_epoch)


class TrainingRun:
    """One ``train()`` call on one machine: the reader's chunks go to the session's workers
    (``run_chunks``), the results come back here (loss, progress, divergence check), hooks and
    checkpoints run between chunks on quiescent weights."""

    def __init__(self, session, keep_thr, sentences, vocab, retained_tokens: int,
                 settings: TrainSettings, counts, hooks=(), checkpoint=None,
                 start: Optional[Position] = None):
        s = self.settings = settings
        self.session = session
        self.layer = session.layer
        self.retained_tokens = retained_tokens
        self.counts = np.asarray(counts)
        self.plan = Plan.from_settings(s, keep_thr, s.epochs * retained_tokens, self.counts)
        health.warn_down_sampling(self.counts, self.keep_prob)
        # an epoch far worse than this untrained loss fails the run (semhuff.health)
        self.chance_loss = health.chance_loss(self.layer, self.counts, self.keep_prob)
        self.hooks = HookSchedule(list(self.layer.hooks()) + list(hooks))
        self.checkpoint = checkpoint
        self.start = start
        # a device that needs bigger chunks to keep busy asks for them (the GPU's sentence
        # form: a chunk is one launch, a block a sentence); the CPU takes the setting's
        self.chunk_words = max(s.chunk_words, int(getattr(session, "chunk_words", 0) or 0))
        self.epoch = start.epoch if start is not None else 0
        self.words_done = start.words_done if start is not None else 0
        use_cache = s.cache_ids and s.epochs - self.epoch >= 2  # the cache is read at least once
        if use_cache:
            check_space(cache_dir(s.tmp_dir), estimate_bytes(retained_tokens, self.chunk_words))
        self.source = EpochSource(sentences, vocab, self.chunk_words, use_cache=use_cache,
                                  cache_dir=s.tmp_dir)
        self.report = TrainReport.from_dict(start.report) if start is not None else TrainReport()
        self.seconds_before = self.report.seconds
        self.bar = None
        self.started = self.epoch_started = 0.0
        self.chunk_input_words = 0  # in-vocabulary words a chunk holds, about (set by execute)

    @property
    def keep_prob(self) -> np.ndarray:
        """The down-sampling keep probability by word id: made when asked (at the start, for
        hooks, at each epoch's end), not held through the run (V float64s)."""
        return self.plan.keep_thr.astype(np.float64) / 2.0 ** 32

    # -- hooks ------------------------------------------------------------------------------------
    def context(self, recent=()) -> HookContext:
        stats = self.report.epochs[-1] if self.report.epochs else EpochStats()
        s, session = self.settings, self.session
        session.to_host()
        return HookContext(epoch=self.epoch, epochs=s.epochs, words_done=self.words_done,
                           total_words=self.plan.schedule.total_words,
                           alpha=self.plan.schedule.at(self.words_done), counts=self.counts,
                           layer=self.layer, loss=stats.loss, predictions=stats.pairs,
                           recent_chunks=list(recent), keep_prob=self.keep_prob, sg=s.sg,
                           window=s.window, cbow_mean=s.cbow_mean,
                           chunk_words=self.chunk_input_words,
                           _vectors=lambda: session.syn0, _layer_changed=session.layer_changed)

    def call_hooks(self, method: str, hooks_due=None, recent=()) -> None:
        if not self.hooks.hooks:
            return
        started = time.perf_counter()
        self.hooks.call(method, self.context(recent), hooks_due)
        self.report.hook_seconds += time.perf_counter() - started
        self.report.hook_calls += 1

    # -- chunks -----------------------------------------------------------------------------------
    def fit_chunks(self, raw_tokens_per_epoch: int) -> None:
        """Smaller chunks where a hook asks for them (``Hook.max_chunk_words``, input words, read
        after ``on_train_begin``), so that its ``on_words`` runs every K words and not only at
        the boundaries of the default chunks (a self-organized layer's re-assignment on a small
        corpus). Set before the first chunk is read, for the whole call (the id cache keeps the
        first epoch's chunks); a checkpoint's resume asks the same hooks and gets the same chunks.
        Without such a hook nothing changes: the same chunks, seeds and speed."""
        asked = [int(h.max_chunk_words) for h in self.hooks.hooks if h.max_chunk_words]
        if not asked or min(asked) >= self.chunk_input_words:
            return
        s = self.settings
        words = max(1, min(self.chunk_words, min(asked) * max(raw_tokens_per_epoch, 1)
                           // max(self.retained_tokens, 1)))  # raw tokens, as chunk_words counts
        self.source.chunk_words = words
        self.chunk_input_words = max(1, round(words * self.retained_tokens
                                              / max(raw_tokens_per_epoch, 1)))
        logger.info("chunks of %s tokens (not %s) for this run: a hook runs every %s words",
                    f"{words:,}", f"{self.chunk_words:,}", f"{min(asked):,}")

    def jobs(self, epoch: int, words_before: int, skip: Optional[Position] = None):
        digest, number = 0, -1
        # chunks in memory: these, one a worker, one waiting for the first free worker
        # (``run_chunks``); each is 0.4 MB, and twice as many were 2 MiB of a large run's peak
        # for no speed
        chunks = prefetch(self.source.epoch(), self.session.concurrency)
        for number, chunk in enumerate(chunks):
            if skip is not None and number <= skip.chunk:
                if number == skip.chunk:
                    _check_resumed(skip, digest, words_before)
                else:  # trained before the checkpoint: only read (and cached)
                    digest = chunk_digest(chunk, digest)
                    words_before += len(chunk.ids)
                    continue
            yield Job(epoch, number, chunk, words_before, digest)
            if self.checkpoint is not None:  # only a checkpoint's resume checks it
                digest = chunk_digest(chunk, digest)
            words_before += len(chunk.ids)
        if skip is not None and number < skip.chunk:
            raise CheckpointError(f"the corpus ended after {number + 1} chunks of epoch "
                                  f"{epoch + 1}; the checkpoint was taken at chunk {skip.chunk}: "
                                  f"this is not the corpus it was trained on")

    def before_submit(self, job: Job, drain) -> None:
        due = self.hooks.due(job.words_before)
        if due:
            drain()
            self.call_hooks("on_words", due, self.hooks.take_recent())
        if self.checkpoint is not None and self.checkpoint.due():
            drain()
            self.session.to_host()
            self.report.seconds = self.seconds_before + time.perf_counter() - self.started
            self.checkpoint.write(Position(job.epoch, job.number, job.words_before,
                                           self.words_done, job.digest,
                                           time.perf_counter() - self.epoch_started,
                                           self.report.to_dict()))
        self.hooks.remember(job.chunk)

    def run_job(self, job: Job):
        return self.session.train_chunk(self.plan, job.chunk, job.words_before,
                                        mix_seed(self.settings.seed, job.epoch, job.number))

    def handle(self, job: Job, out) -> None:
        loss, pairs, trained = out
        s = self.settings
        if not math.isfinite(loss):
            raise TrainingDiverged(
                f"training diverged in epoch {job.epoch + 1}: the loss became {loss} "
                f"(learning rate {s.alpha} too high?); nothing was written")
        stats = self.report.epochs[job.epoch]
        stats.loss += loss
        stats.pairs += pairs
        stats.trained_words += trained
        stats.raw_words += job.chunk.raw_tokens
        record_chunk(self.report.chunks,
                     ChunkStats(job.epoch, job.number, job.chunk.raw_tokens, trained, pairs, loss,
                                self.seconds_before + time.perf_counter() - self.started))
        self.words_done += len(job.chunk.ids)
        self.bar.update(job.chunk.raw_tokens)
        self.bar.set_postfix_str(f"epoch {job.epoch + 1}/{s.epochs} loss "
                                 f"{stats.loss_per_pair:.4f}", refresh=False)

    # -- the run ----------------------------------------------------------------------------------
    def execute(self, raw_tokens_per_epoch: int) -> TrainReport:
        s, session, report, start = self.settings, self.session, self.report, self.start
        report.compile_seconds += session.warm_up(self.plan)
        if report.compile_seconds >= 0.05:
            logger.info("training kernel ready in %.2f s (compiled once per configuration, "
                        "then loaded from numba's cache)", report.compile_seconds)
        self.chunk_input_words = max(1, round(self.chunk_words * self.retained_tokens
                                              / max(raw_tokens_per_epoch, 1)))
        self.bar = _progress_bar(s.epochs * raw_tokens_per_epoch, s.progress)
        self.bar.update(report.raw_words)
        self.started = self.epoch_started = time.perf_counter()
        try:
            self.call_hooks("on_train_begin")
            self.fit_chunks(raw_tokens_per_epoch)
            if start is not None:
                self.hooks.resume(start.words_before)
            for epoch in range(self.epoch, s.epochs):
                self.epoch = epoch
                resumed = start is not None and epoch == start.epoch
                if not resumed:
                    report.epochs.append(EpochStats())
                self.call_hooks("on_epoch_begin")
                self.epoch_started = (time.perf_counter()
                                      - (start.epoch_seconds if resumed else 0.0))
                run_chunks(session, self.jobs(epoch, epoch * self.retained_tokens,
                                              start if resumed else None),
                           self.run_job, self.handle, session.concurrency + 1,
                           self.before_submit)
                stats = report.epochs[-1]
                stats.seconds = time.perf_counter() - self.epoch_started
                logger.info("epoch %d: %d raw words, loss per prediction %.4f", epoch + 1,
                            stats.raw_words, stats.loss_per_pair)
                health.check_epoch(stats.loss_per_pair, self.chance_loss, epoch, s.alpha,
                                   health.keep_share(self.counts, self.keep_prob))
                self.call_hooks("on_epoch_end")
            session.to_host()
            self.call_hooks("on_train_end")
        finally:
            report.seconds = self.seconds_before + time.perf_counter() - self.started
            report.id_cache_bytes = max(report.id_cache_bytes, self.source.cache_bytes)
            report.device_stats = dict(getattr(session, "stats", {}))
            self.bar.close()
            self.source.close()
        return report


def _check_resumed(at: Position, digest: int, words_before: int) -> None:
    """The chunks read before the checkpoint's must be the ones it trained."""
    if digest != at.digest or words_before != at.words_before:
        raise CheckpointError(
            f"the corpus differs from the one the checkpoint was trained on (its first "
            f"{at.chunk} chunks of epoch {at.epoch + 1} are not the same ids); resume with the "
            f"same corpus and vocabulary options")


def _progress_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, unit="w", unit_scale=True, desc="training", disable=not enabled,
                smoothing=0.1, dynamic_ncols=True)
