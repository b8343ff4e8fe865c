"""The training loop: one producer thread turns the corpus into chunks of ids, ``workers``
threads run the output layer's nogil kernel on them (Hogwild: shared weights, no locks), and
the calling thread collects results and drives the progress bar.

Reproducibility: every chunk's random stream is seeded from (seed, epoch, chunk number), never
from the thread that runs it, so ``workers=1`` with a seed is bit-for-bit reproducible.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np

from .encode import DEFAULT_CHUNK_WORDS, EpochSource
from .kernels.common import mix_seed

logger = logging.getLogger(__name__)


@dataclass
class TrainSettings:
    sg: bool = True
    window: int = 5
    alpha: float = 0.025
    min_alpha: float = 0.0001
    epochs: int = 5
    workers: int = 1
    seed: int = 1
    chunk_words: int = DEFAULT_CHUNK_WORDS
    cache_ids: bool = True
    progress: bool = True


@dataclass
class EpochStats:
    raw_words: int = 0       # tokens read, out-of-vocabulary included
    trained_words: int = 0   # after down-sampling
    pairs: int = 0           # (context, centre) predictions (skip-gram) or centre words (CBOW)
    loss: float = 0.0        # summed negative log-likelihood, nats (float64)

    @property
    def loss_per_pair(self) -> float:
        return self.loss / self.pairs if self.pairs else float("nan")


@dataclass
class TrainReport:
    seconds: float = 0.0
    compile_seconds: float = 0.0  # first use of a kernel on this machine; not in ``seconds``
    epochs: List[EpochStats] = field(default_factory=list)

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
        losses = ", ".join(losses)
        compiled = (f" (+{self.compile_seconds:.1f} s compiling the kernel, once per machine)"
                    if self.compile_seconds >= 0.05 else "")
        return (f"{len(self.epochs)} epochs, {self.raw_words:,} raw words "
                f"({self.trained_words:,} after down-sampling) in {self.seconds:.1f} s = "
                f"{self.words_per_second:,.0f} words/s{compiled}; loss per prediction by epoch: {losses}")


class _Job:
    __slots__ = ("epoch", "number", "chunk", "words_before")

    def __init__(self, epoch, number, chunk, words_before):
        self.epoch, self.number, self.chunk, self.words_before = epoch, number, chunk, words_before


def train(syn0: np.ndarray, layer, keep_thr: np.ndarray, sentences, index, retained_tokens: int,
          raw_tokens_per_epoch: int, settings: TrainSettings, model=None) -> TrainReport:
    """Train ``syn0`` and ``layer.weights`` in place over ``settings.epochs`` passes."""
    s = settings
    total_words = max(1, s.epochs * retained_tokens)
    source = EpochSource(sentences, index, s.chunk_words, use_cache=s.cache_ids)
    jobs: "queue.Queue[Optional[_Job]]" = queue.Queue(maxsize=2 * s.workers)
    results: "queue.Queue" = queue.Queue()
    stop = threading.Event()
    compile_seconds = compile_kernel(layer, s.sg, syn0.shape[1], keep_thr, syn0)

    def work():
        while True:
            job = jobs.get()
            if job is None:
                return
            if stop.is_set():
                results.put((job, None))
                continue
            try:
                seed = np.uint64(mix_seed(s.seed, job.epoch, job.number))
                out = layer.train_chunk(s.sg, job.chunk.ids, job.chunk.bounds, syn0, keep_thr,
                                        s.window, s.alpha, s.min_alpha, job.words_before,
                                        total_words, seed)
                results.put((job, out))
            except BaseException as exc:  # handed to the main thread, which re-raises it
                results.put((job, exc))

    workers = [threading.Thread(target=work, name=f"semhuff-worker-{i}", daemon=True)
               for i in range(s.workers)]
    for t in workers:
        t.start()

    report = TrainReport(compile_seconds=compile_seconds)
    bar = _progress_bar(s.epochs * raw_tokens_per_epoch, s.progress)
    started = time.perf_counter()
    try:
        for epoch in range(s.epochs):
            stats = EpochStats()
            report.epochs.append(stats)
            produced = _Counter()
            producer_error: List[BaseException] = []
            producer = threading.Thread(
                target=_produce, name="semhuff-reader",
                args=(source, epoch, epoch * retained_tokens, jobs, stop, produced, producer_error),
                daemon=True)
            producer.start()
            finished = 0
            while True:
                try:
                    job, out = results.get(timeout=0.2)
                except queue.Empty:
                    if producer_error:
                        raise producer_error[0]
                    if produced.done and finished == produced.count:
                        break
                    continue
                finished += 1
                if isinstance(out, BaseException):
                    raise out
                if out is None:
                    continue
                loss, pairs, trained = out
                stats.loss += loss
                stats.pairs += pairs
                stats.trained_words += trained
                stats.raw_words += job.chunk.raw_tokens
                bar.update(job.chunk.raw_tokens)
                bar.set_postfix_str(f"epoch {epoch + 1}/{s.epochs} loss {stats.loss_per_pair:.4f}",
                                    refresh=False)
                if produced.done and finished == produced.count:
                    break
            producer.join()
            if producer_error:
                raise producer_error[0]
            logger.info("epoch %d: %d raw words, loss per prediction %.4f", epoch + 1,
                        stats.raw_words, stats.loss_per_pair)
            layer.end_epoch(model, epoch)
    except BaseException:
        stop.set()
        raise
    finally:
        report.seconds = time.perf_counter() - started
        _drain(jobs)
        for _ in workers:
            jobs.put(None)
        for t in workers:
            t.join()
        bar.close()
        source.close()
    return report


class _Counter:
    def __init__(self):
        self.count = 0
        self.done = False


def _produce(source, epoch, words_before, jobs, stop, produced, errors):
    try:
        for number, chunk in enumerate(source.epoch()):
            if stop.is_set():
                return
            jobs.put(_Job(epoch, number, chunk, words_before))
            produced.count += 1
            words_before += len(chunk.ids)
    except BaseException as exc:
        errors.append(exc)
    finally:
        produced.done = True


def _drain(q):
    try:
        while True:
            q.get_nowait()
    except queue.Empty:
        pass


def compile_kernel(layer, sg: bool, dim: int, keep_thr: np.ndarray, syn0: np.ndarray) -> float:
    """Compile (or load from numba's disk cache) the kernel before the clock starts, and say how
    long it took, so the one-time cost stays visible. The warm-up call runs on the real arrays
    with a learning rate of 0, so it changes nothing."""
    fn = layer.kernel(sg, dim)
    if fn.signatures:
        return 0.0
    t0 = time.perf_counter()
    layer.train_chunk(sg, np.zeros(2, np.int32), np.array([2], np.int64), syn0, keep_thr, 1,
                      0.0, 0.0, 0, 1, np.uint64(1))
    seconds = time.perf_counter() - t0
    logger.info("training kernel for dim %d ready in %.2f s (compiled once per machine, then "
                "loaded from numba's cache)", dim, seconds)
    return seconds


def _progress_bar(total: int, enabled: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, unit="w", unit_scale=True, desc="training", disable=not enabled,
                smoothing=0.1, dynamic_ncols=True)
