"""The dtypes the layers and their kernels add up in: log-probabilities in float32 when the
weights or the input are bfloat16 / float16 (or under ``torch.autocast``), float64 for float64."""
from __future__ import annotations

import torch

LOW_PRECISION = (torch.float16, torch.bfloat16)


def accumulate_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """The dtype to add up log-probabilities in: float32 for half types, else the widest."""
    wide = [d for d in dtypes if d not in LOW_PRECISION]
    if not wide:
        return torch.float32
    return torch.float64 if torch.float64 in wide else wide[0]
