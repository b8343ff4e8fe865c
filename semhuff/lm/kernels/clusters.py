"""The class layers' in-cluster part, log P(w | c(w), h), on every backend: the torch loop
(``clusters_torch``), the Numba kernels on the CPU (``clusters_numba``), the Triton kernels on
CUDA (``clusters_triton``); ``in_cluster_log_prob`` here picks one. A layer hands in itself: its
``cluster_of`` (word -> cluster), ``members`` / ``starts`` / ``member_starts`` (the words of
each cluster, in cluster order), ``slot`` (a word's place among its cluster's) and a
``Workspace``.
"""
from __future__ import annotations

import torch

from .clusters_torch import InClusterLogProb
from .paths import triton_wanted


@torch.compiler.disable
def in_cluster_log_prob(hw, word_weight, target, layer, sparse: bool) -> torch.Tensor:
    """log P(w | c(w), h) (N,), autocast off: on CUDA with a dense word gradient by the Triton
    kernels (``clusters_triton``: nothing read back), on the CPU in float32/64 by the Numba
    kernels (``clusters_numba``), else by ``InClusterLogProb``'s loop in the word weight's
    dtype. Run eagerly under torch.compile (one graph break, the rest of the
    model compiled): the loop's shapes are the batch's token counts per cluster, so a traced
    loop would recompile every batch."""
    with torch.autocast(hw.device.type, enabled=False):
        if target.numel() == 0:  # an empty batch: h's gradient its zero, the words' none (a
            # sparse one of no rows made from NumPy storage could not take the next batch's)
            return (hw.sum() * 0).to(word_weight.dtype).expand(0)
        if not sparse and triton_wanted(hw, word_weight):
            from .clusters_triton import triton_in_cluster
            # float32 in: fed bfloat16 in a whole LM on a GPU the kernels gave a NaN loss, which
            # the interpreter does not reproduce (docs/lm.md)
            return triton_in_cluster(hw.float(), word_weight.float(), layer.members,
                                     layer.member_starts, layer.cluster_of[target],
                                     layer.slot[target])
        hw = hw.to(word_weight.dtype)
        from .clusters_numba import numba_in_cluster, numba_wanted  # Numba: imported when used
        if numba_wanted(hw, word_weight):
            return numba_in_cluster(hw, word_weight, target, layer, sparse)
        return InClusterLogProb.apply(hw, word_weight, target, layer, sparse)
