"""Triton kernels for the two-level softmax's in-cluster part (``class_softmax``), with no
read-back to the host: one program per token runs over its cluster's words, BLOCK_R rows at a
time, with an online log-sum-exp (as flash attention's), so no (N, cluster size) array and no
per-cluster loop on the host exists.

* forward: out[n] = s[n, at] - logsumexp_r s[n, r], s[n, r] = h[n] . W[members[start_c + r]]
  for the m_c words of token n's cluster c; the log-sum-exp kept for backward;
* backward: the scores recomputed; d s[n, r] = g[n] (onehot(at) - exp(s[n, r] - lse[n]));
  dL/dh[n] = sum_r d s[n, r] W[row r] (the program owns row n: no atomics); the word weights'
  gradient atomically added into a float32 (V, D) array (dense: ``sparse=True`` keeps the
  per-cluster loop, whose gradient holds only the rows of the clusters present).

Why per token and not per cluster: which clusters a batch holds, and how many tokens each, is
known only on the device; a per-cluster form needs those sizes on the host (the loop's one
read-back a batch, on a GPU one wait, and ~C small kernels each way: 55 ms a step at V 50k on
an H100, docs/lm.md). The price is that each token reads its cluster's rows itself (m_c D
numbers), where the loop reads them once per cluster: the L2 cache shares them between the
tokens of a cluster.

Taken by ``class_softmax.in_cluster_log_prob`` for CUDA tensors with a dense word gradient when
Triton is installed (``SEMHUFF_TRITON=0`` turns it off, as for the tree kernels); tested on the
CPU under ``TRITON_INTERPRET=1`` against the loop (tests/test_lm_class_triton.py).
"""
from __future__ import annotations

import torch

from .paths_triton import tl, triton  # one import of Triton, one SEMHUFF_TRITON switch

BLOCK_R = 16  # rows of a cluster scored at once


if triton is not None:
    @triton.jit
    def _scores(h_ptr, w_ptr, members_ptr, start, r, rmask, n, D, BLOCK_R: tl.constexpr,
                BLOCK_D: tl.constexpr):
        """(BLOCK_R,) float32 scores of token n against the cluster rows start + r."""
        rows = tl.load(members_ptr + start + r, mask=rmask, other=0)
        acc = tl.zeros([BLOCK_R], dtype=tl.float32)
        for d0 in range(0, D, BLOCK_D):
            d = d0 + tl.arange(0, BLOCK_D)
            dmask = d < D
            hv = tl.load(h_ptr + n * D + d, mask=dmask, other=0.0).to(tl.float32)
            wv = tl.load(w_ptr + rows[:, None] * D + d[None, :],
                         mask=rmask[:, None] & dmask[None, :], other=0.0).to(tl.float32)
            acc += tl.sum(wv * hv[None, :], axis=1)
        return rows, acc

    @triton.jit
    def _forward(h_ptr, w_ptr, members_ptr, starts_ptr, cluster_ptr, at_ptr, out_ptr, lse_ptr,
                 D, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
        n = tl.program_id(0)
        c = tl.load(cluster_ptr + n)
        start = tl.load(starts_ptr + c)
        m = tl.load(starts_ptr + c + 1) - start
        at = tl.load(at_ptr + n)
        top = tl.full([], float("-inf"), tl.float32)
        total = tl.zeros([], dtype=tl.float32)
        picked = tl.zeros([], dtype=tl.float32)
        for r0 in range(0, m, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            rmask = r < m
            rows, s = _scores(h_ptr, w_ptr, members_ptr, start, r, rmask, n, D, BLOCK_R,
                              BLOCK_D)
            s = tl.where(rmask, s, float("-inf"))
            picked += tl.sum(tl.where(r == at, s, 0.0), axis=0)
            new_top = tl.maximum(top, tl.max(s, axis=0))
            total = total * tl.exp(top - new_top) + tl.sum(tl.exp(s - new_top), axis=0)
            top = new_top
        lse = top + tl.log(total)
        tl.store(lse_ptr + n, lse)
        tl.store(out_ptr + n, picked - lse)

    @triton.jit
    def _backward(g_ptr, h_ptr, w_ptr, members_ptr, starts_ptr, cluster_ptr, at_ptr, lse_ptr,
                  grad_h_ptr, grad_w_ptr, D, WANT_W: tl.constexpr, BLOCK_R: tl.constexpr,
                  BLOCK_D: tl.constexpr):
        n = tl.program_id(0)
        c = tl.load(cluster_ptr + n)
        start = tl.load(starts_ptr + c)
        m = tl.load(starts_ptr + c + 1) - start
        at = tl.load(at_ptr + n)
        g = tl.load(g_ptr + n)
        lse = tl.load(lse_ptr + n)
        for r0 in range(0, m, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            rmask = r < m
            rows, s = _scores(h_ptr, w_ptr, members_ptr, start, r, rmask, n, D, BLOCK_R,
                              BLOCK_D)
            ds = g * (tl.where(r == at, 1.0, 0.0) - tl.exp(s - lse))
            ds = tl.where(rmask, ds, 0.0)
            for d0 in range(0, D, BLOCK_D):
                d = d0 + tl.arange(0, BLOCK_D)
                dmask = d < D
                both = rmask[:, None] & dmask[None, :]
                wv = tl.load(w_ptr + rows[:, None] * D + d[None, :], mask=both,
                             other=0.0).to(tl.float32)
                here = grad_h_ptr + n * D + d
                tl.store(here, tl.load(here, mask=dmask, other=0.0)
                         + tl.sum(wv * ds[:, None], axis=0), mask=dmask)
                if WANT_W:
                    hv = tl.load(h_ptr + n * D + d, mask=dmask, other=0.0).to(tl.float32)
                    tl.atomic_add(grad_w_ptr + rows[:, None] * D + d[None, :],
                                  ds[:, None] * hv[None, :], mask=both)


def _block(D: int) -> int:
    return min(max(triton.next_power_of_2(D), 16), 128)


class TritonInCluster(torch.autograd.Function):
    """log P(w | c(w), h) (N,) float32 by the kernels; the word weights' gradient dense."""

    @staticmethod
    def forward(ctx, h, weight, members, starts, cluster, at):
        N, D = h.shape
        h_, w_ = h.contiguous(), weight.contiguous()
        out = torch.empty(N, dtype=torch.float32, device=h.device)
        lse = torch.empty(N, dtype=torch.float32, device=h.device)
        if N:
            _forward[(N,)](h_, w_, members, starts, cluster, at, out, lse, D,
                           BLOCK_R=BLOCK_R, BLOCK_D=_block(D))
        ctx.save_for_backward(h_, w_, members, starts, cluster, at, lse)
        return out

    @staticmethod
    def backward(ctx, grad):
        h, weight, members, starts, cluster, at, lse = ctx.saved_tensors
        N, D = h.shape
        want_w = ctx.needs_input_grad[1]
        grad_h = torch.zeros(N, D, dtype=torch.float32, device=h.device)
        grad_w = torch.zeros(weight.shape if want_w else (1, D), dtype=torch.float32,
                             device=h.device)
        if N:
            _backward[(N,)](grad.float().contiguous(), h, weight, members, starts, cluster, at,
                            lse, grad_h, grad_w, D, WANT_W=want_w, BLOCK_R=BLOCK_R,
                            BLOCK_D=_block(D))
        return (grad_h.to(h.dtype), grad_w.to(weight.dtype) if want_w else None,
                None, None, None, None)


def triton_in_cluster(h, weight, members, starts, cluster, at) -> torch.Tensor:
    """log P(w | c(w), h) (N,) for the tokens whose targets lie in ``cluster`` (N,) at place
    ``at`` (N,) among the members ``members[starts[c]:starts[c + 1]]`` of their cluster."""
    return TritonInCluster.apply(h, weight, members, starts, cluster, at)
