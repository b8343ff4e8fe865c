"""The batched path computation of tree softmax (the p-tHSM formulation), with a row-wise
gradient of the output weights.

For a batch of targets, every (token, path node) pair needs one dot product ``h[n] . W[row]``.
Measured at V = 50k, D = 512, 2,560 tokens, 2 CPU threads (eval/bench/lm_layers.py): the
plain autograd form (gather the padded (N, depth, D) rows, one bmm, dense weight gradient) is
dominated not by arithmetic but by memory: the gathered rows (100 MB), the outer products of
the weight gradient (another (N, depth, D)) and the fresh zero-filled (V, D) gradient, each
paying page faults on first touch. ``PathScores`` avoids all three:

* forward: tokens grouped by path length, so the gathered rows are not padded (57 MB instead
  of 100 MB at Huffman depths), gathered into a workspace reused from call to call; one bmm
  per length (a loop over the distinct lengths, ~20, never over nodes);
* backward, input: ``embedding_bag(rows, W, per_sample_weights=dL/ds)`` sums the weighted rows
  without materialising them;
* backward, weights: only the U rows the batch touched (~5k of 50k) get a gradient, computed as
  one sparse (U x N) by dense (N x D) product; returned as a sparse gradient (``sparse=True``,
  for SGD / Adagrad / SparseAdam, which then also update only those rows) or scattered into a
  dense one (any optimizer).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..trees.base import Tree


def path_buffers(tree: Tree, device=None, dtype=None) -> Tuple[torch.Tensor, torch.Tensor,
                                                                 torch.Tensor]:
    """(points, signs, lengths) of every word, padded to the tree's depth: ``signs`` is +1 where
    the code bit is 0 (P = sigmoid(s), word2vec's label 1 - code), -1 where it is 1, 0 past the
    path's end."""
    lengths = tree.lengths.astype(np.int64)
    depth = max(int(lengths.max()), 1)
    valid = np.arange(depth)[None, :] < lengths[:, None]
    signs = np.where(valid, 1.0 - 2.0 * tree.codes[:, :depth], 0.0)
    points = np.where(valid, tree.points[:, :depth], 0).astype(np.int64)
    return (torch.as_tensor(points, device=device),
            torch.as_tensor(signs, device=device, dtype=dtype or torch.get_default_dtype()),
            torch.as_tensor(lengths, device=device))


@dataclass
class PathBatch:
    """The paths of one batch of targets: ``rows`` (N, L) output rows (0 past the end), ``signs``
    (N, L) with 0 past the end, ``order`` the tokens by path length and ``buckets`` the
    (length, count) runs in that order."""

    rows: torch.Tensor
    signs: torch.Tensor
    lengths: torch.Tensor
    order: torch.Tensor
    buckets: List[Tuple[int, int]]

    @classmethod
    def gather(cls, points, signs, lengths, target) -> "PathBatch":
        lengths = lengths[target]
        depth = int(lengths.max()) if lengths.numel() else 0
        counts = torch.bincount(lengths, minlength=depth + 1).tolist()  # one sync per batch
        buckets = [(n, c) for n, c in enumerate(counts) if c and n]
        return cls(points[target, :depth], signs[target, :depth], lengths,
                   torch.argsort(lengths, stable=True), buckets)

    @property
    def valid(self) -> torch.Tensor:
        return self.signs != 0


class Workspace:
    """A buffer reused across calls (a fresh one of ~50 MB costs its page faults every batch)."""

    def __init__(self):
        self.buffer: Optional[torch.Tensor] = None

    def take(self, rows: int, like: torch.Tensor) -> torch.Tensor:
        b = self.buffer
        if b is None or b.shape[0] < rows or b.shape[1] != like.shape[1] or b.dtype != like.dtype \
                or b.device != like.device:
            self.buffer = b = torch.empty(rows, like.shape[1], dtype=like.dtype, device=like.device)
        return b[:rows]


def path_scores(h: torch.Tensor, weight: torch.Tensor, batch: PathBatch, sparse: bool,
                workspace: Workspace) -> torch.Tensor:
    """(N, L): ``h[n] . weight[batch.rows[n, l]]``, 0 past each path's end."""
    return PathScores.apply(h, weight, batch, sparse, workspace)


class PathScores(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, batch: PathBatch, sparse: bool, workspace: Workspace):
        N, L = batch.rows.shape
        scores = h.new_zeros(N, L)
        biggest = max((n * c for n, c in batch.buckets), default=0)
        space = workspace.take(biggest, weight)
        start = 0
        for length, count in batch.buckets:
            tokens = batch.order[start:start + count]
            start += count
            rows = torch.index_select(weight, 0, batch.rows[tokens, :length].reshape(-1),
                                      out=space[:length * count]).view(count, length, -1)
            scores[tokens, :length] = torch.bmm(rows, h[tokens].unsqueeze(2)).squeeze(2)
        ctx.save_for_backward(h, weight)
        ctx.batch, ctx.sparse = batch, sparse
        return scores

    @staticmethod
    def backward(ctx, grad):
        h, weight = ctx.saved_tensors
        batch = ctx.batch
        grad = torch.where(batch.valid, grad, 0)
        grad_h = grad_w = None
        if ctx.needs_input_grad[0]:
            grad_h = F.embedding_bag(batch.rows, weight, per_sample_weights=grad, mode="sum")
        if ctx.needs_input_grad[1]:
            grad_w = row_gradient(batch.rows, batch.valid, grad, h, weight, ctx.sparse)
        return grad_h, grad_w, None, None, None


def row_gradient(rows, valid, grad, h, weight, sparse: bool) -> torch.Tensor:
    """d loss / d weight for scores s[n, l] = h[n] . weight[rows[n, l]] with d loss / d s =
    ``grad``: sum over the pairs of grad x h[n] per row, for the touched rows only."""
    token = torch.arange(rows.shape[0], device=rows.device).unsqueeze(1).expand_as(rows)[valid]
    node, g = rows[valid], grad[valid]
    touched, local = torch.unique(node, sorted=True, return_inverse=True)
    order = torch.argsort(local, stable=True)
    crow = torch.zeros(touched.numel() + 1, dtype=torch.int64, device=rows.device)
    crow[1:] = torch.cumsum(torch.bincount(local, minlength=touched.numel()), 0)
    with warnings.catch_warnings():  # "sparse CSR support is in beta": not the user's concern
        warnings.simplefilter("ignore", UserWarning)
        pairs = torch.sparse_csr_tensor(crow, token[order], g[order],
                                        (touched.numel(), h.shape[0]), check_invariants=False)
    values = pairs @ h
    if sparse:
        return torch.sparse_coo_tensor(touched.unsqueeze(0), values, weight.shape,
                                       is_coalesced=True, check_invariants=False)
    return weight.new_zeros(weight.shape).index_copy_(0, touched, values)


def path_matrix(points, codes, lengths, n_out: int, n_inner: int, out_row=None, device=None,
                dtype=None) -> torch.Tensor:
    """(n_out, 2 n_inner) sparse M with log P(path) = M @ [logsigmoid(s); s] for the scores s of
    the inner nodes (rows 0 .. n_inner - 1), one output row per path (``out_row``: its row,
    default 0, 1, ...): since log sigmoid(-s) = log sigmoid(s) - s, a path node contributes
    logsigmoid(s) (+1 in the first half) and, where its code bit is 1, -s (-1 in the second)."""
    lengths = np.asarray(lengths, np.int64)
    out_row = np.arange(len(lengths)) if out_row is None else np.asarray(out_row, np.int64)
    valid = np.arange(points.shape[1])[None, :] < lengths[:, None]
    path = np.repeat(out_row, lengths)
    node = points[valid].astype(np.int64)
    ones = codes[valid].astype(bool)
    r = np.concatenate([path, path[ones]])
    c = np.concatenate([node, n_inner + node[ones]])
    v = np.concatenate([np.ones(node.size), -np.ones(int(ones.sum()))])
    m = torch.sparse_coo_tensor(torch.as_tensor(np.stack([r, c])), torch.as_tensor(v),
                                (n_out, 2 * n_inner), check_invariants=False).coalesce()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return m.to(device=device, dtype=dtype or torch.get_default_dtype()).to_sparse_csr()


def leaf_matrix(tree: Tree, device=None, dtype=None) -> torch.Tensor:
    """``path_matrix`` of every leaf's path: log P(w | h) for all w at once."""
    return path_matrix(tree.points, tree.codes, tree.lengths, tree.n_words, tree.n_words - 1,
                       device=device, dtype=dtype)


def paths_log_prob(h: torch.Tensor, weight: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """(N, n_paths) exact log-probabilities of the paths of ``matrix`` (``path_matrix``): the
    inner nodes it uses scored once (h W^T), then one sparse product adds up each path."""
    s = h @ weight[:matrix.shape[1] // 2].t()
    both = torch.cat([F.logsigmoid(s), s], dim=1)
    return (matrix @ both.t()).t()
