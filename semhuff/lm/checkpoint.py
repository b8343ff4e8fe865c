"""Checkpoints of a language-model run, for long runs (``semhuff-lm --checkpoint PATH
--checkpoint-steps STEPS --resume``).

A checkpoint holds everything a run needs to continue as if it had not stopped: the model's
``state_dict`` (the output layer's tree, clusters and extra state included), the optimizer's
state (Adagrad's sums), where the run is (``step``, ``epoch``, ``position`` in the batched
stream), the recurrent state carried into the next batch (detached), the random generators'
states (Python, NumPy, torch's CPU one and, when CUDA was used, each GPU's), the report so far,
the run's settings and a fingerprint of its data. Resuming on the CPU with one thread then
gives bit-identical weights to an uninterrupted run (``tests/test_lm_checkpoint.py``).

``load_checkpoint`` refuses, in one line, a checkpoint written with other settings (every
setting that changes the numbers; not ``IGNORED_SETTINGS``: progress bars, threads, how many
epochs to run, where to write) or for another corpus (``data_fingerprint``: the training ids,
the vocabulary's words and the held-out ids).

The file is written atomically (``io_utils.atomic_output``: a temp file renamed over the old
one) and fsync'ed before the rename, so a crash, a ``kill -9`` or Ctrl-C during a write leaves
the previous checkpoint whole.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import random
import zlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Optional

import numpy as np
import torch

from ..errors import ModelFileError, OptionError
from ..io_utils import atomic_output, describe_content
from .kernels.optimizer_state import regroup_state
from .networks import detach_state

logger = logging.getLogger(__name__)

FORMAT = "semhuff-lm-checkpoint"
VERSION = 1

# settings that do not change a run's numbers: a resumed run may change them
IGNORED_SETTINGS = frozenset({"progress", "threads", "epochs", "checkpoint", "checkpoint_every",
                              "checkpoint_steps", "resume", "quiet", "verbose", "output_model",
                              "report", "no_progress"})


class CheckpointMismatch(OptionError):
    """A checkpoint from other settings or another corpus: resuming it would not continue
    this run."""


@dataclass
class Checkpoint:
    step: int                       # optimizer steps done
    epoch: int                      # the epoch the next step belongs to (0-based)
    position: int                   # where the next batch starts in the batched stream
    report: Any                     # the report so far (a dict)
    settings: Dict[str, Any]        # as saved (comparable form)
    data_fingerprint: str
    rng_state: Dict[str, Any]
    model_state: Dict[str, Any]
    optimizer_state: Optional[Dict[str, Any]]
    state: Any = None               # the recurrent state carried into the next batch
    extra: Optional[Dict[str, Any]] = None


def check_checkpointing(checkpoint: Optional[str], steps, resume: bool) -> None:
    """A run's checkpoint settings, one line each: ``steps`` (between checkpoints within an
    epoch, 0: at epoch ends only) an integer >= 0; ``resume`` and ``steps`` need a file."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
        raise OptionError(f"--checkpoint-steps must be an integer >= 0, got {steps!r}")
    if (resume or steps) and not checkpoint:
        raise OptionError("--resume and --checkpoint-steps need --checkpoint PATH")


# -- what identifies a run ---------------------------------------------------------------------

def data_fingerprint(train_ids, vocab_words: Iterable[str], heldout_ids=None) -> str:
    """``"tokens:words:crc32 of the ids:crc32 of the words"`` (and the held-out ids' when given):
    another corpus, another vocabulary or another id order gives another fingerprint."""
    ids = np.ascontiguousarray(np.asarray(train_ids), dtype="<i8")
    words = list(vocab_words)
    text = "\n".join(words).encode("utf-8", "surrogatepass")
    parts = [str(ids.size), str(len(words)), f"{zlib.crc32(memoryview(ids).cast('B')):08x}",
             f"{zlib.crc32(text):08x}"]
    if heldout_ids is not None:
        held = np.ascontiguousarray(np.asarray(heldout_ids), dtype="<i8")
        parts.append(f"{zlib.crc32(memoryview(held).cast('B')):08x}")
    return ":".join(parts)


def comparable_settings(settings) -> Dict[str, Any]:
    """The settings (a dict or a dataclass such as ``LMSettings``) as plain JSON values, so a
    saved and a given setting compare equal when they mean the same (tuples as lists, objects
    by their repr)."""
    if dataclasses.is_dataclass(settings) and not isinstance(settings, type):
        settings = dataclasses.asdict(settings)
    if not isinstance(settings, dict):
        raise OptionError(f"settings must be a dict or a dataclass, got "
                          f"{type(settings).__name__}")
    return json.loads(json.dumps(settings, default=repr, sort_keys=True))


def settings_differences(saved: Dict[str, Any], given: Dict[str, Any],
                         ignore: Iterable[str] = IGNORED_SETTINGS) -> list:
    """``["name: A there, B here", ...]`` for every setting that changes the run and differs."""
    ignore = set(ignore)
    missing = object()
    out = []
    for name in sorted(set(saved) | set(given)):
        if name in ignore:
            continue
        a, b = saved.get(name, missing), given.get(name, missing)
        if a != b:
            show = (lambda v: "(not set)" if v is missing else repr(v))
            out.append(f"{name} {show(a)} there, {show(b)} here")
    return out


# -- random generators -------------------------------------------------------------------------

def capture_rng_state() -> Dict[str, Any]:
    """Python's, NumPy's and torch's generators (CPU; each GPU's when CUDA is in use)."""
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state(), "cuda": None}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: Dict[str, Any]) -> None:
    """The generators as ``capture_rng_state`` found them; the states are CPU byte tensors
    whatever device the checkpoint was loaded onto (``map_location``)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"].cpu())
    cuda = state.get("cuda")
    if cuda is not None:
        if not torch.cuda.is_available() or torch.cuda.device_count() < len(cuda):
            logger.warning("the checkpoint holds the random state of %d GPU(s), this machine "
                           "has %d: the GPU generators start afresh (no longer bit-identical)",
                           len(cuda), torch.cuda.device_count() if torch.cuda.is_available()
                           else 0)
        else:
            torch.cuda.set_rng_state_all([gpu.cpu() for gpu in cuda])


# -- writing and reading -----------------------------------------------------------------------

def _report_dict(report):
    if report is None or isinstance(report, dict):
        return report
    if hasattr(report, "to_dict"):
        return report.to_dict()
    if dataclasses.is_dataclass(report):
        return dataclasses.asdict(report)
    raise OptionError(f"report must be a dict, a dataclass or have to_dict(), got "
                      f"{type(report).__name__}")


def save_checkpoint(path, *, model: torch.nn.Module, optimizer: Optional[torch.optim.Optimizer],
                    step: int, epoch: int, position: int, rng_state: Optional[dict] = None,
                    settings, data_fingerprint: str, report=None, state=None,
                    extra: Optional[dict] = None) -> None:
    """Write a checkpoint to ``path`` atomically (temp file, fsync, rename, fsync of the
    folder). ``rng_state``: ``capture_rng_state()`` at the point to resume from (default: now);
    ``state``: the recurrent state the next batch starts from (saved detached); ``extra``: any
    picklable values the caller wants back."""
    for name, value in (("step", step), ("epoch", epoch), ("position", position)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise OptionError(f"{name} must be an integer >= 0, got {value!r}")
    payload = {"format": FORMAT, "version": VERSION, "step": int(step), "epoch": int(epoch),
               "position": int(position), "settings": comparable_settings(settings),
               "data_fingerprint": str(data_fingerprint),
               "rng_state": capture_rng_state() if rng_state is None else rng_state,
               "model_state": model.state_dict(),
               "optimizer_state": None if optimizer is None else optimizer.state_dict(),
               "state": detach_state(state), "report": _report_dict(report), "extra": extra}
    with atomic_output(path) as fh:
        torch.save(payload, fh)
        fh.flush()
        with contextlib.suppress(OSError):  # a FIFO or a stream cannot be synced
            os.fsync(fh.fileno())
    _sync_folder(path)


def _sync_folder(path) -> None:
    """Make the rename itself durable (a crash after it must not bring the old file back)."""
    folder = os.path.dirname(os.path.realpath(os.fspath(path))) or "."
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_checkpoint(path, map_location="cpu") -> dict:
    """The raw payload of a checkpoint file, or a one-line ``ModelFileError`` saying what the
    file is instead."""
    name = os.fspath(path)
    if not os.path.exists(name):
        raise ModelFileError(f"checkpoint not found: {name}")
    if os.path.isdir(name):
        raise ModelFileError(f"{name} is a directory, not a checkpoint")
    with open(name, "rb") as fh:
        head = fh.read(4)
    if head not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise ModelFileError(f"{name} is not a semhuff-lm checkpoint: it is "
                             f"{describe_content(name)}")
    try:
        # our own file format, which holds NumPy's generator state: not loadable with
        # weights_only=True; the format marker is checked before anything is used
        payload = torch.load(name, map_location=map_location, weights_only=False)
    except Exception as exc:  # a damaged zip / pickle: any of several error types
        first = (str(exc).splitlines() or [""])[0][:120]
        raise ModelFileError(f"{name}: a damaged or incomplete checkpoint "
                             f"({type(exc).__name__}: {first})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        what = ("a semhuff-lm model (semhuff-lm score / sample take it)"
                if isinstance(payload, dict) and "state_dict" in payload else "another file")
        raise ModelFileError(f"{name} is not a semhuff-lm checkpoint: it is {what}")
    if payload.get("version", 0) > VERSION:
        raise ModelFileError(f"{name} is a checkpoint of a newer semhuff (format version "
                             f"{payload['version']}, this one reads {VERSION})")
    return payload


def _describe_fingerprint(fp: str) -> str:
    parts = fp.split(":")
    if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
        return f"{int(parts[0]):,} training tokens, {int(parts[1]):,} words"
    return fp


def load_checkpoint(path, *, settings, data_fingerprint: str,
                    model: Optional[torch.nn.Module] = None,
                    optimizer: Optional[torch.optim.Optimizer] = None,
                    restore_rng: bool = True, ignore: Iterable[str] = IGNORED_SETTINGS,
                    map_location="cpu",
                    upgrade: Optional[Callable[[dict], dict]] = None) -> Checkpoint:
    """Read a checkpoint written for this run: the same ``settings`` (but ``ignore``) and the
    same ``data_fingerprint``, else a one-line ``CheckpointMismatch``. Loads the model's and
    the optimizer's states into ``model`` / ``optimizer`` when given (build them as the run
    did first) and, with ``restore_rng``, sets the random generators as they were. Returns the
    ``Checkpoint`` (step, epoch, position, the carried state, the report so far). ``upgrade``:
    the saved settings in today's names (a checkpoint written by an earlier version)."""
    name = os.fspath(path)
    payload = read_checkpoint(name, map_location)
    given = comparable_settings(settings)
    saved = payload["settings"] if upgrade is None else comparable_settings(
        upgrade(payload["settings"]))
    differences = settings_differences(saved, given, ignore)
    if differences:
        shown = "; ".join(differences[:4]) + ("; ..." if len(differences) > 4 else "")
        raise CheckpointMismatch(f"checkpoint {name} was written with other settings ({shown}): "
                                 f"resume with its settings, or start afresh without --resume")
    if payload["data_fingerprint"] != str(data_fingerprint):
        there, here = (_describe_fingerprint(payload["data_fingerprint"]),
                       _describe_fingerprint(str(data_fingerprint)))
        same_training = payload["data_fingerprint"].split(":")[:4] == \
            str(data_fingerprint).split(":")[:4]
        detail = (f"{there} there, {here} here" if there != here
                  else "the same training text, another held-out text" if same_training
                  else "the same sizes, other tokens or words")
        raise CheckpointMismatch(f"checkpoint {name} was written for another corpus ({detail}): "
                                 f"resume on the same data, or start afresh without --resume")
    if model is not None:
        try:
            model.load_state_dict(payload["model_state"])
        except (RuntimeError, KeyError, ValueError) as exc:
            raise ModelFileError(f"checkpoint {name} does not fit this model: "
                                 f"{str(exc).splitlines()[0][:160]}") from None
    if optimizer is not None:
        if payload["optimizer_state"] is None:
            raise ModelFileError(f"checkpoint {name} holds no optimizer state")
        try:
            optimizer.load_state_dict(regroup_state(payload["optimizer_state"], optimizer,
                                                    model) if model is not None
                                      else payload["optimizer_state"])
        except (RuntimeError, KeyError, ValueError) as exc:
            raise ModelFileError(f"checkpoint {name}'s optimizer state does not fit this "
                                 f"optimizer: {str(exc).splitlines()[0][:160]}") from None
    if restore_rng:
        restore_rng_state(payload["rng_state"])
    return Checkpoint(payload["step"], payload["epoch"], payload["position"], payload["report"],
                      payload["settings"], payload["data_fingerprint"], payload["rng_state"],
                      payload["model_state"], payload["optimizer_state"], payload["state"],
                      payload.get("extra"))
