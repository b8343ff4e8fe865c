"""Small helpers for messages a person reads."""
from __future__ import annotations


def counted(n: int, noun: str, plural: str = "") -> str:
    """``1 epoch``, ``2 epochs``, ``1,000 words`` (``plural``: when not ``noun + "s"``)."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
