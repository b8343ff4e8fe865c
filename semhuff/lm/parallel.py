"""A ``semhuff-lm`` run over several processes (``torchrun``): the process group, the network
and the output layer each wrapped in ``DistributedDataParallel``, sums over the ranks, and the
recurrent state split into the ranks' rows of the batch and gathered back (a checkpoint holds
the whole batch's, for any number of processes to resume)."""
from __future__ import annotations

import os

import torch

from .networks import map_state


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


def current_group():
    """(world size, rank) of the process group this process is in, (1, 0) without one."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def all_reduce_sum(values, device) -> list:
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
    buffers are not broadcast (a layer's statistic is each rank's own until it reduces it
    itself, ``reduce_statistic``); DDP looks for parameters a step left unused only in a layer
    whose ``uses_every_parameter`` is False (the search costs a graph traversal a step)."""
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


def gather_rows(state, world: int):
    """The whole batch's recurrent state from the ranks' rows (a collective: every rank calls
    it; the batch is dimension 1, torch's RNN state layout)."""
    import torch.distributed as dist

    def gather(x):
        parts = [torch.empty_like(x) for _ in range(world)]
        dist.all_gather(parts, x.contiguous())
        return torch.cat(parts, dim=1)
    return map_state(state, gather)


def rows_of(state, rank: int, world: int):
    """This rank's rows of the whole batch's recurrent state."""
    return map_state(state, lambda x: x.chunk(world, dim=1)[rank].contiguous())
