"""Training and scoring an LSTM language model with any ``semhuff.lm`` output layer: the
self-organized HSM paper's recipe (Shen et al. §4) as defaults where they fit a CPU run:

* one-layer LSTM; Adagrad, learning rate 0.1; the gradient's norm clipped to 0.25;
* truncated back-propagation through 20 steps, the hidden state carried across batches
  (detached);
* the output layer's ``after_step`` after every step: a self-organizing layer re-assigns its
  words every K steps (the paper: K = 1000) and says what moved;
* held-out perplexity over the whole held-out text, the hidden state carried (batches of
  ``eval_batch`` rows), exact (each layer's own normalised log-probability of the targets).

What a run reports (``LMReport``): per epoch the training loss, the held-out perplexity (and
for clustered layers the cluster and in-cluster perplexity, eqs. 5-6), tokens/s of whole steps,
the seconds the output layer's forward + backward took (measured apart: the LSTM's output is
detached at the layer, the layer's backward runs first, then the LSTM's from the gradient it
left), and the re-assignments. A non-finite loss stops the run (``TrainingDiverged``).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
import torch

from ..errors import OptionError, TrainingDiverged
from ..io_utils import atomic_output
from .token_ids import LMData, batchify
from .networks import LSTMLanguageModel, check_lm_network_settings, lm_network_class, \
    network_options
from .kernels.optimizer_state import check_optimizer, clip_grad_norm, trainer_optimizer
from .layers.registry import TRAINER_DEFAULTS, check_lm_layer_settings, layer_options, \
    lm_layer_class, make_output_layer

# LMSettings fields that are output-layer options (given: passed to the layer, which must take them)
LAYER_FIELDS = ("tree", "similarity", "clusters", "clustering")

logger = logging.getLogger(__name__)


@dataclass
class LMSettings:
    output: str = "tree"           # make_output_layer's name (LM_LAYERS)
    # output-layer options, as fields for convenience (None: the layer's default); any other
    # option of the layer goes in layer_options
    tree: Optional[str] = None     # tree layer: a builder's name, a tree file, a Tree
    similarity: Optional[str] = None
    clusters: Optional[int] = None
    clustering: Optional[str] = None
    layer_options: dict = field(default_factory=dict)
    emb: int = 256
    hidden: int = 256
    cell: str = "lstm"             # the network (LM_NETWORKS); "gru": the p-tHSM poster's
    network_options: dict = field(default_factory=dict)  # the network's own (its OPTIONS)
    dropout: float = 0.0
    batch_size: int = 32
    bptt: int = 20
    epochs: int = 1
    lr: float = 0.1
    clip: float = 0.25
    eval_batch: int = 10
    threads: Optional[int] = None
    seed: int = 1
    retree_every: int = 0          # tree layer: every this many epochs, a SemHuff tree from the
    # network's own input embeddings replaces the tree (``retree``); 0: never
    device: str = "cpu"            # cpu, cuda, cuda:N: the model, the batches, the evaluation
    precision: str = "fp32"        # fp32, bf16, fp16 (CUDA only): torch.autocast
    progress: bool = True

    def check(self) -> None:
        for name in ("emb", "hidden", "batch_size", "bptt", "epochs", "eval_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise OptionError(f"{name} must be an integer >= 1, got {value!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise OptionError(f"lr must be > 0, got {self.lr!r}")
        if not (math.isfinite(self.clip) and self.clip > 0):
            raise OptionError(f"clip must be > 0, got {self.clip!r}")
        check_lm_network_settings(self.cell, self.network_options)
        self._check_window()
        if not 0 <= self.dropout < 1:
            raise OptionError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.threads is not None and self.threads < 1:
            raise OptionError(f"threads must be >= 1, got {self.threads!r}")
        check_lm_layer_settings(self.output, self.layer_settings())
        loss_api = sorted(k for k in ("ignore_index", "reduction") if k in self.layer_options)
        if loss_api:  # the trainer's loss is the mean over every token; they would change it
            raise OptionError(f"{', '.join(loss_api)}: for your own training loops "
                              f"(make_output_layer); semhuff-lm trains on every token's mean loss")
        if isinstance(self.retree_every, bool) or not isinstance(self.retree_every, int) \
                or self.retree_every < 0:
            raise OptionError(f"retree_every must be an integer >= 0, got {self.retree_every!r}")
        if self.retree_every and self.output != "tree":
            raise OptionError("--retree-every re-builds a tree layer's tree: it needs --loss "
                              "tree")
        if self.precision not in PRECISIONS:
            raise OptionError(f"precision must be one of {', '.join(PRECISIONS)}, got "
                              f"{self.precision!r}")
        device = resolve_device(self.device)
        if self.precision == "fp16" and device.type != "cuda":
            raise OptionError("precision fp16 needs a CUDA device (--device cuda); on the CPU "
                              "use bf16 or fp32")

    def _check_window(self) -> None:
        """A network with a longest window (``max_len``: the Transformer's learned positions)
        must take the bptt windows: refused here, before any data is read."""
        declared = {o.name: o for o in network_options(lm_network_class(self.cell))}
        if "max_len" in declared:
            max_len = self.network_options.get("max_len", declared["max_len"].default)
            if max_len is not None and self.bptt > max_len:
                raise OptionError(f"bptt {self.bptt} is longer than the {self.cell} network's "
                                  f"max_len {max_len}: lower --bptt or raise --max-len")

    def layer_settings(self) -> dict:
        """The output layer's settings: on the CPU the trainer's defaults for it
        (``register_lm_layer``'s ``trainer_defaults``), the option fields given, then
        ``layer_options``."""
        given = {name: getattr(self, name) for name in LAYER_FIELDS
                 if getattr(self, name) is not None}
        on_cpu = str(self.device).split(":")[0] == "cpu"  # checked (one line) in check()
        defaults = TRAINER_DEFAULTS.get(self.output, {}) if on_cpu else {}
        return {**defaults, **given, **self.layer_options}


@dataclass
class HeldOut:
    perplexity: float
    nll: float                                   # mean, nats
    tokens: int
    cluster_perplexity: Optional[float] = None   # clustered layers: exp(mean -log P(c(w)|h))
    in_cluster_perplexity: Optional[float] = None


@dataclass
class LMEpoch:
    train_loss: float
    seconds: float
    tokens: int
    output_seconds: float       # the output layer's forward + backward
    heldout: HeldOut

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")


@dataclass
class LMReport:
    settings: dict
    layer: str
    vocab_size: int
    train_tokens: int
    untrained: HeldOut
    epochs: List[LMEpoch] = field(default_factory=list)
    reassignments: List[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def summary(self) -> str:
        last = self.epochs[-1]
        h = last.heldout
        clusters = (f" (cluster {h.cluster_perplexity:,.2f}, in-cluster "
                    f"{h.in_cluster_perplexity:,.2f})" if h.cluster_perplexity else "")
        return (f"held-out perplexity {h.perplexity:,.2f}{clusters} after {len(self.epochs)} "
                f"epoch(s) (untrained {self.untrained.perplexity:,.1f}); "
                f"{last.tokens_per_second:,.0f} tokens/s, output layer "
                f"{1e3 * last.output_seconds / max(last.tokens, 1) * 1e3:.1f} ms per 1k tokens")


PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda`` or ``cuda:N`` as a torch device; a CUDA device this machine lacks is a
    one-line ``OptionError``."""
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise OptionError(f"device must be cpu, cuda or cuda:N, got {name!r}") from None
    if device.type not in ("cpu", "cuda"):
        raise OptionError(f"device must be cpu, cuda or cuda:N, got {name!r}")
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = 0 if device.index is None else device.index
        if index >= count:
            raise OptionError(f"device {name}: this machine has "
                              f"{'no CUDA device' if not count else f'{count} CUDA device(s)'} "
                              f"(torch {torch.__version__}); use --device cpu")
    return device


def autocast(device: torch.device, precision: str):
    """``torch.autocast`` for ``precision`` (fp32: disabled)."""
    dtype = PRECISIONS[precision]
    return torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


def process_group(device: torch.device):
    """(world size, rank) of a ``torchrun`` launch (``WORLD_SIZE`` > 1: the process group is
    started, gloo on the CPU, NCCL on CUDA), else (1, 0)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world < 2:
        return 1, 0
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return dist.get_world_size(), dist.get_rank()


def _all_reduce_sum(values, device) -> list:
    """``values`` (floats) summed over the ranks (float64)."""
    import torch.distributed as dist
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return t.tolist()


class _Network(torch.nn.Module):
    """The network below the output layer (``model.hidden``) as a module DDP can wrap."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids, state):
        return self.model.hidden(ids, state)


def data_parallel(model: torch.nn.Module, device: torch.device):
    """(network, output layer) wrapped in ``DistributedDataParallel``: the trainer runs them
    apart (the output layer on the network's detached output, to time it), so each is its own
    DDP module, the network's ignoring the output layer's parameters. Gradients are averaged
    over the ranks during backward (sparse ones too: the layers' rows are ``nn.Embedding``s);
    buffers are not broadcast (the self-organized statistic is each rank's own until
    ``reduce_statistic`` before a re-assignment); DDP looks for parameters a step left unused
    only in a layer whose ``uses_every_parameter`` is False (an adaptive softmax's tail cluster
    no target fell in; the search costs a graph traversal a step)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    ids = [device.index] if device.type == "cuda" else None
    network = _Network(model)
    skip = [f"model.output.{name}" for name, _ in model.output.named_parameters()] + \
        [f"model.output.{name}" for name, _ in model.output.named_buffers()]
    DDP._set_params_and_buffers_to_ignore_for_model(network, skip)
    return (DDP(network, device_ids=ids, broadcast_buffers=False),
            DDP(model.output, device_ids=ids, broadcast_buffers=False,
                find_unused_parameters=not getattr(model.output, "uses_every_parameter",
                                                   False)))


def window_starts(columns: int, bptt: int) -> range:
    """Where each training step's window starts along rows of ``columns`` ids (``batchify``'s
    width): one optimizer step each, an epoch's steps."""
    return range(0, columns - 1, bptt)


READ_LOSS_EVERY = 50  # steps between read-backs of the training loss (one sync each)


def read_loss(loss_sum: float, pending: torch.Tensor, epoch: int, lr: float):
    """(loss_sum + the losses summed on the device since the last read, a fresh zero): the
    training loss is read back every ``READ_LOSS_EVERY`` steps, not every step (a read-back
    waits for the device); a non-finite sum is ``TrainingDiverged``."""
    value = float(pending)
    if not math.isfinite(value):
        raise TrainingDiverged(f"training diverged in epoch {epoch + 1}: the loss became "
                               f"{value} (learning rate {lr} too high?); nothing was written")
    return loss_sum + value, torch.zeros_like(pending)


def retree(model: torch.nn.Module, data: LMData, optimizer, seed: int) -> dict:
    """Replace the tree layer's tree by a SemHuff tree whose similarity is the network's own
    input embeddings (cosine top-k neighbours), the rows carried over word by word
    (``TreeSoftmax.retree``); every rank builds the same tree from the same weights."""
    from ..trees.spec import resolve_tree
    started = time.perf_counter()
    vectors = model.embedding.weight.detach().float().cpu().numpy()
    tree = resolve_tree("semhuff", data.vocab, similarity=(list(data.vocab.words), vectors),
                        seed=seed)
    old = model.output.tree
    model.output.retree(tree, data.vocab.counts, optimizer)
    same = float(np.mean(old.parent == tree.parent))
    seconds = time.perf_counter() - started
    logger.info("re-built the tree from the network's input embeddings (SemHuff, %.1f s; %.1f%% "
                "of the nodes' parents unchanged)", seconds, 100 * same)
    return {"retree": "semhuff from the input embeddings", "seconds": seconds,
            "parents_unchanged": same}


def build_model(data: LMData, s: LMSettings) -> LSTMLanguageModel:
    """The network ``s.cell`` over the output layer ``s.output``, both by name."""
    torch.manual_seed(s.seed)
    layer = make_output_layer(s.output, s.hidden, data.vocab, seed=s.seed, **s.layer_settings())
    return lm_network_class(s.cell)(len(data.vocab), layer, emb=s.emb, hidden=s.hidden,
                                    dropout=s.dropout, **s.network_options)


def _state_map(state, fn):
    """``fn`` applied to the recurrent state's tensors: (h, c) for an LSTM, h for a GRU, None
    for a network that carries none."""
    if state is None or isinstance(state, torch.Tensor):
        return None if state is None else fn(state)
    return tuple(fn(x) for x in state)


def _detach(state):
    """The recurrent state cut from the graph."""
    return _state_map(state, torch.Tensor.detach)


def _to(state, device):
    return _state_map(state, lambda x: x.to(device))


def _gather_rows(state, world: int):
    """The whole batch's recurrent state from the ranks' rows (a collective: every rank calls
    it; the batch is dimension 1, torch's RNN state layout)."""
    import torch.distributed as dist

    def gather(x):
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=1)
    return _state_map(state, gather)


def _rows_of(state, rank: int, world: int):
    """This rank's rows of the whole batch's recurrent state."""
    return _state_map(state, lambda x: x.chunk(world, dim=1)[rank].contiguous())


def resumed_sums(extra: Optional[dict], position: int, batch_size: int, rank: int):
    """This rank's start of an unfinished epoch's running sums (training loss, tokens, output
    layer's seconds, seconds) from a checkpoint's ``extra`` (None at an epoch's start). The
    checkpoint holds the whole batch's loss and tokens, whatever process count wrote it: rank 0
    resumes with them, every other rank from zero (the epoch's end adds the ranks' sums up);
    the seconds go to every rank (averaged there). A checkpoint from before issue 46 holds the
    writing rank's share ("sums"): scaled to the whole batch's tokens, ``batch_size x
    position`` (every window before a mid-epoch checkpoint is whole)."""
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
    return (loss, int(tokens), output_s, elapsed) if rank == 0 else (0.0, 0, output_s, elapsed)


def _model_device(model) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


@torch.no_grad()
def evaluate(model: LSTMLanguageModel, ids: np.ndarray, batch: int = 10, bptt: int = 20,
             precision: str = "fp32") -> HeldOut:
    """Exact held-out perplexity of ``ids`` (the hidden state carried along each row), on the
    model's device; ``precision``: the autocast the run trained under. A text shorter than
    ``batch`` windows (``bptt + 1`` tokens each) is read in fewer rows, none shorter than a
    window: a sentence is one row, every word after the first scored with all the words before
    it (cut into ``batch`` rows it would lose half its words, the rows' first ones)."""
    was_training = model.training
    model.eval()
    device = _model_device(model)
    rows = min(batch, max(1, len(ids) // (bptt + 1)))
    data = torch.as_tensor(batchify(ids, rows)).to(device)
    world, rank = (torch.distributed.get_world_size(), torch.distributed.get_rank()) \
        if torch.distributed.is_available() and torch.distributed.is_initialized() else (1, 0)
    if world > 1:  # each rank scores its rows; the sums are added up below
        data = data[rank::world]
    # summed on the device, read back once at the end
    nll = cluster_nll = torch.zeros((), dtype=torch.float64, device=device)
    count = 0
    clustered = None
    state = None
    for t in range(0, data.shape[1] - 1 if len(data) else 0, bptt):
        x, y = data[:, t:t + bptt], data[:, t + 1:t + 1 + bptt]
        x = x[:, :y.shape[1]]
        with autocast(device, precision):
            out, state = model.hidden(x, state)
            h = out.reshape(-1, out.shape[-1])
            target = y.reshape(-1)
            scored = model.output(h, target).output
            part = model.output.cluster_log_prob(h, target)
        nll = nll - scored.double().sum()
        clustered = part is not None
        if clustered:
            cluster_nll = cluster_nll - part.double().sum()
        count += target.numel()
    model.train(was_training)
    nll, cluster_nll = float(nll), float(cluster_nll)
    if world > 1:
        nll, cluster_nll, count, any_clustered = _all_reduce_sum(
            [nll, cluster_nll, count, float(bool(clustered))], device)
        count, clustered = int(count), any_clustered > 0
    mean = nll / count
    result = HeldOut(_exp(mean), mean, count)
    if clustered:
        result.cluster_perplexity = _exp(cluster_nll / count)
        result.in_cluster_perplexity = _exp((nll - cluster_nll) / count)
    return result


def _exp(x: float) -> float:
    return math.exp(x) if x < 700 else math.inf


def _report_from_dict(d: dict) -> LMReport:
    """An ``LMReport`` from its ``to_dict()`` (a checkpoint's report so far)."""
    epochs = [LMEpoch(**{**e, "heldout": HeldOut(**e["heldout"])}) for e in d["epochs"]]
    return LMReport(d["settings"], d["layer"], d["vocab_size"], d["train_tokens"],
                    HeldOut(**d["untrained"]), epochs, list(d["reassignments"]))


def train_lm(data: LMData, settings: LMSettings, on_epoch=None, checkpoint: Optional[str] = None,
             checkpoint_every: int = 0, resume: bool = False
             ) -> "tuple[LSTMLanguageModel, LMReport]":
    """Train a fresh model on ``data``; returns (model, report). ``on_epoch(report)`` after
    each epoch (e.g. to save). ``checkpoint``: a file written (atomically) every
    ``checkpoint_every`` steps (0: never mid-epoch) and at each epoch's end, with everything
    needed to continue; ``resume``: continue from it (the same settings and data, else a
    one-line ``CheckpointMismatch``); on the CPU with one thread the resumed run's numbers are
    those of an uninterrupted one. Under ``torchrun`` rank 0 writes the one file (the whole
    batch's recurrent state gathered from the ranks), and any number of processes whose rows
    split the batch resumes from it (each takes its rows; a self-organized statistic not yet
    reduced resumes as rank 0's)."""
    from .checkpoint import IGNORED_SETTINGS, data_fingerprint, load_checkpoint, save_checkpoint
    s = settings
    s.check()
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or \
            checkpoint_every < 0:
        raise OptionError(f"checkpoint_every must be an integer >= 0, got {checkpoint_every!r}")
    if (resume or checkpoint_every) and not checkpoint:
        raise OptionError("--resume and --checkpoint-every need --checkpoint PATH")
    device = resolve_device(s.device)
    world, rank = process_group(device)
    if world > 1:
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
        if s.batch_size % world:
            raise OptionError(f"batch size {s.batch_size} does not split over {world} "
                              f"processes: give a multiple of {world}")
    if s.threads:
        torch.set_num_threads(s.threads)
    # the sparse gradients are torch's own (embedding, the tree layers'): no per-step checks
    torch.sparse.check_sparse_tensor_invariants.disable()
    model = build_model(data, s).to(device)
    layer = model.output
    network, output_layer = (data_parallel(model, device) if world > 1
                             else (model.hidden, layer))
    optimizer = trainer_optimizer(model, s.lr, device)
    check_optimizer(optimizer, model)  # a plugin layer's gradients Adagrad cannot take: one line
    # fp16 needs its loss scaled (bf16 has fp32's range)
    scaler = torch.amp.GradScaler(device.type) if s.precision == "fp16" else None
    train = torch.as_tensor(batchify(data.train, s.batch_size)).to(device)
    if world > 1:  # each rank its rows of the batch (the same columns: the same steps)
        rows = s.batch_size // world
        train = train[rank * rows:(rank + 1) * rows]
    fingerprint = data_fingerprint(data.train, data.vocab.words, data.heldout) \
        if checkpoint else None
    # where the run starts: afresh, or where the checkpoint left it
    start_epoch, position, step, carried, sums = 0, 0, 0, None, None
    if resume:
        saved = load_checkpoint(checkpoint, settings=s, data_fingerprint=fingerprint,
                                model=model, optimizer=optimizer, map_location=device,
                                ignore=IGNORED_SETTINGS | {"device"})
        report = _report_from_dict(saved.report)
        report.settings = dataclasses.asdict(s)
        start_epoch, position, step = saved.epoch, saved.position, saved.step
        carried = _to(saved.state, device)
        if world > 1:  # the checkpoint holds the whole batch's state: this rank's rows
            carried = _rows_of(carried, rank, world)
        sums = resumed_sums(saved.extra, saved.position, s.batch_size, rank)
        logger.info("resumed %s at step %d (epoch %d, position %d)", checkpoint, step,
                    start_epoch + 1, position)
    else:
        report = LMReport(dataclasses.asdict(s), layer.describe(), len(data.vocab),
                          len(data.train), evaluate(model, data.heldout, s.eval_batch, s.bptt,
                                                    s.precision))
        logger.info("%s; untrained held-out perplexity %.1f", layer.describe(),
                    report.untrained.perplexity)

    def save(epoch, at, state, running):
        if world > 1:  # one file, written by rank 0, for any number of processes to resume
            state = _gather_rows(state, world)
            if running is not None:  # the whole batch's sums (``resumed_sums`` shares them)
                loss, count, output_s = _all_reduce_sum([running[0], running[1],
                                                         running[2] / world], device)
                running = (loss, int(round(count)), output_s, running[3])
            if rank:
                return
        save_checkpoint(checkpoint, model=model, optimizer=optimizer, step=step, epoch=epoch,
                        position=at, settings=s, data_fingerprint=fingerprint, report=report,
                        state=state, extra={"totals": running})

    steps = window_starts(train.shape[1], s.bptt)
    from tqdm.auto import tqdm
    try:
        for epoch in range(start_epoch, s.epochs):
            model.train()
            state = carried
            loss_sum, tokens, output_seconds, before = sums or (0.0, 0, 0.0, 0.0)
            carried, sums = None, None
            started = time.perf_counter() - before
            pending = torch.zeros((), dtype=torch.float64, device=device)  # summed on the device
            todo = [t for t in steps if t >= position]
            position = 0
            bar = tqdm(total=len(steps) * s.batch_size * s.bptt, unit="tok", unit_scale=True,
                       desc=f"epoch {epoch + 1}/{s.epochs}", disable=not s.progress or rank,
                       leave=False, dynamic_ncols=True, initial=tokens)
            try:
                for t in todo:
                    x, y = train[:, t:t + s.bptt], train[:, t + 1:t + 1 + s.bptt]
                    x = x[:, :y.shape[1]]
                    optimizer.zero_grad(set_to_none=True)
                    with autocast(device, s.precision):
                        out, state = network(x, _detach(state))
                    # the output layer apart: its forward and backward on the detached output
                    h = out.detach().requires_grad_()
                    layer_started = time.perf_counter()
                    with autocast(device, s.precision):
                        loss = output_layer(h, y).loss
                    (loss if scaler is None else scaler.scale(loss)).backward()
                    output_seconds += time.perf_counter() - layer_started
                    out.backward(h.grad)
                    if scaler is not None:
                        scaler.unscale_(optimizer)
                    clip_grad_norm(model.parameters(), s.clip)
                    if scaler is None:
                        optimizer.step()
                    else:
                        scaler.step(optimizer)
                        scaler.update()
                    step += 1
                    info = layer.after_step(optimizer)
                    if info is not None:
                        report.reassignments.append({"epoch": epoch, **info})
                    n = y.numel()
                    pending = pending + loss.detach().double() * n
                    tokens += n
                    bar.update(n)
                    to_save = checkpoint_every and step % checkpoint_every == 0 and \
                        t + s.bptt < train.shape[1] - 1
                    if step % READ_LOSS_EVERY == 0 or to_save or t == todo[-1]:
                        loss_sum, pending = read_loss(loss_sum, pending, epoch, s.lr)
                        bar.set_postfix_str(f"loss {loss_sum / tokens:.3f}", refresh=False)
                    if to_save:
                        save(epoch, t + s.bptt, _detach(state),
                             (loss_sum, tokens, output_seconds,
                              time.perf_counter() - started))
            finally:
                bar.close()
            seconds = time.perf_counter() - started
            if world > 1:  # the whole batch's loss and tokens; the slowest rank's time
                loss_sum, tokens, output_seconds = _all_reduce_sum(
                    [loss_sum, tokens, output_seconds / world], device)
                tokens = int(tokens)
            heldout = evaluate(model, data.heldout, s.eval_batch, s.bptt, s.precision)
            finite = all(bool(torch.isfinite(p.detach()).all()) for p in model.parameters())
            if not (finite and math.isfinite(heldout.perplexity)):
                raise TrainingDiverged(f"training diverged in epoch {epoch + 1}: the "
                                       f"{'weights' if not finite else 'held-out perplexity'} "
                                       f"became non-finite (learning rate {s.lr} too high?); "
                                       f"nothing was written")
            report.epochs.append(LMEpoch(loss_sum / tokens, seconds, tokens, output_seconds,
                                         heldout))
            logger.info("epoch %d: train loss %.4f, held-out perplexity %.2f, %.0f tokens/s",
                        epoch + 1, loss_sum / tokens, heldout.perplexity, tokens / seconds)
            if s.retree_every and (epoch + 1) % s.retree_every == 0 and epoch + 1 < s.epochs:
                report.reassignments.append({"epoch": epoch, **retree(model, data, optimizer,
                                                                      s.seed)})
            if checkpoint:
                save(epoch + 1, 0, None, None)
            if on_epoch is not None:
                on_epoch(report)
    except BaseException as exc:
        # Ctrl-C, SIGTERM (semhuff.cli's Terminated): the checkpoint on disk is whole (written
        # atomically); say where it is
        if not isinstance(exc, Exception) and checkpoint and os.path.exists(checkpoint):
            logger.warning("interrupted: the last checkpoint is kept in %s (--resume continues "
                           "from it)", checkpoint)
        raise
    return model, report


def save_model(path: str, model: LSTMLanguageModel, data: LMData, report: LMReport) -> None:
    """The model's state_dict (the output layer's tree / clusters included), its settings and
    vocabulary: ``load_model`` rebuilds it. Written atomically."""
    payload = {"state_dict": model.state_dict(), "settings": report.settings,
               "words": data.vocab.words, "counts": data.vocab.counts.tolist(),
               "eos": data.eos, "report": report.to_dict()}
    with atomic_output(path) as fh:
        torch.save(payload, fh)


class LoadedModel(tuple):
    """``(model, vocab, settings)`` as ``load_model`` has always returned (unpack it so), with
    ``.eos`` (whether the model's text has ``<eos>`` at line ends) and ``.report`` (the
    training run's report, a dict) as attributes."""

    def __new__(cls, model, vocab, settings, eos: bool, report):
        loaded = super().__new__(cls, (model, vocab, settings))
        loaded.eos, loaded.report = bool(eos), report
        return loaded

    model = property(lambda self: self[0])
    vocab = property(lambda self: self[1])
    settings = property(lambda self: self[2])


def load_model(path: str, device: str = "cpu") -> LoadedModel:
    """(model, vocab, settings) of a file ``save_model`` wrote (``.eos``, ``.report`` too), the
    model on ``device``. A tree layer's tree comes from the file (not rebuilt from its builder
    and similarity source: a ``--tree semhuff`` model loads without WordNet)."""
    from ..errors import ModelFileError
    from ..vocab import Vocab
    from .layers.tree import TreeSoftmax
    from ..trees import tree_builder_options
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except FileNotFoundError:
        raise ModelFileError(f"model not found: {path}") from None
    except Exception as exc:  # not a torch file, or a damaged one
        raise ModelFileError(f"{path} is not a semhuff-lm model "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0][:100]})") from None
    if not isinstance(payload, dict) or "state_dict" not in payload:
        what = ("a semhuff-lm checkpoint (semhuff-lm --checkpoint it --resume continues it)"
                if isinstance(payload, dict) and "model_state" in payload else "another file")
        raise ModelFileError(f"{path} is not a semhuff-lm model: it is {what}")
    vocab = Vocab(payload["words"], np.asarray(payload["counts"]),
                  int(np.sum(payload["counts"])))
    saved = dict(payload["settings"])
    # files from before the registry kept tree="huffman", clustering="frequency" for every
    # layer: the defaults, dropped where the layer does not take them
    takes = {o.name for o in layer_options(lm_layer_class(saved.get("output", "tree")))}
    for name in LAYER_FIELDS:
        if name not in takes:
            saved.pop(name, None)
    settings = LMSettings(**saved)
    build = settings
    if issubclass(lm_layer_class(settings.output), TreeSoftmax) and \
            "output.tree_parent" in payload["state_dict"]:
        # the saved tree replaces whatever is built: build the cheapest tree of the same size
        # (any binary tree over V words has 2V - 1 nodes), no builder options, no similarity
        builders = {o.name for o in tree_builder_options()}
        build = dataclasses.replace(settings, tree="huffman", similarity=None, layer_options={
            k: v for k, v in settings.layer_options.items()
            if k not in builders and k not in ("tree", "similarity")})
    data = LMData(vocab, np.zeros(0, np.int64), np.zeros(0, np.int64), payload["eos"])
    model = build_model(data, build)
    model.load_state_dict(payload["state_dict"])
    return LoadedModel(model.to(resolve_device(device)), vocab, settings, payload["eos"],
                       payload.get("report"))


def write_report(path: str, report: LMReport) -> None:
    with atomic_output(path, "w") as fh:
        json.dump(report.to_dict(), fh, indent=1)
