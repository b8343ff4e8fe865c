"""Keep an optimizer's per-row state in step with a weight whose rows were moved.

When the binary self-organizing layer rebuilds its tree, row ``i`` of the new weight is old
row ``source[i]`` times ``sign[i]`` (a split that survived, negated when its sides swapped) or
starts afresh (``source[i] < 0``). The optimizer's state for that weight must follow, or it
would apply, say, Adam's momentum of one split to another. State that is linear in the
gradient (momentum, first moments) moves and flips sign with the row; state that is a square
or a magnitude (Adagrad's sum, second moments) moves without the sign; rows that start afresh
get the optimizer's initial value.

Also here: ``clip_grad_norm`` (torch's ``clip_grad_norm_`` for sparse gradients too) and what
each optimizer does with sparse gradients (``check_optimizer``): with ``sparse=True`` use SGD
or Adagrad (without weight decay) or SparseAdam for the sparse parameters; Adam, AdamW,
RMSprop and the others of ``torch.optim`` refuse sparse gradients, and an ``OptimizerError``
says so at construction (``check_optimizer(optimizer, model)``) or at the first step.
"""
from __future__ import annotations

import logging
import weakref
from typing import Optional

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from ...errors import OptionError

logger = logging.getLogger(__name__)

# per-row optimizer state by what it holds (torch.optim's names)
LINEAR_STATE = ("exp_avg", "momentum_buffer", "grad_avg", "ax", "prev")
SQUARE_STATE = ("sum", "exp_avg_sq", "max_exp_avg_sq", "square_avg", "acc_delta", "step_size")


def remap_rows(tensor: torch.Tensor, source: torch.Tensor, sign: Optional[torch.Tensor],
               fresh: float = 0.0) -> torch.Tensor:
    """Row i of the result: ``tensor[source[i]] * sign[i]``, or ``fresh`` where source < 0."""
    keep = source >= 0
    # a mask per row, shaped for the rows' other dimensions (none for a bias: a (N,) state)
    shape = (-1,) + (1,) * (tensor.dim() - 1)
    out = torch.where(keep.view(shape), tensor[source.clamp(min=0)], fresh)
    if sign is not None:
        out = out * sign.to(out.dtype).view(shape)
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


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` for gradients that may be sparse (the layers'
    ``sparse=True``): ``parameters`` an iterable of tensors or a single tensor; the norm of a
    sparse gradient is that of the coalesced gradient (rows repeated in it summed first, as the
    dense gradient has them). Scales every gradient in place by min(1, max_norm / (total norm +
    1e-6)); returns the total norm. ``error_if_nonfinite``: raise (``NonFiniteNorm``, one line)
    instead of scaling by a NaN or infinite norm (this reads the norm back to the host).

    torch 2.14's own ``clip_grad_norm_`` clips sparse gradients too (checked against it,
    repeated rows and mixed dense + sparse parameters included: the same norm and the same
    gradients); this one stays for older torch and gives the same numbers."""
    if torch.is_tensor(parameters):
        parameters = [parameters]
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    device = grads[0].device
    norms = [torch.linalg.vector_norm(g.coalesce()._values() if g.is_sparse else g,
                                      float(norm_type)).to(device) for g in grads]
    total = torch.linalg.vector_norm(torch.stack(norms), float(norm_type))
    if error_if_nonfinite and not bool(torch.isfinite(total)):
        raise NonFiniteNorm(f"the total norm of order {float(norm_type)} of the gradients is "
                            f"{float(total)}: cannot clip (error_if_nonfinite=False scales "
                            f"by it anyway)")
    scale = torch.clamp(float(max_norm) / (total + 1e-6), max=1.0)
    for g in grads:
        g.mul_(scale.to(g.device, g.dtype))
    return total


class NonFiniteNorm(OptionError, RuntimeError):
    """``clip_grad_norm(..., error_if_nonfinite=True)`` met a NaN or infinite norm (also a
    ``RuntimeError``, what torch's raises there)."""


class OptimizerError(OptionError, RuntimeError):
    """An optimizer that cannot update the gradients it is given (also a ``RuntimeError``,
    what torch raises there, with a message that does not say what to use instead)."""


# -- optimizers and sparse gradients -----------------------------------------------------------
# torch.optim's optimizers that refuse sparse gradients (torch 2.14: each raises "... does not
# support sparse gradients" at its first step); by exact type, subclasses may differ
def _rejecting_sparse():
    names = ("Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adadelta", "ASGD", "Rprop",
             "LBFGS", "Adafactor")
    return tuple(getattr(torch.optim, n) for n in names if hasattr(torch.optim, n))


SPARSE_ALTERNATIVES = ("SGD or Adagrad (both without weight_decay) or SparseAdam for the sparse "
                       "parameters, or the layer with sparse=False")


def sparse_parameters(module: torch.nn.Module) -> list:
    """The parameters of ``module`` that get sparse gradients: the layers' ``sparse=True``
    weights (``sparse_parameters()`` of each layer) and ``nn.Embedding`` / ``nn.EmbeddingBag``
    with ``sparse=True``."""
    found = []
    for m in module.modules():
        if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) and m.sparse:
            found.append(m.weight)
        elif callable(getattr(m, "sparse_parameters", None)):
            found.extend(m.sparse_parameters())
    unique = {id(p): p for p in found}
    return list(unique.values())


def optimizer_problem(optimizer: torch.optim.Optimizer, sparse, dense) -> Optional[str]:
    """Why ``optimizer`` cannot update parameters with sparse gradients (``sparse``) and dense
    ones (``dense``) among its own, in one line, or None."""
    mine = {id(p) for g in optimizer.param_groups for p in g["params"]}
    sparse = [p for p in sparse if id(p) in mine]
    dense = [p for p in dense if id(p) in mine]
    name = type(optimizer).__name__
    if isinstance(optimizer, torch.optim.SparseAdam):
        if dense:
            return (f"SparseAdam takes only sparse gradients, and {len(dense)} of its parameters "
                    f"get dense ones: give those to another optimizer (e.g. Adam), or use "
                    f"Adagrad or SGD for all")
        return None
    if not sparse:
        return None
    ids = {id(p) for p in sparse}
    fused = [p for g in optimizer.param_groups if g.get("fused") for p in g["params"]
             if id(p) in ids]
    if fused:
        return (f"{name} with fused=True does not take sparse gradients ({len(fused)} of its "
                f"parameters get them): put them in a group with fused=False (a layer lists "
                f"them in sparse_parameters(), which semhuff-lm's trainer_optimizer reads)")
    if type(optimizer) in _rejecting_sparse():
        return (f"{name} does not take sparse gradients ({len(sparse)} of its parameters get "
                f"them): use {SPARSE_ALTERNATIVES}")
    if type(optimizer) in (torch.optim.SGD, torch.optim.Adagrad):
        if any(g.get("weight_decay", 0) for g in optimizer.param_groups
               if any(id(p) in ids for p in g["params"])):
            return (f"{name} with weight_decay does not take sparse gradients ({len(sparse)} of "
                    f"its parameters get them): use weight_decay=0 for them (a second parameter "
                    f"group), or the layer with sparse=False")
    return None


def check_optimizer(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> None:
    """At construction: an ``OptimizerError`` (one line, saying what to use) when
    ``optimizer`` cannot update ``model``'s gradients: Adam, AdamW, RMSprop and the others of
    torch.optim that refuse sparse gradients, SGD / Adagrad with weight decay on them, or
    SparseAdam given dense ones. Without this call the same error comes at the first step
    (a step pre-hook installed when this module is imported)."""
    sparse = sparse_parameters(model)
    ids = {id(p) for p in sparse}
    dense = [p for p in model.parameters() if id(p) not in ids and p.requires_grad]
    problem = optimizer_problem(optimizer, sparse, dense)
    if problem:
        raise OptimizerError(problem)


def trainer_optimizer(model: torch.nn.Module, lr: float, device) -> torch.optim.Adagrad:
    """semhuff-lm's Adagrad. On the CPU the parameters with dense gradients form a group of
    their own run by torch's fused Adagrad (one pass over a weight where the plain form makes
    five: the two-level layers' 44,000 x 256 word table, 54 -> 8 ms a step on one core of this
    project's guest), the sparse ones (``sparse_parameters``) a plain second group (the fused
    form takes no sparse gradient). Elsewhere one plain group (the GPU figures were measured
    so; the fused CUDA form is untried here). The numbers are Adagrad's either way."""
    params = [p for p in model.parameters() if p.requires_grad]
    if torch.device(device).type != "cpu":
        return torch.optim.Adagrad(params, lr=lr)
    ids = {id(p) for p in sparse_parameters(model)}
    groups = [{"params": [p for p in params if id(p) not in ids], "fused": True},
              {"params": [p for p in params if id(p) in ids], "fused": False}]
    return torch.optim.Adagrad([g for g in groups if g["params"]], lr=lr)


def regroup_state(saved: dict, optimizer: torch.optim.Optimizer,
                  model: torch.nn.Module) -> dict:
    """``saved`` (an optimizer's ``state_dict``) fitted to ``optimizer``'s parameter groups when
    it was written with every parameter of ``model`` in one group, in ``model.parameters()``'s
    order (semhuff-lm's checkpoints before ``trainer_optimizer``); else ``saved`` as it is."""
    groups = saved.get("param_groups", [])
    if len(groups) != 1 or len(optimizer.param_groups) == 1:
        return saved
    index = {id(p): i for i, p in enumerate(p for p in model.parameters() if p.requires_grad)}
    if len(groups[0]["params"]) != len(index):
        return saved  # not the one-group form: load_state_dict says what does not fit
    old = groups[0]["params"]
    regrouped = [{**groups[0], "fused": g.get("fused"),
                  "params": [old[index[id(p)]] for p in g["params"]]}
                 for g in optimizer.param_groups]
    return {**saved, "param_groups": regrouped}


_checked = weakref.WeakSet()  # optimizers whose first step with gradients passed the check


def _first_step_check(optimizer, args, kwargs):
    """torch.optim's global step pre-hook: before an optimizer's first step with gradients,
    the check of ``check_optimizer`` on the gradients it holds, so that an optimizer torch
    would fail on sparse gradients fails with a message saying what to use; from then on a
    set lookup a step."""
    if optimizer in _checked:
        return None
    sparse, dense = [], []
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is not None:
                (sparse if p.grad.is_sparse else dense).append(p)
    if not sparse and not dense:
        return None  # nothing to update yet: check at the next step
    problem = optimizer_problem(optimizer, sparse, dense)
    if problem:
        raise OptimizerError(problem)
    _checked.add(optimizer)
    return None


register_optimizer_step_pre_hook(_first_step_check)
