"""The batched path computation of tree softmax (the p-tHSM formulation), with a row-wise
gradient of the output weights.

For a batch of targets, every (token, path node) pair needs one dot product ``h[n] . W[row]``.
The plain autograd form (gather the padded (N, depth, D) rows, one bmm, dense weight gradient)
is dominated not by arithmetic but by memory: the gathered rows, the outer products of the
weight gradient (another (N, depth, D)) and the fresh zero-filled (V, D) gradient, each paying
page faults on first touch (docs/lm.md, "Speed of the layers alone"). ``PathScores`` avoids all
three:

* forward: tokens grouped by path length, so the gathered rows are not padded, gathered into a
  workspace reused from call to call; one bmm per length (a loop over the distinct lengths,
  ~20, never over nodes);
* backward, input: ``embedding_bag(rows, W, per_sample_weights=dL/ds)`` sums the weighted rows
  without materialising them;
* backward, weights: only the U rows the batch touched get a gradient, computed as
  one sparse (U x N) by dense (N x D) product; returned as a sparse gradient (``sparse=True``,
  for SGD / Adagrad / SparseAdam, which then also update only those rows) or scattered into a
  dense one (any optimizer).

That bucketed form reads two numbers back to the host a batch (the lengths' ``bincount`` and
``torch.unique``'s size), which stalls a GPU and makes torch.compile recompile or break the
graph. So ``PathBatch.gather`` has a second, static form, with paths padded to the tree's depth
(the padding repeats the root's row and scores 0) and nothing sized by the batch's values:

* eager, any device but the CPU (``StaticPathScores``): rows gathered k levels at a time (the
  (N, k, D) block within the (N, V) of a full softmax's logits), one bmm each; backward, the
  input as above, the weights' dense gradient one (V-1 x N) CSR product whose N L entries
  include the padding (row counts by ``index_add_``: ``bincount``'s size would be read back),
  a sparse one the uncoalesced COO tensor of the N L outer products (N L D numbers);
* CUDA: the Triton kernels of ``triton_paths`` (a program per token walking its path);
* torch.compile: the padded form in plain operations (``compiled_scores``), which inductor
  fuses (gather into the dot products, the weight gradient into one scatter-add): no graph
  break, one graph per batch shape (tests/test_lm_paths.py: 100 batches of varying targets, 1
  graph). With ``sparse=True`` (inductor makes no sparse tensors) the path scores run eagerly
  in the static form behind ``torch.compiler.disable``: one graph break, there.

CPU eager keeps the bucketed form (``BUCKETS_ON_CPU``): on the CPU a read-back costs nothing
but the Python, and the static form does the padding's arithmetic and (sparse) stores the N L
outer products: it measured 1.2-4x slower (docs/lm.md).

Mixed precision: scores are added up in float32 for bfloat16 / float16 inputs (``compute_dtype``;
autocast is off inside), gradients come back in the inputs' dtypes; the generic sparse product
of ``paths_log_prob`` runs in float32 (the CPU's sparse CSR product has no bfloat16 kernel).

The whole distribution (``log_prob``): ``LeafPaths`` walks the tree top-down a level at a
time, O(V N), where the sparse path-matrix product (``leaf_matrix``, kept as the reference and
for the self-organizing layer's cluster paths) costs O(V N depth); most of its time is the
(V x D) by (D x N) product of every inner node's score (docs/lm.md).
"""
from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ...trees.base import Tree
from .path_gradients import row_gradient, static_row_gradient
from .threads import threads_for

# CPU eager: paths grouped by length (see above); everywhere else the static form
BUCKETS_ON_CPU = True


def compute_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype path scores are added up in: float64 if any input is, else float32 (half
    types included: a dot product of D bfloat16 terms summed in bfloat16 keeps ~3 digits)."""
    return torch.float64 if torch.float64 in dtypes else torch.float32


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def use_buckets(device: torch.device) -> bool:
    """Whether a batch's paths are grouped by length (one read-back of the lengths a batch) or
    padded to the tree's depth (none): see the module's docstring for the measurements."""
    return BUCKETS_ON_CPU and torch.device(device).type == "cpu" and not _compiling()


def path_buffers(tree: Tree, device=None, dtype=None) -> Tuple[torch.Tensor, torch.Tensor,
                                                                 torch.Tensor]:
    """(points, signs, lengths) of every word, padded to the tree's depth: ``signs`` is +1 where
    the code bit is 0 (P = sigmoid(s), word2vec's label 1 - code), -1 where it is 1, 0 past the
    path's end; ``points`` past the end repeat the root's row (every path's first: the padding
    of the static form then reads a row already in cache and adds its 0 to a touched row)."""
    lengths = tree.lengths.astype(np.int64)
    depth = max(int(lengths.max()), 1)
    valid = np.arange(depth)[None, :] < lengths[:, None]
    signs = np.where(valid, 1.0 - 2.0 * tree.codes[:, :depth], 0.0)
    points = np.where(valid, tree.points[:, :depth], tree.points[:, :1]).astype(np.int64)
    return (torch.as_tensor(points, device=device),
            torch.as_tensor(signs, device=device, dtype=dtype or torch.get_default_dtype()),
            torch.as_tensor(lengths, device=device))


@dataclass
class PathBatch:
    """The paths of one batch of targets: ``rows`` (N, L) output rows (the root's past the end),
    ``signs``
    (N, L) with 0 past the end. Bucketed form (``buckets`` not None): L is the batch's longest
    path, ``order`` the tokens with a path by path length and ``buckets`` the (length, count)
    runs in that order (read back to the host). Static form (``buckets`` None): L is the tree's depth, and
    nothing depends on the batch's values."""

    rows: torch.Tensor
    signs: torch.Tensor
    lengths: torch.Tensor
    order: Optional[torch.Tensor] = None
    buckets: Optional[List[Tuple[int, int]]] = None

    @classmethod
    def gather(cls, points, signs, lengths, target, bucketed: Optional[bool] = None
               ) -> "PathBatch":
        """``bucketed``: None picks by device (``use_buckets``)."""
        lengths = lengths[target]
        if not (use_buckets(target.device) if bucketed is None else bucketed):
            return cls(points[target], signs[target], lengths)
        depth = int(lengths.max()) if lengths.numel() else 0
        counts = torch.bincount(lengths, minlength=depth + 1).tolist()  # one sync per batch
        buckets = [(n, c) for n, c in enumerate(counts) if c and n]
        # the empty paths (a flat head's words, head_tree.py) come first: not in any bucket
        return cls(points[target, :depth], signs[target, :depth], lengths,
                   torch.argsort(lengths, stable=True)[counts[0]:], buckets)

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
                workspace: Optional[Workspace] = None) -> torch.Tensor:
    """(N, L): ``h[n] . weight[batch.rows[n, l]]``, 0 past each path's end, added up in
    ``compute_dtype`` (float32 for half-precision inputs; autocast has no say)."""
    if h.shape[0] == 0 and not _compiling():
        # an empty batch: no score, nothing to gather (embedding_bag takes no empty bag, a
        # Triton grid no zero size); h's gradient is its zero, the weight gets none
        zero = (h.sum() * 0).to(compute_dtype(h.dtype, weight.dtype))
        return zero.expand(0, batch.rows.shape[1])
    if _compiling():
        if sparse:  # inductor makes no sparse tensors: the eager static form, one graph break
            return _eager_static(h, weight, batch.rows, batch.valid)
        return compiled_scores(h, weight, batch.rows, batch.valid)
    if batch.buckets is not None:
        return PathScores.apply(h, weight, batch, sparse, workspace or Workspace())
    if triton_wanted(h, weight):
        from .paths_triton import triton_path_scores
        return triton_path_scores(h, weight, batch.rows, batch.valid, sparse)
    return StaticPathScores.apply(h, weight, batch.rows, batch.valid, sparse)


@torch.compiler.disable
def _eager_static(h, weight, rows, valid):
    return StaticPathScores.apply(h, weight, rows, valid, True)


def _triton_forced() -> bool:
    module = sys.modules.get(__package__ + ".paths_triton")
    return bool(module is not None and module.FORCE)


def triton_wanted(h, weight) -> bool:
    """Whether the Triton kernels (``triton_paths``, ``triton_clusters``) take these inputs:
    CUDA tensors (or CPU ones with ``triton_paths.FORCE``, under the interpreter); Triton is
    imported only then."""
    if not (h.is_cuda or _triton_forced()):
        return False
    try:
        from .paths_triton import wanted
    except ImportError:  # pragma: no cover
        return False
    return wanted(h, weight)


def compiled_scores(h, weight, rows, valid) -> torch.Tensor:
    """The padded form in plain operations, for torch.compile: inductor fuses the gather into
    the dot products (no (N, L, D) array) and the weight gradient into one scatter-add."""
    ct = compute_dtype(h.dtype, weight.dtype)
    scores = (weight[rows].to(ct) * h.to(ct).unsqueeze(1)).sum(-1)
    return torch.where(valid, scores, 0)


def _chunk(weight: torch.Tensor, depth: int) -> int:
    """Levels gathered at once in the static form: the (N, k, D) rows stay within the (N, V)
    a full softmax's logits would take."""
    return max(1, min(depth, (weight.shape[0] + 1) // max(weight.shape[1], 1)))


def _weighted_row_sums(rows, weight, grad, ct) -> torch.Tensor:
    """(N, D) sum over l of grad[n, l] * weight[rows[n, l]], in ``ct``."""
    if weight.dtype == ct:  # summed without materialising the rows
        return F.embedding_bag(rows, weight, per_sample_weights=grad, mode="sum")
    N, L = rows.shape
    out = torch.zeros(N, weight.shape[1], dtype=ct, device=weight.device)
    k = _chunk(weight, L)
    for a in range(0, L, k):
        w = weight[rows[:, a:a + k]].to(ct)
        out += torch.bmm(grad[:, a:a + k].unsqueeze(1), w).squeeze(1)
    return out


def _path_backward(ctx, grad, h, weight, rows, valid, weight_grad):
    """Both torch forms' backward: the padding's gradient zeroed, h's gradient by
    ``_weighted_row_sums``, the weight's by ``weight_grad(grad, h)`` (both in ``ct``)."""
    ct = compute_dtype(h.dtype, weight.dtype)
    grad_h = grad_w = None
    with torch.autocast(h.device.type, enabled=False):
        grad = torch.where(valid, grad, 0).to(ct)
        if ctx.needs_input_grad[0]:
            grad_h = _weighted_row_sums(rows, weight, grad, ct).to(h.dtype)
        if ctx.needs_input_grad[1]:
            grad_w = weight_grad(grad, h.to(ct))
    return grad_h, grad_w, None, None, None


class PathScores(torch.autograd.Function):
    """The bucketed form (tokens grouped by path length; one read-back a batch)."""

    @staticmethod
    def forward(ctx, h, weight, batch: PathBatch, sparse: bool, workspace: Workspace):
        ct = compute_dtype(h.dtype, weight.dtype)
        N, L = batch.rows.shape
        with torch.autocast(h.device.type, enabled=False), \
                threads_for(batch.rows.numel() * weight.shape[1]):
            hc = h.to(ct)
            scores = hc.new_zeros(N, L)
            biggest = max((n * c for n, c in batch.buckets), default=0)
            space = workspace.take(biggest, weight)
            start = 0
            for length, count in batch.buckets:
                tokens = batch.order[start:start + count]
                start += count
                rows = torch.index_select(weight, 0, batch.rows[tokens, :length].reshape(-1),
                                          out=space[:length * count]).view(count, length, -1)
                scores[tokens, :length] = torch.bmm(rows.to(ct), hc[tokens].unsqueeze(2)).squeeze(2)
        ctx.save_for_backward(h, weight)
        ctx.batch, ctx.sparse = batch, sparse
        return scores

    @staticmethod
    def backward(ctx, grad):
        h, weight = ctx.saved_tensors
        batch = ctx.batch
        with threads_for(2 * batch.rows.numel() * weight.shape[1]):
            return _path_backward(ctx, grad, h, weight, batch.rows, batch.valid,
                                  lambda g, hc: row_gradient(batch.rows, batch.valid, g, hc,
                                                             weight, ctx.sparse))


def signed_log_sigmoid(scores: torch.Tensor, signs: torch.Tensor) -> torch.Tensor:
    """(N, L) log sigmoid(sign * s) where ``signs`` is not 0, else 0: the path nodes'
    log-probabilities. On the CPU, eagerly, one autograd function (``SignedLogSigmoid``), its
    backward under ``threads_for`` (``threads.py``)."""
    if scores.device.type == "cpu" and not _compiling():
        return SignedLogSigmoid.apply(scores, signs)
    return torch.where(signs != 0, F.logsigmoid(scores * signs), 0)


class SignedLogSigmoid(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores, signs):
        with threads_for(0):
            x = scores * signs
            ctx.save_for_backward(x, signs)
            return torch.where(signs != 0, F.logsigmoid(x), 0)

    @staticmethod
    def backward(ctx, grad):
        x, signs = ctx.saved_tensors
        with threads_for(0):  # d/ds log sigmoid(sign s) = sign sigmoid(-sign s); 0 at padding
            return grad * signs * torch.sigmoid(-x), None


class StaticPathScores(torch.autograd.Function):
    """The static form: every token's path padded to the tree's depth, so no shape and no loop
    depends on the batch's values (nothing is read back to the host)."""

    @staticmethod
    def forward(ctx, h, weight, rows, valid, sparse: bool):
        ct = compute_dtype(h.dtype, weight.dtype)
        N, L = rows.shape
        with torch.autocast(h.device.type, enabled=False):
            hc = h.to(ct).unsqueeze(2)
            scores = torch.empty(N, L, dtype=ct, device=h.device)
            k = _chunk(weight, L)
            for a in range(0, L, k):
                w = weight[rows[:, a:a + k]].to(ct)
                scores[:, a:a + k] = torch.bmm(w, hc).squeeze(2)
            scores = torch.where(valid, scores, 0)
        ctx.save_for_backward(h, weight, rows, valid)
        ctx.sparse = sparse
        return scores

    @staticmethod
    def backward(ctx, grad):
        h, weight, rows, valid = ctx.saved_tensors
        return _path_backward(ctx, grad, h, weight, rows, valid,
                              lambda g, hc: static_row_gradient(rows, g, hc, weight, ctx.sparse))


# -- whole distributions ---------------------------------------------------------------------------

def path_matrix(points, codes, lengths, n_out: int, n_inner: int, out_row=None, device=None,
                dtype=None) -> torch.Tensor:
    """(n_out, 2 n_inner) sparse M with log P(path) = M @ [logsigmoid(s); s] for the scores s of
    the inner nodes (rows 0 .. n_inner - 1), one output row per path (``out_row``: its row,
    default 0, 1, ...): since log sigmoid(-s) = log sigmoid(s) - s, a path node contributes
    logsigmoid(s) (+1 in the first half) and, where its code bit is 1, -s (-1 in the second).
    Half-precision ``dtype`` gives a float32 matrix (no half-precision sparse product on the
    CPU)."""
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
        return m.to(device=device, dtype=compute_dtype(dtype or torch.get_default_dtype())
                    ).to_sparse_csr()


def leaf_matrix(tree: Tree, device=None, dtype=None) -> torch.Tensor:
    """``path_matrix`` of every leaf's path: log P(w | h) for all w at once (the reference
    form; ``leaf_paths`` is the fast one)."""
    return path_matrix(tree.points, tree.codes, tree.lengths, tree.n_words, tree.n_words - 1,
                       device=device, dtype=dtype)


class LeafPaths:
    """The tree laid out for ``paths_log_prob`` top-down, level by level: inner rows in
    breadth-first order (``bfs``; level d is ``starts[d]:starts[d+1]``), for each level below
    the root its rows' parents within the level above (``parent``) and branch bits (``code``),
    and each leaf's place in [c; c - s] (``leaf``, below). Plain tensors on ``device``
    (``copy.deepcopy`` copies it), and a workspace for ``log_prob`` without autograd."""

    # elements of each of log_prob's three (V-1, rows) arrays (<= 192 MB of float32 held, as
    # used): more rows are taken in chunks, which costs (V 50k, D 512, 256 rows, 1 thread: 191
    # ms in one chunk, 262 ms in two; the (V x D) by (D x 256) product alone 153 ms)
    WORKSPACE = 1 << 24

    def __init__(self, tree: Tree, device=None):
        self._space = None
        V = tree.n_words
        parent = tree.parent.astype(np.int64)
        branch = tree.branch.astype(np.int64)
        depth = tree.node_depths()[V:].astype(np.int64)
        bfs = np.argsort(depth, kind="stable")
        place = np.empty(V - 1, np.int64)
        place[bfs] = np.arange(V - 1)
        self.starts = [int(s) for s in np.searchsorted(depth[bfs], np.arange(depth.max() + 2))]
        self.n_inner = V - 1
        self.bfs = torch.as_tensor(bfs, device=device)
        self.parent, self.code, self.child, self.child_global = [], [], [], []
        for d in range(1, len(self.starts) - 1):
            rows = bfs[self.starts[d]:self.starts[d + 1]]
            up = place[parent[V + rows] - V]           # the parents' places (level d - 1)
            bit = branch[V + rows]
            n_up = self.starts[d] - self.starts[d - 1]
            self.child.append(torch.as_tensor(up - self.starts[d - 1] + bit * n_up,
                                              device=device))
            self.child_global.append(torch.as_tensor(up + bit * (V - 1), device=device))
        # leaf w: c[parent] (bit 0) or c[parent] - s[parent] (bit 1) in the stacked [c; c - s]
        self.leaf = torch.as_tensor(place[parent[:V] - V] + branch[:V] * (V - 1), device=device)

    @property
    def device(self) -> torch.device:
        return self.bfs.device

    @property
    def dtype(self) -> None:  # the tree has no float dtype; callers keying caches on it
        return None

    def log_prob(self, h: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """(N, V) log P(w | h) for every word: with s the inner nodes' scores and c[r] =
        logP(r) + logsigmoid(s[r]) (the log-probability of r's 0-child), r's 1-child has
        c[r] - s[r] (logsigmoid(-s) = logsigmoid(s) - s): one level of gathers at a time,
        O(V N) in all (the sparse product costs O(V N depth)). The result is the transpose of
        a (V, N) array (``.contiguous()`` it for ``view``)."""
        ct = compute_dtype(h.dtype, weight.dtype)
        with torch.autocast(h.device.type, enabled=False):
            h, weight = h.to(ct), weight.to(ct)
            if _compiling() or (torch.is_grad_enabled()
                                and (h.requires_grad or weight.requires_grad)):
                s = (weight @ h.t()).index_select(0, self.bfs)  # (V-1, N), bfs order
                both = self._levels(s, F.softplus(s, beta=-1))  # softplus(beta=-1) = logsigmoid
                return both.index_select(0, self.leaf).t()
            return self._log_prob_in_place(h, weight)

    def _log_prob_in_place(self, h, weight):
        # without autograd: the (V-1, rows) arrays in a workspace kept from call to call (fresh
        # ones of ~20 MB each cost more in page faults than the arithmetic), rows in chunks
        N, n = h.shape[0], self.n_inner
        chunk = max(1, min(N, self.WORKSPACE // n))
        key = (h.device, h.dtype)
        if self._space is None or self._space[0] != key or self._space[1].numel() < 3 * n * chunk:
            self._space = (key, h.new_empty(3 * n * chunk))
        space = self._space[1]
        out = h.new_empty(self.leaf.shape[0], N)
        for a in range(0, N, chunk):
            c = min(chunk, N - a)
            s = space[:n * c].view(n, c)
            both = space[n * c:3 * n * c].view(2 * n, c)
            scores = both[n:]  # the scores in row order until the levels are written there
            torch.mm(weight, h[a:a + c].t(), out=scores)
            torch.index_select(scores, 0, self.bfs, out=s)
            self._levels_in_place(s, both)
            if c == N:
                torch.index_select(both, 0, self.leaf, out=out)
            else:
                out[:, a:a + c] = both.index_select(0, self.leaf)
        return out.t()

    def _levels(self, s, ls):
        cs, ds = [], []
        lp = None
        for d in range(len(self.starts) - 1):
            part = slice(self.starts[d], self.starts[d + 1])
            c = ls[part] if lp is None else lp + ls[part]
            cs.append(c)
            ds.append(c - s[part])
            if d < len(self.child):
                lp = torch.cat([c, ds[-1]]).index_select(0, self.child[d])
        return torch.cat(cs + ds)

    def _levels_in_place(self, s, both):
        # ``_levels`` written into ``both`` (2 (V-1), N): logsigmoid(s) first, then each level
        # adds its parents' log-probabilities
        n = self.n_inner
        try:
            torch._C._nn.softplus(s, -1.0, 20.0, out=both[:n])
        except (AttributeError, TypeError):  # pragma: no cover - a torch without it
            both[:n] = F.softplus(s, beta=-1)
        lp = None
        for d in range(len(self.starts) - 1):
            part = slice(self.starts[d], self.starts[d + 1])
            if lp is not None:
                both[part] += lp
            torch.sub(both[part], s[part], out=both[n + self.starts[d]:n + self.starts[d + 1]])
            if d < len(self.child_global):
                lp = both.index_select(0, self.child_global[d])
        return both


def leaf_paths(tree: Tree, device=None, dtype=None) -> LeafPaths:
    """``LeafPaths`` of ``tree`` (``dtype`` ignored: taken for ``leaf_matrix``'s signature)."""
    return LeafPaths(tree, device)


def paths_log_prob(h: torch.Tensor, weight: torch.Tensor, matrix) -> torch.Tensor:
    """(N, n_paths) exact log-probabilities of the paths of ``matrix``: a ``LeafPaths`` (every
    leaf, top-down) or a ``path_matrix`` (any paths: the inner nodes it uses scored once
    (h W^T), then one sparse product adds up each path). Added up in ``compute_dtype``,
    returned in the inputs' dtype."""
    out = torch.promote_types(h.dtype, weight.dtype)
    if isinstance(matrix, LeafPaths):
        return matrix.log_prob(h, weight).to(out)
    ct = compute_dtype(h.dtype, weight.dtype)
    with torch.autocast(h.device.type, enabled=False):
        s = h.to(ct) @ weight[:matrix.shape[1] // 2].to(ct).t()
        both = torch.cat([F.logsigmoid(s), s], dim=1)
        if matrix.dtype != ct:
            matrix = matrix.to(ct)
        return (matrix @ both.t()).t().to(out)
