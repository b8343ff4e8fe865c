"""The class layers' in-cluster part in torch operations (``InClusterLogProb``), the form every
device runs (``clusters.in_cluster_log_prob`` picks it where no kernel of its own applies).

The torch loop computes the within-cluster softmax cluster by cluster for the clusters present in
the batch: all tokens of cluster c against the m_c word vectors of c in one matrix product.
Padding every token to the largest cluster and gathering its members' rows per token, the
alternative, copies N x max m x D numbers (1.7 GB at V = 50k, D = 512, 2,560 tokens and gamma
sqrt(V) = 336 words a cluster; frequency binning's rare-word clusters hold thousands), against
at most V x D when the rows are gathered once per cluster. The loop runs over clusters (~sqrt
V), never over words or tokens, and needs the batch's clusters and their token counts on the
host: one read-back a batch (one ``tolist``; on an accelerator one wait, and ~C small kernels
each way), which the Triton kernels avoid. Under torch.compile the loop runs eagerly (one graph
break, the cluster softmax and the network compiled), since traced, its shapes would recompile
the graph every batch.
"""
from __future__ import annotations

import torch

from .precision import accumulate_dtype


def tokens_by_cluster(layer, target):
    """(the tokens' order sorted by cluster, the clusters present (sorted), their token
    counts): the layout both in-cluster forms (the loop, the Numba kernels) work in."""
    cluster = layer.cluster_of[target]
    order = torch.argsort(cluster, stable=True)
    present, n_tokens = torch.unique_consecutive(cluster[order], return_counts=True)
    return order, present, n_tokens


class InClusterLogProb(torch.autograd.Function):
    """log P(w | c(w), h) for each token: per cluster present in the batch, its tokens against
    its words in one matrix product. Everything the loop touches is laid out once per batch in
    cluster order (the tokens' inputs, the present clusters' word rows), so that inside the loop
    a cluster's part is a slice, not a gather. The word rows (~V x D: nearly every cluster is in
    a batch of thousands of tokens) go to a workspace reused from call to call, gathered again
    in backward rather than kept (a fresh ~100 MB array costs its page faults every batch)."""

    @staticmethod
    def forward(ctx, hw, word_weight, target, layer, sparse: bool):
        order, present, n_tokens = tokens_by_cluster(layer, target)
        present, n_tokens = torch.stack([present, n_tokens]).tolist()  # the batch's one sync
        starts = layer.starts
        words = torch.cat([layer.members[starts[c]:starts[c + 1]] for c in present])
        rows = torch.index_select(word_weight, 0, words,
                                  out=layer._workspace.take(words.numel(), word_weight))
        h_sorted = hw[order]
        at = layer.slot[target[order]]
        acc = accumulate_dtype(hw.dtype)  # log-softmaxes of half-precision products in float32
        out_sorted = hw.new_empty(target.shape[0], dtype=acc)
        probs = []
        t0 = r0 = 0
        for c, n in zip(present, n_tokens):
            m = starts[c + 1] - starts[c]
            logp = torch.log_softmax((h_sorted[t0:t0 + n] @ rows[r0:r0 + m].t()).to(acc), dim=1)
            out_sorted[t0:t0 + n] = logp.gather(1, at[t0:t0 + n].unsqueeze(1)).squeeze(1)
            probs.append(logp.exp_())
            t0, r0 = t0 + n, r0 + m
        ctx.save_for_backward(h_sorted, word_weight, words, order, at)
        ctx.sparse, ctx.probs, ctx.workspace = sparse, probs, layer._workspace
        out = torch.empty_like(out_sorted)
        out[order] = out_sorted
        return out

    @staticmethod
    def backward(ctx, grad):
        h_sorted, word_weight, words, order, at = ctx.saved_tensors
        rows = torch.index_select(word_weight, 0, words,
                                  out=ctx.workspace.take(words.numel(), word_weight))
        grad_sorted = grad[order]
        grad_h_sorted = torch.empty_like(h_sorted)
        grad_rows = torch.empty_like(rows) if ctx.needs_input_grad[1] else None
        t0 = r0 = 0
        for prob in ctx.probs:
            n, m = prob.shape
            g = grad_sorted[t0:t0 + n].unsqueeze(1)
            dlogits = prob * -g  # d log_softmax[at] / d logits = onehot(at) - softmax
            dlogits.scatter_add_(1, at[t0:t0 + n].unsqueeze(1), g)
            dlogits = dlogits.to(rows.dtype)
            torch.mm(dlogits, rows[r0:r0 + m], out=grad_h_sorted[t0:t0 + n])
            if grad_rows is not None:
                torch.mm(dlogits.t(), h_sorted[t0:t0 + n], out=grad_rows[r0:r0 + m])
            t0, r0 = t0 + n, r0 + m
        grad_h = torch.empty_like(grad_h_sorted)
        grad_h[order] = grad_h_sorted
        grad_w = None
        if grad_rows is not None:  # each word is in one cluster: the rows are distinct
            if ctx.sparse:  # uncoalesced: sorting ~V rows here would only copy them again
                grad_w = torch.sparse_coo_tensor(words.unsqueeze(0), grad_rows, word_weight.shape,
                                                 check_invariants=False)
            else:
                grad_w = word_weight.new_zeros(word_weight.shape).index_copy_(0, words, grad_rows)
        return grad_h, grad_w, None, None, None
