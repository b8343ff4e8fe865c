"""Triton kernels for the tree softmax's path scores (``paths.path_scores``'s static form):
one program per token walks its path, so nothing is padded in the arithmetic, nothing of size
(N, L, D) is ever stored, and nothing is read back to the host.

* forward: s[n, l] = h[n] . W[rows[n, l]] for the path's nodes, added up in float32;
* backward, input: dL/dh[n] = sum_l g[n, l] W[rows[n, l]], per token, in float32;
* backward, weights: dense, g[n, l] h[n] atomically added into a float32 (V-1, D) array (the
  order of the additions varies from run to run: equal to ~1e-7 relative, not bit for bit);
  sparse, the uncoalesced COO tensor of ``path_gradients.static_row_gradient``.

Used automatically by ``path_scores`` for CUDA tensors when Triton is installed (not under
torch.compile, which has its own form, and not for float64; ``SEMHUFF_TRITON=0`` turns them
off: the static torch form runs instead). Tested on the CPU under
``TRITON_INTERPRET=1`` against the torch path (``FORCE`` makes ``path_scores`` take it for CPU
tensors; tests/test_lm_paths.py). Their speed on a GPU: docs/lm.md, "On a GPU".
"""
from __future__ import annotations

import os

import torch

from .path_gradients import static_row_gradient

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton ships with CUDA builds of torch
    triton = tl = None

FORCE = False  # take the kernels for CPU tensors too (TRITON_INTERPRET=1 only: tests)


def available(allow_cpu: bool = False) -> bool:
    if triton is None or os.environ.get("SEMHUFF_TRITON") == "0":  # an escape hatch
        return False
    if allow_cpu or FORCE:
        return os.environ.get("TRITON_INTERPRET") == "1"
    return torch.cuda.is_available()


def wanted(h: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether ``path_scores`` should take the kernels for these inputs."""
    if weight.dtype == torch.float64 or h.dtype == torch.float64:
        return False
    return (h.is_cuda or FORCE) and available()


if triton is not None:
    @triton.jit
    def _forward(h_ptr, w_ptr, rows_ptr, valid_ptr, out_ptr, L, D,
                 BLOCK_D: tl.constexpr):
        n = tl.program_id(0)
        for l in range(0, L):
            row = tl.load(rows_ptr + n * L + l)
            ok = tl.load(valid_ptr + n * L + l)
            acc = tl.zeros([BLOCK_D], dtype=tl.float32)
            if ok != 0:
                for d0 in range(0, D, BLOCK_D):
                    offs = d0 + tl.arange(0, BLOCK_D)
                    mask = offs < D
                    hv = tl.load(h_ptr + n * D + offs, mask=mask, other=0.0).to(tl.float32)
                    wv = tl.load(w_ptr + row * D + offs, mask=mask, other=0.0).to(tl.float32)
                    acc += hv * wv
            tl.store(out_ptr + n * L + l, tl.sum(acc, axis=0))

    @triton.jit
    def _backward_h(g_ptr, w_ptr, rows_ptr, valid_ptr, out_ptr, L, D, BLOCK_D: tl.constexpr):
        n = tl.program_id(0)
        for d0 in range(0, D, BLOCK_D):
            offs = d0 + tl.arange(0, BLOCK_D)
            mask = offs < D
            acc = tl.zeros([BLOCK_D], dtype=tl.float32)
            for l in range(0, L):
                ok = tl.load(valid_ptr + n * L + l)
                if ok != 0:
                    row = tl.load(rows_ptr + n * L + l)
                    g = tl.load(g_ptr + n * L + l)
                    wv = tl.load(w_ptr + row * D + offs, mask=mask, other=0.0).to(tl.float32)
                    acc += g * wv
            tl.store(out_ptr + n * D + offs, acc, mask=mask)

    @triton.jit
    def _backward_w(g_ptr, h_ptr, rows_ptr, valid_ptr, out_ptr, L, D, BLOCK_D: tl.constexpr):
        n = tl.program_id(0)
        for l in range(0, L):
            ok = tl.load(valid_ptr + n * L + l)
            if ok != 0:
                row = tl.load(rows_ptr + n * L + l)
                g = tl.load(g_ptr + n * L + l)
                for d0 in range(0, D, BLOCK_D):
                    offs = d0 + tl.arange(0, BLOCK_D)
                    mask = offs < D
                    hv = tl.load(h_ptr + n * D + offs, mask=mask, other=0.0).to(tl.float32)
                    tl.atomic_add(out_ptr + row * D + offs, g * hv, mask=mask)


def _block(D: int) -> int:
    return min(max(triton.next_power_of_2(D), 16), 1024)


class TritonPathScores(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, rows, valid, sparse: bool):
        N, L = rows.shape
        D = h.shape[1]
        h_, w_ = h.contiguous(), weight.contiguous()
        rows_ = rows.contiguous()
        valid_ = valid.to(torch.int8).contiguous()
        scores = torch.empty(N, L, dtype=torch.float32, device=h.device)
        if N and L:
            _forward[(N,)](h_, w_, rows_, valid_, scores, L, D, BLOCK_D=_block(D))
        ctx.save_for_backward(h_, w_, rows_, valid_)
        ctx.sparse = sparse
        return scores

    @staticmethod
    def backward(ctx, grad):
        h, weight, rows, valid = ctx.saved_tensors
        N, L = rows.shape
        D = h.shape[1]
        g = torch.where(valid != 0, grad, 0).float().contiguous()
        grad_h = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_h = torch.zeros(N, D, dtype=torch.float32, device=h.device)
            if N and L:
                _backward_h[(N,)](g, weight, rows, valid, grad_h, L, D, BLOCK_D=_block(D))
            grad_h = grad_h.to(h.dtype)
        if ctx.needs_input_grad[1]:
            if ctx.sparse:
                grad_w = static_row_gradient(rows, g, h.float(), weight, True)
            else:
                grad_w = torch.zeros(weight.shape, dtype=torch.float32, device=h.device)
                if N and L:
                    _backward_w[(N,)](g, h, rows, valid, grad_w, L, D, BLOCK_D=_block(D))
                grad_w = grad_w.to(weight.dtype)
        return grad_h, grad_w, None, None, None


def triton_path_scores(h, weight, rows, valid, sparse: bool) -> torch.Tensor:
    """(N, L) float32 path scores by the kernels (``paths.path_scores``'s static form)."""
    return TritonPathScores.apply(h, weight, rows, valid, sparse)
