"""Checkpoints: a killed ``train()`` call continues where it stopped.

A checkpoint is a normal model file (``Word2Vec.load`` reads it: the weights, the output layer's
whole state, the vocabulary, the settings, the number of finished ``train()`` calls, which sets
the seed) plus one more entry, ``checkpoint``: what the call was (epochs, words per epoch, the
corpus files) and where it stands (``trainer.Position``: epoch, next chunk, words done, the
digest of the chunks already trained, the report so far). It is written at a chunk boundary
with nothing in flight, every ``checkpoint_every`` minutes, to a temp file beside the target
that is flushed to disk and renamed over it: a kill at any moment leaves the previous checkpoint
or the new one, never a broken file. When the call ends a last checkpoint marks it complete.

The call's record holds a fingerprint of the *whole* corpus, checked before a resume trains or
returns anything: for files, each file's size and CRC-32 of all its bytes (as stored; it streams
at about a GB/s, once per process); for a re-iterable of sentences, their count, the tokens and
a CRC-32 of the text (one pass). A prefix of the corpus, an edited or an unrelated one is refused
with one line, also when the checkpoint is complete. (Decision: the bytes rather than the
vocabulary counts, which ``max_vocab_size`` pruning or ``set_vocab`` make no fingerprint of the
text; the same text at another path or on another machine resumes.) A one-shot iterator cannot
be fingerprinted ahead: only the chunks before the checkpoint are checked for it.

Resuming loads the model, re-reads the epoch in progress (the first-epoch id cache of the killed
run is gone with it, so it is rebuilt from the corpus, the chunks already trained only read),
checks that those chunks are the same ids, and trains the rest. The random streams are pure
functions of (seed, epoch, chunk number) and the hooks' next boundaries are functions of the
words done, so with ``workers=1`` the vectors at the end are bit-identical to an uninterrupted
run's. Hooks see ``on_train_begin`` and ``on_epoch_begin`` again in the resumed process.
"""
from __future__ import annotations

import json
import logging
import os
import time
import zlib
from typing import Optional

import numpy as np

from .corpus import Corpus, _open_raw, as_corpus, is_one_shot, is_url
from .errors import CheckpointError, ModelFileError, OptionError
from .io_utils import atomic_output, check_writable, open_npz
from .trainer import Position, TrainReport

logger = logging.getLogger(__name__)

CHECKPOINT_VERSION = 1
KEY = "checkpoint"


class Checkpointer:
    """Writes ``model`` and the position to ``path`` when ``due()`` (every ``every_minutes``;
    0: at every chunk boundary)."""

    def __init__(self, model, path, every_minutes: float, corpus, epochs: int,
                 words_per_epoch: Optional[int], epoch_words: Optional[tuple] = None):
        if not (isinstance(every_minutes, (int, float)) and every_minutes >= 0):
            raise OptionError(f"checkpoint_every must be >= 0 minutes, got {every_minutes!r}")
        self.model = model
        self.path = os.fspath(path)
        check_writable(self.path)
        self.every = float(every_minutes) * 60.0
        self.call = {"epochs": int(epochs), "words_per_epoch": words_per_epoch,
                     "corpus": list(corpus.files) if isinstance(corpus, Corpus) else None,
                     "checkpoint_every": float(every_minutes),
                     # the schedule's (in-vocabulary, raw) words an epoch: a resume uses them
                     "epoch_words": None if epoch_words is None else [int(w) for w in epoch_words],
                     "fingerprint": corpus_fingerprint(corpus)}
        self.last = time.monotonic()
        self.written = 0

    def due(self) -> bool:
        return time.monotonic() - self.last >= self.every

    def write(self, position, key: str = "position") -> None:
        """``position``: a ``trainer.Position``, or (``key="dask"``) the dict of a Dask run."""
        started = time.perf_counter()
        self._write({key: position if isinstance(position, dict) else position.to_dict()})
        self.last = time.monotonic()
        logger.info("checkpoint %s (%.2f s)", self.path, time.perf_counter() - started)

    def finish(self, report) -> None:
        """The call has ended: the checkpoint holds the finished model and its report."""
        self._write({"complete": True, "report": report.to_dict()})

    def _write(self, state: dict) -> None:
        arrays = self.model._arrays()
        arrays[KEY] = np.array(json.dumps({"version": CHECKPOINT_VERSION, "call": self.call,
                                           **state}))
        with atomic_output(self.path) as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())  # on disk before the rename makes it the checkpoint
        self.written += 1


_FILE_CRCS: dict = {}  # (path, size, mtime, inode) -> CRC-32: each file is read once a process
_CRC_BLOCK = 1 << 22


def _file_crc(path: str) -> int:
    key = None
    if not is_url(path):
        st = os.stat(path)
        key = (os.path.abspath(path), st.st_size, st.st_mtime_ns, st.st_ino)
        if key in _FILE_CRCS:
            return _FILE_CRCS[key]
    crc = 0
    with _open_raw(path) as fh:
        while True:
            block = fh.read(_CRC_BLOCK)
            if not block:
                break
            crc = zlib.crc32(block, crc)
    if key is not None:
        _FILE_CRCS[key] = crc
    return crc


def _file_size(path: str) -> int:
    if is_url(path):
        import fsspec
        fs, inner = fsspec.core.url_to_fs(path)
        return int(fs.size(inner))
    return os.path.getsize(path)


def corpus_fingerprint(corpus) -> Optional[dict]:
    """What identifies the whole of ``corpus``: [size, CRC-32] of each file (as stored), or
    for a re-iterable of token lists (sentences, tokens, CRC-32 of the text); None for a
    one-shot iterator (it cannot be read twice)."""
    started = time.perf_counter()
    if isinstance(corpus, Corpus):
        out = {"files": [[_file_size(f), _file_crc(f)] for f in corpus.files]}
    elif is_one_shot(corpus):
        return None
    else:
        crc = sentences = tokens = 0
        for sentence in corpus:
            crc = zlib.crc32((" ".join(sentence) + "\n").encode("utf-8", "surrogatepass"), crc)
            sentences += 1
            tokens += len(sentence)
        out = {"sentences": sentences, "tokens": tokens, "crc32": crc}
    logger.info("corpus fingerprint in %.2f s", time.perf_counter() - started)
    return out


def check_corpus(path, call: dict, sentences, max_sentence_length: int) -> None:
    """A ``CheckpointError`` (one line) unless ``sentences`` is the whole corpus the
    checkpoint's call trained on."""
    recorded = call.get("fingerprint")
    if recorded is None:  # a one-shot iterator's run: its trained chunks are checked later
        return
    corpus = as_corpus(sentences, max_sentence_length)
    if is_one_shot(corpus):
        logger.warning("resuming %s on a one-shot iterator: only the chunks trained before the "
                       "checkpoint can be checked against the corpus it was trained on", path)
        return
    mine = corpus_fingerprint(corpus)
    if mine == recorded:
        return
    why = "it is another corpus"
    if "files" in recorded and mine is not None and "files" in mine:
        theirs, ours = recorded["files"], mine["files"]
        if len(ours) != len(theirs):
            why = f"it has {len(ours)} files, the checkpoint's run read {len(theirs)}"
        else:
            i = next(i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b)
            name = corpus.files[i]
            if ours[i][0] != theirs[i][0]:
                part = " (a part of it?)" if ours[i][0] < theirs[i][0] else ""
                why = (f"{name} has {ours[i][0]:,} bytes where the checkpoint's run read "
                       f"{theirs[i][0]:,}{part}")
            else:
                why = f"{name} has other content than the checkpoint's run read (same size)"
    elif "tokens" in recorded and mine is not None and "tokens" in mine:
        if (mine["sentences"], mine["tokens"]) != (recorded["sentences"], recorded["tokens"]):
            why = (f"it has {mine['sentences']:,} sentences and {mine['tokens']:,} tokens where "
                   f"the checkpoint's run read {recorded['sentences']:,} and "
                   f"{recorded['tokens']:,}")
        else:
            why = "its text differs from the checkpoint's run's (same length)"
    raise CheckpointError(f"the corpus differs from the one checkpoint {path} was trained on: "
                          f"{why}; resume with the same corpus (nothing was trained or written)")


def read_state(path) -> dict:
    """The ``checkpoint`` entry of a checkpoint file."""
    try:
        with open_npz(path, "semhuff checkpoint") as data:  # our message, not numpy's
            if KEY not in data.files:
                raise CheckpointError(f"{path} is a model file, not a checkpoint (--init-model "
                                      f"continues training a model)")
            state = json.loads(str(data[KEY]))
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"not a semhuff checkpoint: {path} ({exc})") from None
    if state.get("version") != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: checkpoint version {state.get('version')!r} is not "
                              f"{CHECKPOINT_VERSION}")
    return state


def load(path, model_class, progress: bool = True):
    """(model, state) of a checkpoint file; ``model_class``: ``Word2Vec`` (a checkpoint is a
    model file), given so that this module needs nothing of the model's."""
    state = read_state(path)
    return model_class.load(path, progress=progress), state


_SAME = object()


def resume(path, sentences=None, *, model, state: dict, checkpoint=_SAME,
           checkpoint_every: Optional[float] = None, **settings):
    """Continue the ``train()`` call of checkpoint ``path`` on ``sentences`` (default: the files
    it was training on) and return the model. Checkpoints go on being written to ``path``
    every as many minutes as before, unless ``checkpoint`` (a path, or None: no more) and
    ``checkpoint_every`` say otherwise. ``settings``: model attributes for this
    process (``workers``, ``tmp_dir``, ``cache_ids``, ``hooks``; more workers than one give up
    the bit-identical continuation). A checkpoint marked complete is returned as it is.
    ``model``, ``state``: what ``load(path, ...)`` gave."""
    for name, value in settings.items():
        if not hasattr(model, name):
            raise OptionError(f"resume() takes no setting {name!r}")
        setattr(model, name, value)
    call = state["call"]
    if state.get("complete"):
        if sentences is not None:  # a finished run's result is its corpus's: the same one?
            check_corpus(path, call, sentences, model.max_sentence_length)
        logger.info("checkpoint %s: its training call had finished; nothing to resume", path)
        model.reports.append(TrainReport.from_dict(state["report"]))
        return model
    if sentences is None:
        if call["corpus"] is None:
            raise CheckpointError(f"{path} was training on an iterable of sentences: pass the "
                                  f"same sentences to resume it")
        sentences = call["corpus"]
    check_corpus(path, call, sentences, model.max_sentence_length)
    if "dask" in state:
        if getattr(model, "dask", None) is None:
            raise CheckpointError(f"{path} was written by a run on Dask: resume it on Dask "
                                  f"(--dask, Word2Vec.resume(..., dask=...)) with as many workers")
        position = state["dask"]
    else:
        if getattr(model, "dask", None) is not None:
            raise CheckpointError(f"{path} was written by a run on one machine: resume it "
                                  f"without Dask")
        position = Position(**state["position"])
    checkpoint = path if checkpoint is _SAME else checkpoint
    if checkpoint_every is None:
        checkpoint_every = call["checkpoint_every"]
    logger.info("resuming %s", path)
    epoch_words = call.get("epoch_words")
    if epoch_words is None and call["words_per_epoch"] is None:
        # a checkpoint from before it was recorded: its schedule was the vocabulary's corpus
        epoch_words = (model.vocab.retained_tokens, model.vocab.total_tokens)
    model.train(sentences, epochs=call["epochs"], words_per_epoch=call["words_per_epoch"],
                checkpoint=checkpoint, checkpoint_every=checkpoint_every, _resume=position,
                _epoch_words=None if epoch_words is None else tuple(epoch_words))
    return model
