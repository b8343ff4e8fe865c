"""semhuff-train's options for long runs: where the id cache goes (``--tmp-dir``,
``--no-id-cache``), checkpoints (``--checkpoint``, ``--checkpoint-every``) and ``--resume``.

``--resume CKPT`` continues the killed run that wrote CKPT: re-run the same command with it
added. Everything that shapes the model or the training comes from the checkpoint; an option
given with another value than the checkpoint's is an error (a continuation with other settings
would not be the run that was killed). Only ``--workers`` may change (more than one thread gives
up the bit-identical continuation), and ``--tmp-dir`` / ``--no-id-cache``, which are about
this machine.
"""
from __future__ import annotations

import argparse
import dataclasses

from semhuff import checkpoint
from semhuff.distributed.rounds import COMBINES
from semhuff.errors import OptionError
from semhuff.io_utils import check_writable
from semhuff.model import Word2Vec

from .common import checkpoint_note
from .resume import APPLIED, KEPT, conflicting_options


# training settings a resumed run must keep (--workers may change)
_SAME = {dest: (f"--{dest.replace('_', '-')}", "its training settings",
                (lambda attr: lambda m: getattr(m, attr))(attr))
         for dest, attr in APPLIED.items() if dest not in ("workers",)}


def add_scale_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("long runs")
    g.add_argument("--tmp-dir", metavar="DIR",
                   help="folder for the first epoch's id cache (4 bytes a token; an unnamed file "
                        "freed when the run ends, however it ends); default: TMPDIR or /tmp")
    g.add_argument("--no-id-cache", action="store_true",
                   help="do not cache the first epoch's ids: every epoch re-reads the corpus")
    g.add_argument("--checkpoint", metavar="PATH",
                   help="write everything needed to continue the run to PATH (atomically) every "
                        "--checkpoint-every minutes and at the end; --resume PATH continues it")
    g.add_argument("--checkpoint-every", type=float, default=30.0, metavar="MINUTES",
                   help="minutes between checkpoints (0: at every chunk of ~100k words)")
    g.add_argument("--dask", metavar="ADDRESS",
                   help="train on a Dask cluster: its scheduler's address (tcp://host:8786), or "
                        "local:N for N worker processes on this machine; the corpus must be "
                        "files every worker can read (a shared file system or fsspec URLs); "
                        "--workers is then the threads of each worker (default: its --nthreads)")
    g.add_argument("--round-words", type=int, metavar="N",
                   help="--dask: words each worker trains between two combinations of the "
                        "weights (shorter: closer to one machine's quality, more overhead; "
                        "default: 1,000,000, or fewer so that a run has 10 rounds at least: a "
                        "run of one or two rounds gives near-random vectors)")
    g.add_argument("--combine", choices=COMBINES, default="adaptive",
                   help="--dask: how the workers' weights are combined: adaptive (the sum of the "
                        "changes for rows that moved little, the mean for rows that saturated), "
                        "weighted (the mean weighted by each worker's updates), mean, or sum "
                        "(docs/scaling.md)")
    g.add_argument("--resume", metavar="PATH",
                   help="continue the run that wrote checkpoint PATH (give the same corpus and "
                        "options; with --workers 1 the result is bit-identical to an "
                        "uninterrupted run)")


def check_scale_options(args, given: set) -> None:
    if args.checkpoint_every < 0:
        raise OptionError(f"--checkpoint-every must be >= 0 minutes, got {args.checkpoint_every}")
    if "checkpoint_every" in given and not args.checkpoint:
        raise OptionError("--checkpoint-every needs --checkpoint PATH")
    if args.checkpoint:
        check_writable(args.checkpoint)
    if not args.dask and given & {"round_words", "combine"}:
        raise OptionError("--round-words and --combine are options of --dask")
    if args.resume and args.init_model:
        raise OptionError("--resume continues the run of a checkpoint, --init-model starts a new "
                          "run from a model: give one of them")


def dask_training(args, given: set):
    """What ``Word2Vec(dask=...)`` gets from --dask and its options (None: no Dask)."""
    if not args.dask:
        return None
    from semhuff.distributed import DaskTraining
    return DaskTraining(args.dask, round_words=args.round_words, combine=args.combine,
                        threads=args.workers if "workers" in given else None)


def report_extra(report) -> dict:
    """What --report adds for a Dask run: the workers and every round's timings."""
    d = getattr(report, "dask", None)
    if d is None:
        return {}
    return {"dask": {**dataclasses.asdict(d), "overhead_seconds": d.overhead_seconds}}


def train_kwargs(args) -> dict:
    """What ``Word2Vec.train`` takes from these options."""
    return {"checkpoint": args.checkpoint, "checkpoint_every": args.checkpoint_every}


def checkpoint_kept(args, started: float) -> str:
    """What the line after Ctrl-C / SIGTERM says of the checkpoint: the one kept and the
    ``--resume`` that continues it; ``started``: the run's start (``time.time()``)."""
    path = args.checkpoint or args.resume
    return checkpoint_note(path, started, f"the same command and --resume {path}",
                           f"after --checkpoint-every {args.checkpoint_every:g} minutes")


def resumed_from(path: str, state: dict) -> str:
    """The summary's line for a ``--resume`` run: where the checkpoint's run stood."""
    epochs = state["call"]["epochs"]
    if state.get("complete"):
        return f"resumed: {path} holds a finished run; nothing more was trained"
    if "dask" in state:
        shards = state["dask"]["shards"].values()
        done, total = sum(p["words_done"] for p in shards), sum(p["total"] for p in shards)
        return (f"resumed: from {path}, on Dask, after {done:,} of {total:,} words "
                f"({len(state['dask']['rounds'])} rounds) trained before it stopped")
    position = state["position"]
    return (f"resumed: from {path} in epoch {position['epoch'] + 1} of {epochs}, after "
            f"{position['words_done']:,} words trained before it stopped")


def resume_run(args, given: set, corpus, progress: bool):
    """The model of ``--resume``, trained to the end of its run, and the summary's line saying
    where it resumed."""
    model, state = checkpoint.load(args.resume, Word2Vec, progress)
    conflicts = conflicting_options(model, args, given, {**KEPT, **_SAME})
    epochs = state["call"]["epochs"]
    if "epochs" in given and args.epochs != epochs:
        conflicts.append(f"--epochs {args.epochs} (the run has {epochs})")
    if conflicts:
        raise OptionError(f"--resume {args.resume} continues its run as it was and cannot "
                          f"change: {'; '.join(conflicts)}")
    settings = {"tmp_dir": args.tmp_dir, "cache_ids": not args.no_id_cache,
                "dask": dask_training(args, given)}
    if "workers" in given:
        settings["workers"] = args.workers
    line = resumed_from(args.resume, state)
    return checkpoint.resume(args.resume, corpus, model=model, state=state, **settings,
                             **train_kwargs(args)), line
