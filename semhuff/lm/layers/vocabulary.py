"""The vocabulary an LM output layer is made for: a ``semhuff.vocab.Vocab`` (word i = id i) or
``counts=`` (one count per id, in *your* id order: ``make_output_layer("tree", H,
counts=counts)`` is the one-line swap for ``AdaptiveLogSoftmaxWithLoss(H, V, cutoffs)``). Ids
need not be frequency sorted: the tree and class layers build over the sorted order and relabel
to yours (word w gets the code it has in the sorted vocabulary); the layers that need sorted ids
(the adaptive softmax's cutoffs are id ranges, the self-organized layers) say so in one line
(``require_frequency_order``). Every layer ``make_output_layer`` makes carries a fingerprint of
its vocabulary in its ``state_dict`` (``vocab_fingerprint``: the size, the words when known, the
counts), and loading a state made for another vocabulary is a one-line ``OptionError``. A count
of 0 (an id never seen in the counted text) is taken as 1 (``with_unseen_counted``).
"""
from __future__ import annotations

import hashlib
import logging

import numpy as np
import torch
from torch import nn

from ...errors import OptionError
from ...options import is_integer

logger = logging.getLogger(__name__)


def as_vocab(vocab, counts):
    """(a ``Vocab`` in the caller's id order, whether its words are real) from
    ``make_output_layer``'s ``vocab`` / ``counts``."""
    from ...vocab import Vocab
    if is_integer(vocab) or isinstance(vocab, np.integer):
        raise OptionError(f"vocab={vocab}: the layers need each word's count, not only their "
                          f"number: give counts= (one count per word id, e.g. "
                          f"torch.bincount(train_ids)) or a semhuff Vocab")
    if vocab is not None and counts is not None:
        raise OptionError("give vocab= (a semhuff Vocab) or counts= (one count per word id), "
                          "not both")
    if vocab is None and counts is None:
        raise OptionError("an output layer needs the vocabulary: vocab= (a semhuff Vocab) or "
                          "counts= (one count per word id)")
    if counts is None:
        if not (hasattr(vocab, "words") and hasattr(vocab, "counts")):
            raise OptionError(f"vocab must be a semhuff Vocab (words and counts), got "
                              f"{type(vocab).__name__}; or give counts=")
        if len(vocab.words) != len(vocab.counts):
            raise OptionError(f"the vocabulary has {len(vocab.words):,} words but "
                              f"{len(vocab.counts):,} counts")
        return with_unseen_counted(vocab), True
    if torch.is_tensor(counts):
        counts = counts.detach().cpu().numpy()
    array = np.asarray(counts)
    if array.ndim != 1 or array.size < 2 or not (np.issubdtype(array.dtype, np.integer) or (
            np.issubdtype(array.dtype, np.floating) and np.all(np.isfinite(array))
            and np.all(array == np.round(array)))):
        raise OptionError("counts must be one whole count per word id (2 words or more), e.g. "
                          "torch.bincount(train_ids, minlength=V)")
    if np.any(array < 0):
        raise OptionError("counts must be >= 0")
    array = array.astype(np.int64)
    return with_unseen_counted(Vocab([f"#{i}" for i in range(array.size)], array,
                                     int(array.sum()))), False


def with_unseen_counted(vocab):
    """``vocab`` with every count of 0 taken as 1 (logged). A word never seen (the ids
    ``torch.bincount(train_ids, minlength=V)`` leaves at 0) would otherwise weigh nothing: a
    Huffman tree over thousands of zeros is a chain thousands deep (average depth 2,042 at V 5k
    with 4,500 zeros, a step 100x slower), a frequency bin or a self-organized cluster takes
    them all. As a word seen once, each gets a path of a rare word's length."""
    counts = np.asarray(vocab.counts)
    zeros = int(np.sum(counts == 0))
    if not zeros:
        return vocab
    from ...vocab import Vocab
    logger.info("%d of %d word ids have count 0: each taken as 1 (a word seen once)", zeros,
                counts.size)
    counts = np.maximum(counts, 1).astype(np.int64)
    return Vocab(list(vocab.words), counts, int(counts.sum()))


def require_frequency_order(vocab, what: str) -> None:
    """A one-line error unless the ids are in descending order of count (for layers whose
    structure is id ranges)."""
    from ...vocab import frequency_order
    if frequency_order(vocab.counts) is not None:
        raise OptionError(f"{what} needs word ids in descending order of count (a semhuff "
                          f"Vocab's order); renumber the words, or use the tree or class layer, "
                          f"which take any id order")


def _digest(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little", signed=True)


def vocabulary_fingerprint(vocab, words_known: bool = True) -> torch.Tensor:
    """(V, hash of the words or 0 when unknown, hash of the counts) as an int64 tensor."""
    words = (_digest("\n".join(vocab.words).encode("utf-8", "surrogatepass")) or 1
             if words_known else 0)
    counts = _digest(np.ascontiguousarray(vocab.counts, dtype="<i8").tobytes())
    return torch.tensor([len(vocab.counts), words, counts], dtype=torch.int64)


def attach_fingerprint(layer: nn.Module, vocab, words_known: bool, device=None) -> None:
    """Save the vocabulary's fingerprint with the layer (a buffer, so it follows ``.to()`` and is
    in ``state_dict``) and refuse a state made for another vocabulary on load."""
    layer.register_buffer("vocab_fingerprint",
                          vocabulary_fingerprint(vocab, words_known).to(device or "cpu"))
    layer.register_load_state_dict_pre_hook(check_fingerprint)


def check_fingerprint(module, state_dict, prefix, *args) -> None:
    """A load-state pre-hook: the saved fingerprint must be this layer's vocabulary's. A state
    without one (a layer made by its constructor, a file from before) is taken as it is."""
    key = prefix + "vocab_fingerprint"
    mine = module.vocab_fingerprint
    theirs = state_dict.get(key)
    if theirs is None:
        state_dict[key] = mine.clone()
        return
    a, b = mine.tolist(), torch.as_tensor(theirs).tolist()
    if len(b) != 3 or a[0] != b[0]:
        why = f"{b[0]:,} words against {a[0]:,}" if len(b) == 3 else "an unknown fingerprint"
    elif a[1] and b[1]:  # both know their words: the words decide
        why = None if a[1] == b[1] else "the same size, other words or another id order"
    else:
        why = None if a[2] == b[2] else "the same size, other counts or another id order"
    if why is not None:
        raise OptionError(f"this state was saved for another vocabulary ({why}): load it into "
                          f"a layer made for the same words in the same id order")
