"""What a ``semhuff-lm`` run is told (``LMSettings``), and where it runs: the output layer and
the network by name (``output``, ``arch``), each with its own options (``layer_options``,
``network_options``: checked by their declarations, never known here), the batching, Adagrad's
rate and the clip, the device and the precision (``resolve_device``, ``autocast``).

The paper's recipe (Shen et al. §4) is the default where it fits a CPU run: one-layer LSTM,
Adagrad at 0.1, the gradient's norm clipped to 0.25, truncated back-propagation through 20 steps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

import torch

from ..errors import OptionError
from . import _moved
from .layers.base import LOSS_OPTIONS
from .layers.registry import DEFAULT_LM_LAYER, check_lm_layer_settings, layers_with, \
    lm_layer_class, trainer_defaults
from .networks import DEFAULT_NETWORK, check_lm_network_settings, lm_network_class, \
    network_options

PRECISIONS = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@_moved.accept_former_settings  # cell=, tree=, similarity=, clusters=, clustering=
@dataclass
class LMSettings:
    output: str = DEFAULT_LM_LAYER  # the output layer's name (LM_LAYERS)
    layer_options: dict = field(default_factory=dict)  # its options (its OPTIONS)
    emb: int = 256
    hidden: int = 256
    arch: str = DEFAULT_NETWORK  # the network's name (LM_NETWORKS)
    network_options: dict = field(default_factory=dict)  # its options (its OPTIONS)
    dropout: float = 0.0
    batch_size: int = 32
    bptt: int = 20
    epochs: int = 1
    lr: float = 0.1
    clip: float = 0.25
    eval_batch: int = 10
    threads: Optional[int] = None
    seed: int = 1
    retree_every: int = 0  # every this many epochs the layer's tree is re-built from the
    # network's own input embeddings (a layer with ``retree``); 0: never
    device: str = "cpu"  # cpu, cuda, cuda:N: the model, the batches, the evaluation
    precision: str = "fp32"  # fp32, bf16, fp16 (CUDA only): torch.autocast
    progress: bool = True

    def check(self) -> None:
        """Every setting, before any data is read: a one-line ``OptionError``."""
        for name in ("emb", "hidden", "batch_size", "bptt", "epochs", "eval_batch"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise OptionError(f"{name} must be an integer >= 1, got {value!r}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise OptionError(f"lr must be > 0, got {self.lr!r}")
        if not (math.isfinite(self.clip) and self.clip > 0):
            raise OptionError(f"clip must be > 0, got {self.clip!r}")
        check_lm_network_settings(self.arch, self.network_options)
        self._check_window()
        if not 0 <= self.dropout < 1:
            raise OptionError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if self.threads is not None and self.threads < 1:
            raise OptionError(f"threads must be >= 1, got {self.threads!r}")
        check_lm_layer_settings(self.output, self.layer_settings())
        loss_api = sorted(o.name for o in LOSS_OPTIONS if o.name in self.layer_options)
        if loss_api:  # the trainer's loss is the mean over every token; they would change it
            raise OptionError(f"{', '.join(loss_api)}: for your own training loops "
                              f"(make_output_layer); semhuff-lm trains on every token's mean loss")
        if isinstance(self.retree_every, bool) or not isinstance(self.retree_every, int) \
                or self.retree_every < 0:
            raise OptionError(f"retree_every must be an integer >= 0, got {self.retree_every!r}")
        able = layers_with("retree")
        if self.retree_every and self.output not in able:
            raise OptionError(f"--retree-every re-builds the output layer's tree: --loss "
                              f"{self.output} has none to re-build (the layers that can: "
                              f"{', '.join(f'--loss {name}' for name in able) or 'none'})")
        refusal = getattr(lm_layer_class(self.output), "retree_refusal", None)
        why = refusal(self.layer_options) if self.retree_every and refusal else None
        if why:
            raise OptionError(f"--retree-every: {why}")
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
        declared = {o.name: o for o in network_options(lm_network_class(self.arch))}
        if "max_len" in declared:
            max_len = self.network_options.get("max_len", declared["max_len"].default)
            if max_len is not None and self.bptt > max_len:
                raise OptionError(f"bptt {self.bptt} is longer than the {self.arch} network's "
                                  f"max_len {max_len}: lower --bptt or raise --max-len")

    def layer_settings(self) -> dict:
        """The output layer's settings: on the CPU the trainer's defaults for it (its
        registration's ``trainer_defaults``), then ``layer_options``."""
        on_cpu = str(self.device).split(":")[0] == "cpu"  # checked (one line) in check()
        return {**(trainer_defaults(self.output) if on_cpu else {}), **self.layer_options}

    @classmethod
    def from_saved(cls, saved: dict, takes=None) -> "LMSettings":
        """The settings a model file or a checkpoint holds, in today's names (``takes``: the
        layer's option names; a file from before the layer registry held tree and clustering
        for every layer)."""
        return cls(**_moved.upgrade_settings(saved, warn=False, takes=takes))


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
