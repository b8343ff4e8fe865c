"""A ``semhuff-lm`` training run (``LMTrainingRun``; ``train_lm`` makes one and runs it): any
network of ``networks`` over any output layer, the layer asked only for what it can do (its
``after_step``, a ``retree`` where ``--retree-every`` asks for one), never named.

A step: the network's forward on a window of ``bptt`` columns, the recurrent state carried in
from the previous window (detached); the output layer's forward and backward apart, on the
network's detached output (to time it), then the network's backward from the gradient the layer
left; the gradient's norm clipped, Adagrad's step, the layer's ``after_step`` (a self-organized
layer re-assigns its words there). An epoch ends with the held-out perplexity (``evaluation``),
a checkpoint when asked for (``checkpoint``) and ``on_epoch(report)``. A non-finite loss, weight
or perplexity stops the run (``TrainingDiverged``). Under ``torchrun`` each process trains its
rows of the batch (``parallel``).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from typing import Callable, NamedTuple, Optional, Tuple

import numpy as np
import torch

from ..errors import OptionError, TrainingDiverged
from . import _moved
from .checkpoint import (IGNORED_SETTINGS, check_checkpointing, data_fingerprint,
                         load_checkpoint, save_checkpoint)
from .evaluation import evaluate
from .kernels.optimizer_state import check_optimizer, clip_grad_norm, trainer_optimizer
from .models import build_model
from .networks import LanguageModel, detach_state, map_state
from .parallel import all_reduce_sum, data_parallel, gather_rows, process_group, rows_of
from .report import LMEpoch, LMReport
from .settings import LMSettings, autocast, resolve_device
from .token_ids import LMData, batchify

logger = logging.getLogger(__name__)

READ_LOSS_EVERY = 50  # steps between read-backs of the training loss (one sync each)


def window_starts(columns: int, bptt: int) -> range:
    """Where each training step's window starts along rows of ``columns`` ids (``batchify``'s
    width): one optimizer step each, an epoch's steps."""
    return range(0, columns - 1, bptt)


class EpochSums(NamedTuple):
    """An epoch's running sums: the training loss (summed over tokens), the tokens, the output
    layer's seconds and the epoch's seconds (a checkpoint holds them as a plain tuple)."""
    loss: float = 0.0
    tokens: int = 0
    output_seconds: float = 0.0
    seconds: float = 0.0


def read_loss(loss_sum: float, pending: torch.Tensor, epoch: int, lr: float):
    """(loss_sum + the losses summed on the device since the last read, a fresh zero): the
    training loss is read back every ``READ_LOSS_EVERY`` steps, not every step (a read-back
    waits for the device); a non-finite sum is ``TrainingDiverged``."""
    value = float(pending)
    if not math.isfinite(value):
        raise TrainingDiverged(f"training diverged in epoch {epoch + 1}: the loss became "
                               f"{value} (learning rate {lr} too high?); nothing was written")
    return loss_sum + value, torch.zeros_like(pending)


def resumed_sums(extra: Optional[dict], position: int, batch_size: int, rank: int
                 ) -> Optional[EpochSums]:
    """This rank's start of an unfinished epoch's running sums from a checkpoint's ``extra``
    (None at an epoch's start). The checkpoint holds the whole batch's loss and tokens, whatever
    process count wrote it: rank 0 resumes with them, every other rank from zero (the epoch's
    end adds the ranks' sums up); the seconds go to every rank (averaged there). An older
    checkpoint holds the writing rank's share (``sums``): scaled to the whole batch's tokens,
    ``batch_size x position`` (every window before a mid-epoch checkpoint is whole)."""
    extra = extra or {}
    totals = extra.get("totals")
    if totals is None and extra.get("sums") is not None:
        loss, tokens, output_s, elapsed = extra["sums"]
        whole = batch_size * position
        totals = (loss if tokens in (0, whole) else loss * whole / tokens, whole, output_s,
                  elapsed)
    if totals is None:
        return None
    loss, tokens, output_s, elapsed = totals
    return EpochSums(loss, int(tokens), output_s, elapsed) if rank == 0 else \
        EpochSums(0.0, 0, output_s, elapsed)


def retree_from_embeddings(model: LanguageModel, vocab, optimizer, seed: int) -> dict:
    """The output layer's ``retree`` over a SemHuff tree whose similarity is the network's own
    input embeddings (cosine top-k neighbours), the rows carried over word by word; every rank
    builds the same tree from the same weights. Returns the report's entry."""
    from ..trees.spec import resolve_tree
    started = time.perf_counter()
    vectors = model.embedding.weight.detach().float().cpu().numpy()
    tree = resolve_tree("semhuff", vocab, similarity=(list(vocab.words), vectors), seed=seed)
    old = model.output.tree
    model.output.retree(tree, vocab.counts, optimizer)
    same = float(np.mean(old.parent == tree.parent))
    seconds = time.perf_counter() - started
    logger.info("re-built the tree from the network's input embeddings (SemHuff, %.1f s; %.1f%% "
                "of the nodes' parents unchanged)", seconds, 100 * same)
    return {"retree": "semhuff from the input embeddings", "seconds": seconds,
            "parents_unchanged": same}


class LMTrainingRun:
    """One training run of a fresh model on ``data`` (``run()`` -> (model, report)).
    ``checkpoint``: a file written (atomically) every ``checkpoint_steps`` steps (0: never
    mid-epoch) and at each epoch's end; ``resume``: continue from it (the same settings and
    data, else a one-line ``CheckpointMismatch``); on the CPU with one thread the resumed run's
    numbers are those of an uninterrupted one. Under ``torchrun`` rank 0 writes the one file
    (the whole batch's recurrent state gathered from the ranks), and any number of processes
    whose rows split the batch resumes from it. ``on_epoch(report)`` after each epoch."""

    def __init__(self, data: LMData, settings: LMSettings, *, checkpoint: Optional[str] = None,
                 checkpoint_steps: int = 0, resume: bool = False,
                 on_epoch: Optional[Callable[[LMReport], None]] = None):
        s = self.settings = settings
        s.check()
        check_checkpointing(checkpoint, checkpoint_steps, resume)
        self.data, self.on_epoch = data, on_epoch
        self.checkpoint, self.checkpoint_steps = checkpoint, checkpoint_steps
        self.device, self.world, self.rank = self._join_processes()
        if s.threads:
            torch.set_num_threads(s.threads)
        # the sparse gradients are torch's own (embedding, the tree layers'): no per-step checks
        torch.sparse.check_sparse_tensor_invariants.disable()
        self.model = build_model(data.vocab, s).to(self.device)
        self.layer = self.model.output
        self.network, self.output_layer = (data_parallel(self.model, self.device)
                                           if self.world > 1 else
                                           (self.model.hidden, self.layer))
        self.optimizer = trainer_optimizer(self.model, s.lr, self.device)
        check_optimizer(self.optimizer, self.model)  # gradients Adagrad cannot take: one line
        # fp16 needs its loss scaled (bf16 has fp32's range)
        self.scaler = torch.amp.GradScaler(self.device.type) if s.precision == "fp16" else None
        self.rows = self._training_rows()
        self.steps = window_starts(self.rows.shape[1], s.bptt)
        self.fingerprint = data_fingerprint(data.train, data.vocab.words, data.heldout) \
            if checkpoint else None
        # where the run starts: afresh, or where the checkpoint left it
        self.epoch, self.position, self.step = 0, 0, 0
        self.carried, self.sums = None, None  # the first epoch's recurrent state and sums
        self.resumed_at: Optional[Tuple[int, int]] = None  # (step in the epoch, epoch), 1-based
        self.report = self._resume() if resume else self._fresh_report()

    # -- the start ---------------------------------------------------------------------------
    def _join_processes(self):
        """(device, world size, rank): under ``torchrun`` each rank its own GPU, and the batch
        must split over the ranks."""
        s = self.settings
        device = resolve_device(s.device)
        world, rank = process_group(device)
        if world > 1:
            if device.type == "cuda" and device.index is None:
                device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
            if s.batch_size % world:
                raise OptionError(f"batch size {s.batch_size} does not split over {world} "
                                  f"processes: give a multiple of {world}")
        return device, world, rank

    def _training_rows(self) -> torch.Tensor:
        """The training ids in ``batch_size`` rows on the device; each rank its rows of the
        batch (the same columns: the same steps)."""
        s = self.settings
        rows = torch.as_tensor(batchify(self.data.train, s.batch_size)).to(self.device)
        if self.world > 1:
            share = s.batch_size // self.world
            rows = rows[self.rank * share:(self.rank + 1) * share]
        return rows

    def _fresh_report(self) -> LMReport:
        s = self.settings
        report = LMReport(dataclasses.asdict(s), self.layer.describe(), len(self.data.vocab),
                          len(self.data.train), evaluate(self.model, self.data.heldout,
                                                         s.eval_batch, s.bptt, s.precision))
        logger.info("%s; untrained held-out perplexity %.1f", self.layer.describe(),
                    report.untrained.perplexity)
        return report

    def _resume(self) -> LMReport:
        s = self.settings
        saved = load_checkpoint(self.checkpoint, settings=s, data_fingerprint=self.fingerprint,
                                model=self.model, optimizer=self.optimizer,
                                map_location=self.device, ignore=IGNORED_SETTINGS | {"device"},
                                upgrade=_settings_in_todays_names)
        report = LMReport.from_dict(saved.report)
        report.settings = dataclasses.asdict(s)
        self.epoch, self.position, self.step = saved.epoch, saved.position, saved.step
        self.carried = map_state(saved.state, lambda x: x.to(self.device))
        if self.world > 1:  # the checkpoint holds the whole batch's state: this rank's rows
            self.carried = rows_of(self.carried, self.rank, self.world)
        self.sums = resumed_sums(saved.extra, saved.position, s.batch_size, self.rank)
        self.resumed_at = (saved.position // s.bptt, saved.epoch + 1)
        logger.info("resumed %s at step %d of epoch %d (step %d of the run)", self.checkpoint,
                    *self.resumed_at, self.step)
        return report

    # -- the run -----------------------------------------------------------------------------
    def run(self) -> Tuple[LanguageModel, LMReport]:
        try:
            for epoch in range(self.epoch, self.settings.epochs):
                self.epoch = epoch
                self.end_epoch(self.train_epoch())
        except BaseException as exc:
            # Ctrl-C, SIGTERM (semhuff.cli's Terminated): the checkpoint on disk is whole
            # (written atomically); say where it is
            if not isinstance(exc, Exception) and self.checkpoint and \
                    os.path.exists(self.checkpoint):
                logger.warning("interrupted: the last checkpoint is kept in %s (--resume "
                               "continues from it)", self.checkpoint)
            raise
        return self.model, self.report

    def train_epoch(self) -> EpochSums:
        """The epoch's steps from ``position`` on (a resumed epoch's rest); its sums."""
        from tqdm.auto import tqdm
        s, epoch = self.settings, self.epoch
        self.model.train()
        state = self.carried
        loss_sum, tokens, output_seconds, before = self.sums or EpochSums()
        self.carried, self.sums = None, None
        started = time.perf_counter() - before
        pending = torch.zeros((), dtype=torch.float64, device=self.device)  # summed there
        todo = [t for t in self.steps if t >= self.position]
        self.position = 0
        last_column = self.rows.shape[1] - 1
        bar = tqdm(total=len(self.steps) * s.batch_size * s.bptt, unit="tok", unit_scale=True,
                   desc=f"epoch {epoch + 1}/{s.epochs}", disable=not s.progress or self.rank,
                   leave=False, dynamic_ncols=True, initial=tokens)
        try:
            for t in todo:
                y = self.rows[:, t + 1:t + 1 + s.bptt]
                x = self.rows[:, t:t + s.bptt][:, :y.shape[1]]
                loss, state, seconds = self.train_step(x, y, state)
                output_seconds += seconds
                n = y.numel()
                pending = pending + loss.detach().double() * n
                tokens += n
                bar.update(n)
                to_save = self.checkpoint_steps and self.step % self.checkpoint_steps == 0 and \
                    t + s.bptt < last_column
                if self.step % READ_LOSS_EVERY == 0 or to_save or t == todo[-1]:
                    loss_sum, pending = read_loss(loss_sum, pending, epoch, s.lr)
                    bar.set_postfix_str(f"loss {loss_sum / tokens:.3f}", refresh=False)
                if to_save:
                    self.save(epoch, t + s.bptt, detach_state(state),
                              EpochSums(loss_sum, tokens, output_seconds,
                                        time.perf_counter() - started))
        finally:
            bar.close()
        return EpochSums(loss_sum, tokens, output_seconds, time.perf_counter() - started)

    def train_step(self, x: torch.Tensor, y: torch.Tensor, state):
        """One optimizer step on window ``x`` -> ``y``: (the loss, a tensor; the recurrent
        state out; the output layer's forward + backward seconds)."""
        s, device, scaler, optimizer = self.settings, self.device, self.scaler, self.optimizer
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, s.precision):
            out, state = self.network(x, detach_state(state))
        # the output layer apart: its forward and backward on the detached output
        h = out.detach().requires_grad_()
        layer_started = time.perf_counter()
        with autocast(device, s.precision):
            loss = self.output_layer(h, y).loss
        (loss if scaler is None else scaler.scale(loss)).backward()
        seconds = time.perf_counter() - layer_started
        out.backward(h.grad)
        if scaler is not None:
            scaler.unscale_(optimizer)
        clip_grad_norm(self.model.parameters(), s.clip)
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        self.step += 1
        info = self.layer.after_step(optimizer)
        if info is not None:
            self.report.reassignments.append({"epoch": self.epoch, **info})
        return loss, state, seconds

    def end_epoch(self, sums: EpochSums) -> None:
        """The whole batch's sums, the held-out perplexity, the report's epoch; a re-built tree
        when one is due; the epoch's checkpoint; ``on_epoch``."""
        s, epoch = self.settings, self.epoch
        loss_sum, tokens, output_seconds, seconds = sums
        if self.world > 1:  # the whole batch's loss and tokens; the slowest rank's time
            loss_sum, tokens, output_seconds = all_reduce_sum(
                [loss_sum, tokens, output_seconds / self.world], self.device)
            tokens = int(tokens)
        heldout = evaluate(self.model, self.data.heldout, s.eval_batch, s.bptt, s.precision)
        finite = all(bool(torch.isfinite(p.detach()).all()) for p in self.model.parameters())
        if not (finite and math.isfinite(heldout.perplexity)):
            raise TrainingDiverged(f"training diverged in epoch {epoch + 1}: the "
                                   f"{'weights' if not finite else 'held-out perplexity'} "
                                   f"became non-finite (learning rate {s.lr} too high?); "
                                   f"nothing was written")
        self.report.epochs.append(LMEpoch(loss_sum / tokens, seconds, tokens, output_seconds,
                                          heldout))
        logger.info("epoch %d: train loss %.4f, held-out perplexity %.2f, %.0f tokens/s",
                    epoch + 1, loss_sum / tokens, heldout.perplexity, tokens / seconds)
        if s.retree_every and (epoch + 1) % s.retree_every == 0 and epoch + 1 < s.epochs:
            self.report.reassignments.append(
                {"epoch": epoch, **retree_from_embeddings(self.model, self.data.vocab,
                                                          self.optimizer, s.seed)})
        if self.checkpoint:
            self.save(epoch + 1, 0, None, None)
        if self.on_epoch is not None:
            self.on_epoch(self.report)

    def save(self, epoch: int, position: int, state, sums: Optional[EpochSums]) -> None:
        """The checkpoint: under ``torchrun`` one file, written by rank 0 with the whole
        batch's state and sums (``resumed_sums`` shares them), for any number of processes to
        resume."""
        if self.world > 1:
            state = gather_rows(state, self.world)
            if sums is not None:
                loss, count, output_s = all_reduce_sum(
                    [sums.loss, sums.tokens, sums.output_seconds / self.world], self.device)
                sums = EpochSums(loss, int(round(count)), output_s, sums.seconds)
            if self.rank:
                return
        save_checkpoint(self.checkpoint, model=self.model, optimizer=self.optimizer,
                        step=self.step, epoch=epoch, position=position, settings=self.settings,
                        data_fingerprint=self.fingerprint, report=self.report, state=state,
                        extra={"totals": None if sums is None else tuple(sums)})


def _settings_in_todays_names(saved: dict) -> dict:
    """A checkpoint's settings as this version's ``LMSettings`` holds them."""
    return dataclasses.asdict(LMSettings.from_saved(saved))


def train_lm(data: LMData, settings: LMSettings, on_epoch=None, checkpoint: Optional[str] = None,
             checkpoint_steps: int = 0, resume: bool = False, **former
             ) -> Tuple[LanguageModel, LMReport]:
    """Train a fresh model on ``data``: ``LMTrainingRun(...).run()``, (model, report).
    ``former``: ``checkpoint_every``, the former name of ``checkpoint_steps``."""
    checkpoint_steps = _moved.renamed_keyword("train_lm", former, "checkpoint_every",
                                              "checkpoint_steps", checkpoint_steps)
    return LMTrainingRun(data, settings, checkpoint=checkpoint, checkpoint_steps=checkpoint_steps,
                         resume=resume, on_epoch=on_epoch).run()


__getattr__ = _moved.moved_names(__name__)  # the names that moved out (load_model, ...)
