"""A flat softmax over the most frequent words and a few tail entries, the other words in trees
below those entries (issue 45): the adaptive softmax's head, with the tree softmax's O(log V)
for the rest.

    P(w | h) = softmax(T h)[e(w)] * prod over w's path below e(w) of sigmoid(+-h . W[node])

The top has one entry per head word (the ``head`` most frequent words, or the fewest covering
``coverage`` of the tokens) and ``tail_entries`` entries for the other words, each the root of
a subtree: the tree ``tree`` (any builder: Huffman, SemHuff, ...) built over the whole
vocabulary, the head words cut out (``trees.subtrees.restrict``: the tail words keep the
groupings they had), then split at its top into its ``tail_entries`` heaviest subtrees
(``frontier``): the tree's first binary decisions become one flat softmax. With ``head=0`` and
many entries it is a two-level softmax whose clusters are the tree's top subtrees and whose
in-cluster part is a small tree (``class-tree`` in ``class_tree.py`` is the same layer over
fixed clusters).

One structure serves every variant (``HeadTreeSoftmax.__init__``): a binary ``Tree`` over all
V words (the head words in a Huffman tree of their own, joined to the tail's: those rows are
never used), and per word its top entry ``entry[w]`` and ``cut[w]``, how many of its path's
first nodes the top replaces; a word's path below that is scored by the tree softmax's
kernels (``kernels/paths.py``: the path scores, their row-wise gradient, ``sparse``), a head
word's path is empty. The words of an entry must be exactly the leaves of the node ``cut``
levels down their paths (checked), so the probabilities sum to 1.

Cost a token: the top's E = K + T dot products (the adaptive softmax's head is its cost too)
and ~log2(tail subtree) rows for a tail token only.
"""
from __future__ import annotations

import math
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...errors import OptionError, TreeError
from ...options import Option, boolean, positive_int, share
from ...trees.base import Tree
from ...trees.clusters import subtree_roots
from ...trees.spec import SIMILARITY, TREE, relabel_leaves
from ...trees.subtrees import frontier, join, restrict, subtree_mass
from ..kernels.paths import PathBatch, Workspace, path_matrix, path_scores, \
    paths_log_prob
from ..kernels.precision import accumulate_dtype
from ..kernels.threads import small_work
from .base import LOSS_OPTIONS, SPARSE, Cache, LMOutputLayer
from .tree import TreeSoftmax, carried_rows, start_tree_layer, synced, tree_for

HEAD = Option("head", int, None, "words with an entry of their own in the flat top, the most "
              "frequent (default: 2%% of V; head-tree: see --coverage; 0: none)",
              metavar="WORDS",
              check=lambda v: None if isinstance(v, int) and not isinstance(v, bool) and v >= 0
              else "must be an integer >= 0")
COVERAGE = Option("coverage", float, None, "the head: the fewest most frequent words whose "
                  "share of the training tokens reaches this (instead of --head)", check=share)
TAIL_ENTRIES = Option("tail_entries", int, 1, "entries of the flat top that each hold a subtree "
                      "of the other words (the tree's top subtrees)", metavar="N",
                      check=positive_int)
TOP_BIAS = Option("head_bias", boolean, False, "a bias in the head")  # the adaptive softmax's
# the adaptive softmax's tails score in a space div_value times smaller than the input: fewer
# parameters for the rare words (candidate (d) of issue 45: the trees' rows overfit more)
TAIL_DIM = Option("tail_dim", int, None, "the tree rows' size: the input projected to it "
                  "below the flat top, as the adaptive softmax's tails (default: the input's)",
                  metavar="DIM", check=positive_int)


def own_settings(settings: dict) -> dict:
    """Pop the layer's own settings (the rest are the tree builder's)."""
    return {k: settings.pop(k) for k in ("sparse", "head_bias", "ignore_index", "reduction",
                                         "tail_dim") if k in settings}


def head_size(counts, head: Optional[int], coverage: Optional[float]) -> int:
    """The number of head words: ``head``, or the fewest most frequent words holding
    ``coverage`` of the tokens, or 2% of V (rounded; the adaptive softmax's default head is 4%:
    half its cost, docs/lm.md)."""
    counts = np.asarray(counts, np.float64)
    if head is not None and coverage is not None:
        raise OptionError("give head (words) or coverage (a share of the tokens), not both")
    if coverage is not None:
        share_ = np.cumsum(np.sort(counts)[::-1]) / max(counts.sum(), 1.0)
        head = int(np.searchsorted(share_, coverage - 1e-12) + 1)
    elif head is None:
        head = int(round(0.02 * counts.size))
    if head >= counts.size:
        raise OptionError(f"the head ({head:,} words) must leave words for the tail (V = "
                          f"{counts.size:,})")
    return head


def head_and_tail(counts, head: int):
    """(the ``head`` most frequent word ids, most frequent first, ties by id; the others in id
    order)."""
    order = np.argsort(-np.asarray(counts), kind="stable")
    return order[:head], np.sort(order[head:])


def head_structure(tree: Tree, counts, head: int, tail_entries: int
                   ) -> Tuple[Tree, np.ndarray, np.ndarray]:
    """(the layer's tree over all words, each word's top entry, each word's cut): the ``head``
    most frequent words (ties by id) entries 0..head-1, in a Huffman tree of their own; the
    others in ``tree`` restricted to them, split into ``tail_entries`` top subtrees (entries
    head..)."""
    counts = np.asarray(counts, np.int64)
    V = counts.size
    heads, tails = head_and_tail(counts, head)
    if not 1 <= tail_entries <= tails.size:
        raise OptionError(f"tail_entries must be in 1..{tails.size:,} (the tail's words), got "
                          f"{tail_entries}")
    kind = tree.kind
    tail_tree = tree if head == 0 else restrict(tree, tails, kind=kind)
    group, depth = frontier(tail_tree, np.maximum(counts[tails], 1), tail_entries)
    entry = np.empty(V, np.int64)
    cut = np.empty(V, np.int64)
    if head == 0:
        return Tree(tree.parent, tree.branch, kind=kind), group, depth
    from ...trees.huffman import build_huffman  # here: it loads Numba, `import semhuff.lm` must not
    joined = join(build_huffman(counts[heads]), tail_tree, kind=kind)
    joined = relabel_leaves(joined, np.concatenate([heads, tails]))
    entry[heads] = np.arange(head)
    cut[heads] = joined.lengths[heads]
    entry[tails] = head + group
    cut[tails] = depth + 1  # below the new root
    return joined, entry, cut


def entry_nodes(tree: Tree, entry: np.ndarray, cut: np.ndarray, n_entries: int) -> np.ndarray:
    """(n_entries,) the tree node each entry stands for: its words' ancestor ``cut`` levels
    below the root (a word itself where the cut is its whole path: a head word, a one-word
    entry); -1 for an entry without words (masked out of the top: never drawn)."""
    node = np.arange(tree.n_words, dtype=np.int64)
    up = tree.lengths.astype(np.int64) - np.asarray(cut, np.int64)  # levels above the word
    parent = tree.parent.astype(np.int64)
    for k in range(int(up.max(initial=0))):
        node = np.where(up > k, parent[node], node)
    out = np.full(n_entries, -1, np.int64)
    out[np.asarray(entry, np.int64)] = node
    return out


def check_structure(tree: Tree, entry: np.ndarray, cut: np.ndarray,
                    n_entries: Optional[int] = None) -> int:
    """The number of entries, or an ``OptionError`` unless the words of each entry are exactly
    the leaves of one node, ``cut`` levels down each of their paths (so that the layer's
    probabilities sum to 1). ``n_entries``: the top's size, where entries may be empty (a
    re-assignment can leave a cluster without words: the top masks it); else every entry
    ``0..entry.max()`` must hold a word."""
    V = tree.n_words
    try:
        tree.validate()
    except TreeError as exc:
        raise OptionError(f"not a usable tree: {exc}") from None
    if entry.shape != (V,) or cut.shape != (V,):
        raise OptionError(f"entry and cut need one value per word ({V:,})")
    lengths = tree.lengths.astype(np.int64)
    if entry.min() < 0 or np.any(cut < 0) or np.any(cut > lengths):
        raise OptionError("entries are >= 0 and a word's cut at most its path's length")
    n = int(entry.max()) + 1 if n_entries is None else int(n_entries)
    if entry.max() >= n:
        raise OptionError(f"entries must be in 0..{n - 1}")
    sizes = np.bincount(entry, minlength=n)
    if n_entries is None and np.any(sizes == 0):
        raise OptionError(f"entries 0..{n - 1} must each hold a word")
    roots = subtree_roots(tree.parent, lengths.astype(np.int32), cut.astype(np.int32))
    first_root = np.full(n, -1, np.int64)
    first_root[entry[::-1]] = roots[::-1]
    leaves = subtree_mass(tree, np.ones(V))
    held = sizes > 0
    if np.any(roots != first_root[entry]) or np.any(leaves[first_root[held]] != sizes[held]):
        raise OptionError("the words of an entry must be exactly the leaves of one subtree")
    return n


def shifted_paths(tree: Tree, cut: np.ndarray):
    """(points, codes, lengths) of each word's path below its cut (numpy, padded with row 0 and
    code 0)."""
    lengths = tree.lengths.astype(np.int64) - cut
    depth = max(int(lengths.max()), 1)
    col = cut[:, None] + np.arange(depth)[None, :]
    valid = np.arange(depth)[None, :] < lengths[:, None]
    col = np.minimum(col, tree.points.shape[1] - 1)
    points = np.where(valid, np.take_along_axis(tree.points, col, 1), 0).astype(np.int64)
    codes = np.where(valid, np.take_along_axis(tree.codes, col, 1), 0).astype(np.int8)
    return points, codes, lengths


class HeadTreeSoftmax(LMOutputLayer):
    """A flat top over ``entry.max() + 1`` entries and ``tree``'s paths below each word's cut
    (see the module's docstring). ``sparse``: the tree rows' gradient is sparse (the rows the
    batch touched); the top's is dense. The tree rows start at zero (every word of a subtree
    equally likely), the top as ``nn.Linear``. ``ignore_index``, ``reduction``: as
    ``torch.nn.CrossEntropyLoss``'s (``base.py``)."""

    OPTIONS = LOSS_OPTIONS + (HEAD, COVERAGE, TAIL_ENTRIES, TREE, SIMILARITY, TOP_BIAS,
                              TAIL_DIM, SPARSE)

    @classmethod
    def declared_options(cls):
        from ...trees import tree_builder_options
        return cls.OPTIONS + tree_builder_options()

    # a state holds the whole structure: the tree layer's rule (no tree builder's settings
    # needed to load it: a SemHuff layer loads without its similarity data)
    settings_for_state = classmethod(TreeSoftmax.settings_for_state.__func__)

    @classmethod
    def from_vocab(cls, in_features, vocab, *, seed=1, device=None, dtype=None, head=None,
                   coverage=None, tail_entries=1, tree=None, similarity=None, **settings):
        own = own_settings(settings)  # the rest are the tree builder's
        counts = np.asarray(vocab.counts, np.int64)
        k = head_size(counts, head, coverage)
        full = tree_for(tree, vocab, similarity, seed, settings)
        structure = head_structure(full, counts, k, tail_entries)
        return cls(in_features, *structure, counts=counts, head_words=k, device=device,
                   dtype=dtype, **own)

    def __init__(self, in_features: int, tree: Tree, entry, cut, counts=None,
                 head_words: int = 0, n_entries: Optional[int] = None, head_bias: bool = False,
                 sparse: bool = False, device=None, dtype=None, ignore_index: int = -100,
                 reduction: str = "mean", tail_dim: Optional[int] = None):
        super().__init__()
        if tail_dim is not None and (positive_int(tail_dim) or tail_dim > in_features):
            raise OptionError(f"tail_dim must be an integer in 1..{in_features} (the input's "
                              f"size), got {tail_dim!r}")
        start_tree_layer(self, in_features, tree, sparse, ignore_index, reduction, device, dtype,
                         row_features=tail_dim)
        # h -> the rows' space, bias-free as the adaptive softmax's tail projections
        self.tail_proj = None if tail_dim is None or tail_dim == self.in_features else \
            nn.Linear(self.in_features, tail_dim, bias=False, device=device, dtype=dtype)
        entry, cut = np.asarray(entry, np.int64), np.asarray(cut, np.int64)
        n_entries = check_structure(tree, entry, cut, n_entries)
        self.head_words = int(head_words)  # entries 0..head_words-1, a word each
        self.top = nn.Linear(self.in_features, n_entries, bias=bool(head_bias), device=device,
                             dtype=dtype)
        V = tree.n_words
        for name in ("entry", "cut"):
            self.register_buffer(name, torch.empty(V, dtype=torch.int64, device=device))
        counts = np.ones(V, np.int64) if counts is None else np.asarray(counts, np.int64)
        if counts.shape != (V,) or np.any(counts < 0):  # retree and describe weigh words by them
            raise OptionError(f"counts must be {V:,} integers >= 0 (one a word)")
        self.register_buffer("counts", torch.as_tensor(counts, device=device))
        self._workspace = Workspace()
        self._cache = Cache()  # log_prob's path matrix, by device
        self.set_structure(tree, entry, cut)

    @property
    def weight(self) -> nn.Parameter:
        """(V - 1, D): row i is inner node V + i of ``tree``."""
        return self.rows.weight

    @property
    def n_entries(self) -> int:
        return self.top.out_features

    # -- the structure ---------------------------------------------------------------------------
    def set_structure(self, tree: Tree, entry, cut) -> None:
        entry, cut = np.asarray(entry, np.int64), np.asarray(cut, np.int64)
        check_structure(tree, entry, cut, self.n_entries)
        for name, value in (("tree_parent", tree.parent), ("tree_branch", tree.branch),
                            ("entry", entry), ("cut", cut)):
            getattr(self, name).copy_(torch.as_tensor(value.astype(
                np.int8 if name == "tree_branch" else np.int64)))
        self._adopt(tree, entry, cut)

    def _adopt(self, tree: Tree, entry: np.ndarray, cut: np.ndarray) -> None:
        """The structure (already in the buffers) and what derives from it: each word's path
        below its cut and the empty entries, plain tensors moved by ``_apply``, not buffers
        (as ``TreeSoftmax``'s paths: a copy of the buffers, e.g. an EMA's by ``AveragedModel``,
        must not meet paths of another depth; ``_sync`` re-derives them)."""
        self._tree = tree
        points, codes, lengths = shifted_paths(tree, cut)
        device = self.weight.device
        self._points = torch.as_tensor(points, device=device)
        self._signs = torch.as_tensor(np.where(np.arange(points.shape[1])[None, :]
                                               < lengths[:, None], 1.0 - 2.0 * codes, 0.0),
                                      dtype=self.weight.dtype, device=device)
        self._lengths = torch.as_tensor(lengths, device=device)
        empty = np.bincount(entry, minlength=self.n_entries) == 0
        self._empty = torch.as_tensor(empty, device=device)
        self._masked = bool(empty.any())
        self._paths = (points, codes, lengths)
        self._cache.clear()
        self._structure = self._structure_key()

    def _structure_key(self):
        return tuple((b._version, b.data_ptr())
                     for b in (self.tree_parent, self.tree_branch, self.entry, self.cut))

    def _sync(self) -> None:
        """Re-derive the structure when its buffers were written from outside since (an EMA's
        copy of the buffers after a re-assignment). Not while compiling."""
        if torch.compiler.is_compiling() or self._structure == self._structure_key():
            return
        tree = Tree(self.tree_parent.cpu().numpy(), self.tree_branch.cpu().numpy(),
                    kind=getattr(self, "_loaded_kind", self._tree.kind))
        entry, cut = self.entry.cpu().numpy(), self.cut.cpu().numpy()
        try:
            check_structure(tree, entry, cut, self.n_entries)
        except OptionError as exc:
            raise OptionError(f"the layer's structure buffers no longer hold a structure "
                              f"({exc}): were they averaged (AveragedModel(use_buffers=True))? "
                              f"Copy them (use_buffers=False, the default)") from None
        self._adopt(tree, entry, cut)

    tree = synced("_tree")
    points = synced("_points", "(V, depth) each word's path rows below its cut, padded with "
                    "row 0.")
    signs = synced("_signs")
    lengths = synced("_lengths")
    empty = synced("_empty", "(entries,) True for an entry without words.")

    def _apply(self, fn, *args, **kwargs):
        super()._apply(fn, *args, **kwargs)  # the derived tensors follow the weight
        self._points, self._signs, self._lengths, self._empty = (
            fn(self._points), fn(self._signs), fn(self._lengths), fn(self._empty))
        self._cache.clear()
        self._structure = self._structure_key()  # the buffers moved, the structure is the same
        return self

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        if prefix + "tree_parent" in state_dict:
            tree = Tree(self.tree_parent.cpu().numpy(), self.tree_branch.cpu().numpy(),
                        kind=getattr(self, "_loaded_kind", "loaded"))
            self.set_structure(tree, self.entry.cpu().numpy(), self.cut.cpu().numpy())

    def get_extra_state(self):
        return {"kind": self.tree.kind, "head_words": self.head_words}

    def set_extra_state(self, state):
        self._loaded_kind = state.get("kind", "loaded")  # applied when the tree arrays load
        self.head_words = int(state.get("head_words", self.head_words))

    @torch.no_grad()
    def retree(self, tree: Tree, counts, optimizer: Optional[torch.optim.Optimizer] = None
               ) -> None:
        """Go on over ``tree`` (a tree over every word, e.g. SemHuff from the network's own
        vectors: ``semhuff-lm --retree-every``): the same head, the tail re-cut from ``tree``;
        the rows carried over word by word (``tree.carried_rows``), each tail entry's top row
        (and bias) the count-weighted mean of its words' former entries', Adagrad's sums of the
        rows restarted."""
        from ..kernels.optimizer_state import remap_optimizer_state
        if tree.n_words != self.n_classes:  # a larger tree would be cut to the layer's ids
            raise OptionError(f"the tree has {tree.n_words:,} leaves, the layer "
                              f"{self.n_classes:,}")
        counts = np.asarray(counts, np.int64)
        new = head_structure(tree, counts, self.head_words, self.n_entries - self.head_words)
        rows = carried_rows(self.tree, new[0], self.weight, torch.as_tensor(counts))
        self.weight.copy_(rows.to(self.weight.dtype))
        self.weight.grad = None
        remap_optimizer_state(optimizer, self.weight,
                              torch.full((self.weight.shape[0],), -1, dtype=torch.long),
                              torch.ones(self.weight.shape[0]))
        old_entry = self.entry
        new_entry = torch.as_tensor(new[1], device=old_entry.device)
        # in float64: counts beyond float16's range (65,504) made inf / inf of the means
        c = self.counts.to(torch.float64).clamp_min(1).unsqueeze(1)
        mass = torch.zeros(self.n_entries, 1, dtype=c.dtype, device=c.device).index_add_(
            0, new_entry, c)
        keep_head = torch.arange(self.n_entries, device=c.device)
        keep_head[self.head_words:] = -1
        for p in (self.top.weight, self.top.bias):  # the bias follows its row
            if p is None:
                continue
            rows = p.view(self.n_entries, -1)
            sums = torch.zeros(rows.shape, dtype=c.dtype, device=c.device).index_add_(
                0, new_entry, c * rows[old_entry].to(c.dtype))
            rows.copy_((sums / mass).to(rows.dtype))
            # the optimizer's state follows: a head entry is the same word's, a tail entry's
            # row a blend of former entries' and restarts, as the tree rows'
            remap_optimizer_state(optimizer, p, keep_head, torch.ones(self.n_entries))
        self.set_structure(*new)

    # -- probabilities ---------------------------------------------------------------------------
    def _top_logits(self, h):
        """The top's logits, an entry without words (``n_entries``) masked out."""
        logits = self.top(h)
        return self._mask_empty(logits.to(accumulate_dtype(logits.dtype)))

    def _mask_empty(self, logits):
        empty = self.empty  # first: it syncs ``_masked``
        return logits.masked_fill(empty, -math.inf) if self._masked else logits

    def tail_input(self, h, dtype):
        """The input in the tree rows' space (``tail_dim``), in ``dtype``: projected, or ``h``
        itself."""
        h = h.to(dtype)
        return h if self.tail_proj is None else F.linear(h, self.tail_proj.weight.to(dtype))

    def path_log_prob(self, h, target) -> torch.Tensor:
        """(N,) log-probability of each target's path below its entry (0 for a head word)."""
        # a small step on fewer threads, as the tree layer's (kernels/threads.py)
        with small_work(h, target.numel() * self.points.shape[1] * self.weight.shape[1]):
            batch = PathBatch.gather(self.points, self.signs, self.lengths, target)
            if batch.buckets == []:  # head words only (their paths are empty): no row is
                # scored, yet the rows take part (a sum over none of them, their gradient
                # zero, sparse if asked): DDP, told that every parameter is used, waits for it
                acc = accumulate_dtype(h.dtype, self.weight.dtype)
                none = F.embedding(target[:0], self.weight, sparse=self.sparse).sum()
                if self.tail_proj is not None:
                    none = none + self.tail_proj(h[:0]).sum()
                return h.new_zeros(h.shape[0], dtype=acc) + none.to(acc)
            with torch.autocast(h.device.type, enabled=False):
                scores = path_scores(self.tail_input(h, self.weight.dtype), self.weight, batch,
                                     self.sparse, self._workspace)
            scores = scores.to(accumulate_dtype(scores.dtype))
            nodes = torch.where(batch.valid,
                                F.logsigmoid(scores * batch.signs.to(scores.dtype)), 0)
            return nodes.sum(dim=1)

    def cluster_log_prob(self, h, target):
        """log P(entry(w) | h): the top's part (a head word's whole probability)."""
        return -F.cross_entropy(self._top_logits(h), self.entry[target], reduction="none")

    def target_log_prob(self, h, target, keep=None):
        return self.cluster_log_prob(h, target) + self.path_log_prob(h, target)

    def full_log_prob(self, h):
        acc = accumulate_dtype(h.dtype, self.weight.dtype)
        top = torch.log_softmax(self._top_logits(h), dim=1)  # syncs the structure first
        paths = self._cache.derived(("paths", acc), self.weight.device, lambda device:
                                    path_matrix(*self._paths, self.n_classes,
                                                self.n_classes - 1, device=device, dtype=acc))
        with torch.autocast(h.device.type, enabled=False):
            below = paths_log_prob(self.tail_input(h, acc), self.weight.to(acc), paths)
        return top.index_select(1, self.entry).to(acc) + below.to(acc)

    # -- generation ------------------------------------------------------------------------
    def _walk(self):
        """(``TreeWalk`` of the tree, each entry's node: ``entry_nodes``) on the rows'
        device, made once a structure."""
        from ..kernels.tree_search import TreeWalk
        return self._cache.derived("walk", self.weight.device, lambda device: (
            TreeWalk(self.tree, device),
            torch.as_tensor(entry_nodes(self.tree, self.entry.cpu().numpy(),
                                        self.cut.cpu().numpy(), self.n_entries), device=device)))

    def search_topk(self, h, k):
        """The ``k`` best words by a search from the entries down their subtrees
        (``beam_topk`` begun at the entries, a beam of max(2k + 8, 64)): a row the beam could
        not settle is marked for its whole distribution (``Generation._exact_topk``)."""
        from ..kernels.tree_search import beam_topk
        top = torch.log_softmax(self._top_logits(h), dim=1)  # syncs the structure
        walk, nodes = self._walk()
        with torch.autocast(h.device.type, enabled=False):
            return beam_topk(self.tail_input(h, self.weight.dtype), self.weight.detach(), walk,
                             k, beam=max(2 * k + 8, 64), start=nodes, start_lp=top)

    def walk_sample(self, h, generator=None):
        """A word a row drawn exactly without the whole distribution: its entry from the flat
        top (a softmax over the entries), then down the entry's subtree one binary draw a level
        (``kernels/tree_search.walk_sample`` from the entry's node): ~entries + depth dot
        products a row, where ``full_log_prob`` costs V. Temperature 1 and nothing cut
        (``Generation._sample`` decides)."""
        from ..kernels.tree_search import walk_sample
        top = torch.softmax(self._top_logits(h), dim=1)  # syncs the structure first
        entry = torch.multinomial(top, 1, generator=generator).squeeze(1)
        walk, nodes = self._walk()
        with torch.autocast(h.device.type, enabled=False):
            return walk_sample(self.tail_input(h, self.weight.dtype), self.weight.detach(), walk,
                               generator, start=nodes[entry])

    def sparse_parameters(self) -> list:
        return [self.weight] if self.sparse else []

    def describe(self) -> str:
        self._sync()
        lengths = self._paths[2]
        counts = self.counts.cpu().numpy().astype(np.float64)
        entry = self.entry.cpu().numpy()
        single = (np.bincount(entry, minlength=self.n_entries) == 1)[entry]
        share_ = counts[single].sum() / max(counts.sum(), 1.0)
        below = lengths > 0
        mean = float((counts[below] * lengths[below]).sum() / max(counts[below].sum(), 1.0))
        return (f"a flat softmax over {self.n_entries:,} entries ({int(single.sum()):,} of them "
                f"single words, {100 * share_:.1f}% of the tokens; the others subtrees of a "
                f"{self.tree.kind} tree over {self.n_classes:,} words, {mean:.1f} nodes below "
                f"the entry on average; {'sparse' if self.sparse else 'dense'} row gradient, "
                f"{self.in_features} inputs"
                f"{'' if self.tail_proj is None else f', rows of {self.weight.shape[1]}'})")
