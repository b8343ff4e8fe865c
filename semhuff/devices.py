"""Where the work runs. A ``Device`` opens a ``Session`` over the model's weights; the trainer and
the scorer only talk to the session:

* ``concurrency``: how many threads may call ``train_chunk`` at once (the CPU: ``workers``
  Hogwild threads sharing the host arrays; a GPU: one stream that owns the weights);
* ``warm_up``: compile or load the kernels before the clock starts, and say how long it took;
* ``train_chunk`` / ``score_chunk``: one chunk of token ids;
* ``to_host``: bring the weights back into the host arrays (for export, ``most_similar``,
  hooks, checkpoints); ``layer_changed``: the layer's arrays changed on the host (a hook
  re-assigned the tree, say), upload them again.

``Session`` and ``Device`` below declare the contract. ``cpu`` (``cpu_session.py``) and ``cuda``
(``semhuff.gpu``: numba.cuda or CuPy, registered without importing either; its constructor loads
the backend and says in one sentence when it cannot) are registered with ``register_device``, as
a plugin's device is. A device class lists its ``backends``; ``make_device(name, backend,
**options)`` builds it.
"""
from __future__ import annotations

from typing import Dict, Optional, Protocol, Tuple, Type

import numpy as np

from .cpu_session import CpuDevice, CpuSession, HotRows, Plan, check_separate  # noqa: F401
from .errors import DeviceError, OptionError
from .gpu.device import CudaDevice


class Session(Protocol):
    """What the trainer and the scorer ask of a device's session (``CpuSession`` is the
    reference; ``gpu.device.GpuSession`` another)."""

    concurrency: int  # threads that may call train_chunk at once

    def warm_up(self, plan: Plan, score: bool = False) -> float:
        """Compile or load the kernels before the clock starts; the seconds it took."""

    def train_chunk(self, plan: Plan, chunk, words_before: int, seed: int):
        """Train one chunk of ids; ``(summed nll, predictions, trained words)``."""

    def score_chunk(self, plan: Plan, chunk, part: int = 0):
        """Score one chunk (``part=1``: a clustered layer's cluster part only); ``(nll, n)``."""

    def to_host(self) -> None:
        """Bring the weights back into the model's host arrays."""

    def layer_changed(self) -> None:
        """The layer's host arrays changed (a hook re-assigned its tree): take them again."""

    def close(self) -> None:
        """Release what the session holds."""


class Device(Protocol):
    """A registered device class: ``Device(backend=None, **options)`` or ``Device()``."""

    name: str        # the registry key (set by ``register_device``)
    kind: str        # whose kernels it runs ("cpu" or "cuda"): a layer's ``devices`` name kinds
    backends: Tuple[str, ...]

    def open(self, syn0: np.ndarray, layer, workers: int) -> Session:
        """A session over the model's input vectors and output layer."""


DEVICES: Dict[str, Type] = {}


def register_device(name: str):
    """Class decorator: make a device available as ``--device name`` / ``Word2Vec(device=name)``
    (a ``--plugin`` module may register one)."""
    def register(cls):
        if DEVICES.get(name, cls) is not cls:
            raise ValueError(f"device name {name!r} is taken by {DEVICES[name]!r}")
        cls.name = name
        if not getattr(cls, "kind", None):
            cls.kind = name
        DEVICES[name] = cls
        return cls
    return register


register_device("cpu")(CpuDevice)
register_device("cuda")(CudaDevice)  # imports neither numba.cuda nor cupy
def backend_names() -> Tuple[str, ...]:
    """Every backend of every registered device (the CLI's ``--backend`` choices)."""
    return tuple(sorted({b for cls in DEVICES.values() for b in getattr(cls, "backends", ())}))


def check_device_options(name: str, backend: Optional[str] = None) -> None:
    """An unknown device or a backend the device does not have: ``OptionError``."""
    if name not in DEVICES:
        raise OptionError(f"unknown device {name!r}; available: {', '.join(sorted(DEVICES))}")
    backends = getattr(DEVICES[name], "backends", ())
    if backend is not None and backend not in backends:
        raise OptionError(f"device {name!r} has no backend {backend!r}; its backends: "
                          f"{', '.join(backends) or 'none'}")


def make_device(name: str, backend: Optional[str] = None, **options):
    """The device called ``name`` (with ``backend`` and device ``options``, e.g. the GPU's
    ``batch_pairs``); a clear error when it is unknown or unusable here."""
    check_device_options(name, backend)
    if backend is None and not options:  # a device class of a plugin may take no arguments
        return DEVICES[name]()
    return DEVICES[name](backend=backend, **options)


def scoring_device(name: str) -> str:
    """Where a device's models are scored (a GPU session scores on the CPU)."""
    return getattr(DEVICES.get(name), "score_on", name)


def check_layer_device(layer, device) -> None:
    """A layer names the kinds of device whose kernels it has (``layer.devices``); a plugin's
    device of kind "cpu" runs what the CPU runs."""
    if getattr(device, "kind", device.name) not in layer.devices:
        raise DeviceError(f"{layer.describe()} cannot run on device {device.name!r} "
                          f"(it runs on: {', '.join(layer.devices)})")
