"""Keep an optimizer's per-row state in step with a weight whose rows were moved.

When the binary self-organizing layer rebuilds its tree, row ``i`` of the new weight is old
row ``source[i]`` times ``sign[i]`` (a split that survived, negated when its sides swapped) or
starts afresh (``source[i] < 0``). The optimizer's state for that weight must follow, or it
would apply, say, Adam's momentum of one split to another. State that is linear in the
gradient (momentum, first moments) moves and flips sign with the row; state that is a square
or a magnitude (Adagrad's sum, second moments) moves without the sign; rows that start afresh
get the optimizer's initial value.
"""
from __future__ import annotations

import logging
from typing import Optional

import torch

logger = logging.getLogger(__name__)

# per-row optimizer state by what it holds (torch.optim's names)
LINEAR_STATE = ("exp_avg", "momentum_buffer", "grad_avg", "ax", "prev")
SQUARE_STATE = ("sum", "exp_avg_sq", "max_exp_avg_sq", "square_avg", "acc_delta", "step_size")


def remap_rows(tensor: torch.Tensor, source: torch.Tensor, sign: Optional[torch.Tensor],
               fresh: float = 0.0) -> torch.Tensor:
    """Row i of the result: ``tensor[source[i]] * sign[i]``, or ``fresh`` where source < 0."""
    keep = source >= 0
    out = torch.where(keep.unsqueeze(1), tensor[source.clamp(min=0)], fresh)
    if sign is not None:
        out = out * sign.to(out.dtype).unsqueeze(1)
    return out


def remap_optimizer_state(optimizer: Optional[torch.optim.Optimizer], param: torch.Tensor,
                          source: torch.Tensor, sign: torch.Tensor) -> int:
    """Move ``optimizer``'s state rows of ``param`` like the weight's rows; returns how many
    state tensors were moved."""
    if optimizer is None or param not in optimizer.state:
        return 0
    group = next((g for g in optimizer.param_groups if any(p is param for p in g["params"])), {})
    state = optimizer.state[param]
    moved = 0
    for key, value in state.items():
        if not (torch.is_tensor(value) and value.shape == param.shape):
            continue  # scalars such as "step"
        if key not in LINEAR_STATE and key not in SQUARE_STATE:
            logger.warning("optimizer state %r of an unknown kind: rows moved without sign "
                           "flips", key)
        linear = key in LINEAR_STATE
        fresh = float(group.get("initial_accumulator_value", 0.0)) if key == "sum" else 0.0
        state[key] = remap_rows(value, source.to(value.device),
                                sign.to(value.device) if linear else None, fresh)
        moved += 1
    return moved


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` for gradients that may be sparse (the layers'
    ``sparse=True``), which torch's refuses (no vector norm for sparse tensors): the norm of a
    sparse gradient is that of its coalesced values. Scales every gradient in place by
    min(1, max_norm / total norm); returns the total norm."""
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    device = grads[0].device
    norms = [torch.linalg.vector_norm(g.coalesce()._values() if g.is_sparse else g,
                                      norm_type).to(device) for g in grads]
    total = torch.linalg.vector_norm(torch.stack(norms), norm_type)
    scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale.to(g.device, g.dtype))
    return total
