"""The output weights' gradient of the path scores ``s[n, l] = h[n] . W[rows[n, l]]``: one
sparse (rows x tokens) by dense (tokens x D) product, returned sparse (the touched rows) or
scattered into a dense gradient. Shared by the torch forms (``paths``) and the Triton kernels
(``triton_paths``), which is why it is a module of its own."""
from __future__ import annotations

import warnings

import torch


def row_gradient(rows, valid, grad, h, weight, sparse: bool) -> torch.Tensor:
    """d loss / d weight for scores s[n, l] = h[n] . weight[rows[n, l]] with d loss / d s =
    ``grad``: sum over the pairs of grad x h[n] per row, for the touched rows only (bucketed
    form: ``torch.unique`` reads back their number)."""
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
    values = (pairs @ h).to(weight.dtype)
    if sparse:
        return torch.sparse_coo_tensor(touched.unsqueeze(0), values, weight.shape,
                                       is_coalesced=True, check_invariants=False)
    return weight.new_zeros(weight.shape).index_copy_(0, touched, values)


def static_row_gradient(rows, grad, h, weight, sparse: bool) -> torch.Tensor:
    """``row_gradient`` with shapes fixed by (N, L) alone. Dense: one (V-1 x N) CSR product
    whose N L entries include the padding (value 0). Sparse: an uncoalesced COO tensor of the N
    L outer products (optimizers coalesce it); padding adds 0 to the root's row (``path_buffers``),
    which every path touches anyway."""
    N, L = rows.shape
    flat = rows.reshape(-1)
    if sparse:
        values = (grad.unsqueeze(2) * h.unsqueeze(1)).reshape(N * L, -1).to(weight.dtype)
        return torch.sparse_coo_tensor(flat.unsqueeze(0), values, weight.shape,
                                       check_invariants=False)
    order = torch.argsort(flat, stable=True)
    counts = torch.zeros(weight.shape[0], dtype=torch.int64, device=rows.device)
    counts.index_add_(0, flat, torch.ones_like(flat))  # bincount's size would need a read-back
    crow = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    token = torch.div(order, L, rounding_mode="floor")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        pairs = torch.sparse_csr_tensor(crow, token, grad.reshape(-1)[order],
                                        (weight.shape[0], N), check_invariants=False)
    return (pairs @ h).to(weight.dtype)
