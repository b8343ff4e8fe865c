"""The LM output layers by name, on the same contract as the Numba trainer's output layers
(``semhuff.layers``): a registry (``LM_LAYERS``, ``register_lm_layer``) of classes that declare
the settings they take once, as ``semhuff.options.Option`` values (``OPTIONS``; the tree layer
adds its tree builders' own, ``declared_options()``), and build themselves from a vocabulary
(``from_vocab``). Everything reads those declarations: ``make_output_layer`` (a setting the
layer does not take is a one-line ``OptionError`` naming it), ``semhuff-lm``'s flags (one per
declared option) and ``--layer-option NAME=VALUE`` (typed by the declaration).

A layer class registered here has ``torch.nn.AdaptiveLogSoftmaxWithLoss``'s interface
(``forward(input, target) -> (output, loss)``, ``log_prob``, ``predict``) plus
``after_step(optimizer)``, ``describe()`` and ``cluster_log_prob(h, target)`` (None for a layer
without clusters), and the classmethod ``from_vocab(in_features, vocab, *, seed, device, dtype,
**settings)``. Every built-in layer takes ``ignore_index`` and ``reduction`` (``LOSS_OPTIONS``,
as ``torch.nn.CrossEntropyLoss``).

The vocabulary. ``vocab`` is a ``semhuff.vocab.Vocab`` (word i = id i), or give ``counts=`` (one
count per id, in *your* id order: ``make_output_layer("tree", H, counts=counts)`` is the
one-line swap for ``AdaptiveLogSoftmaxWithLoss(H, V, cutoffs)``). Ids need not be frequency
sorted: the tree and class layers build over the sorted order and relabel to yours (word w gets
the code it has in the sorted vocabulary); the layers that need sorted ids (the adaptive
softmax's cutoffs are id ranges, the self-organizing layers) say so in one line. Every layer made
here carries a fingerprint of its vocabulary in its ``state_dict`` (``vocab_fingerprint``: the
size, the words when known, the counts), and loading a state made for another vocabulary is a
one-line ``OptionError``.
"""
from __future__ import annotations

import hashlib
from typing import Any, Dict, List, Optional, Tuple, Type

import numpy as np
import torch
from torch import nn

from ..errors import OptionError
from ..options import (Option, boolean, check_settings, declared_by_owner, int_list, integer,
                       is_integer, positive_int)
from ..trees.clusters import CLUSTERS

LM_LAYERS: Dict[str, Type[nn.Module]] = {}
TRAINER_DEFAULTS: Dict[str, Dict[str, Any]] = {}  # the LM trainer's own choices per layer

# what the trainer and the CLIs call on a layer
INTERFACE = ("from_vocab", "forward", "log_prob", "predict", "after_step", "describe",
             "cluster_log_prob")


# the loss options of torch.nn.CrossEntropyLoss, taken by every built-in layer
LOSS_OPTIONS = (
    Option("ignore_index", int, -100, "a target id that adds no loss and no gradient (padding), "
           "as torch.nn.CrossEntropyLoss", metavar="ID",
           check=integer, cli=False),
    Option("reduction", str, "mean", "the loss returned: the mean over the targets not "
           "ignored, their sum, or none (one per token)", choices=("mean", "sum", "none"),
           cli=False),
)  # for the user's own training loops (cli=False): semhuff-lm trains on the mean of every token


# declarations several layers share (each layer's OPTIONS lists its own)
SPARSE = Option("sparse", boolean, False, "the output weights' gradient as a sparse tensor of "
                "the rows a batch touched (SGD, Adagrad, SparseAdam then update only those; "
                "semhuff-lm trains the tree forms so unless told --sparse false)")

def _organizer_options() -> Tuple[Option, ...]:
    """The self-organizing layers' settings: the organizer's own declarations (shared with the
    Numba trainer's clustered layers), with the LM's unit for ``reassign_every`` (steps)."""
    from ..trees.organizer import ORGANIZER_OPTIONS
    shared = {o.name: o for o in ORGANIZER_OPTIONS}
    return (CLUSTERS,
            Option("reassign_every", int, 1000, "optimizer steps between re-assignments (the "
                   "paper: 1000 batches)", metavar="STEPS", check=positive_int),
            *(shared[name] for name in ("gamma", "freq_budget", "smoothing", "criterion",
                                        "margin", "cluster_init")),
            Option("freeze_after", int, None, "no re-assignment after this many steps (default: "
                   "never frozen)", metavar="STEPS", check=positive_int),
            SPARSE)


def tree_for(spec, vocab, similarity, seed: int, builder_options: Dict[str, Any]):
    """The tree layer's ``Tree`` (``semhuff.trees.spec.resolve_tree``), its errors as the
    layer's ``OptionError``."""
    from ..errors import TreeError
    from ..trees.spec import resolve_tree
    try:
        return resolve_tree(spec, vocab, similarity=similarity, seed=seed, **builder_options)
    except TreeError as exc:
        raise OptionError(str(exc)) from None


# -- the registry ------------------------------------------------------------------------------

def register_lm_layer(name: str, trainer_defaults: Optional[Dict[str, Any]] = None):
    """Class decorator: make an LM output layer class available as
    ``make_output_layer(name, ...)``, ``semhuff-lm --loss name`` and in saved LM models.
    ``trainer_defaults``: settings the LM trainer uses on the CPU unless told otherwise (e.g.
    ``{"sparse": True}`` where sparse gradients measured faster there; on a GPU the layer's own
    defaults: a dense tree gradient made an LSTM LM's whole step 5-7x faster on an H100,
    docs/lm.md)."""
    def register(cls):
        if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
            raise TypeError("register_lm_layer decorates torch.nn.Module subclasses")
        missing = [m for m in INTERFACE if not callable(getattr(cls, m, None))]
        if missing:
            raise TypeError(f"{cls.__name__} lacks {', '.join(missing)} (an LM output layer "
                            f"has {', '.join(INTERFACE)})")
        if LM_LAYERS.get(name, cls) is not cls:
            raise ValueError(f"LM output layer name {name!r} is taken by {LM_LAYERS[name]!r}")
        LM_LAYERS[name] = cls
        TRAINER_DEFAULTS[name] = dict(trainer_defaults or {})
        return cls
    return register


def lm_layer_class(name: str) -> Type[nn.Module]:
    try:
        return LM_LAYERS[name]
    except (KeyError, TypeError):
        raise OptionError(f"unknown output layer {name!r} (expected one of: "
                          f"{', '.join(sorted(LM_LAYERS))}; a --plugin module may register "
                          f"others)") from None


def layer_options(cls) -> Tuple[Option, ...]:
    """Every setting LM layer class ``cls`` takes (``declared_options()``, else ``OPTIONS``)."""
    declared = getattr(cls, "declared_options", None)
    return tuple(declared()) if callable(declared) else tuple(getattr(cls, "OPTIONS", ()))


def declared_lm_layer_options() -> Dict[str, Tuple[Option, List[str]]]:
    """Every registered LM layer's options by name: the declaration and the layers taking it."""
    return declared_by_owner(LM_LAYERS, layer_options)


def check_lm_layer_settings(name: str, settings: Dict[str, Any]) -> Dict[str, Any]:
    """``settings`` for LM layer ``name``, validated by its declarations; one it does not take
    is an ``OptionError`` naming it (never silently unused)."""
    return check_settings(f"the {name} output layer", layer_options(lm_layer_class(name)),
                          settings)


def make_output_layer(name: str, in_features: int, vocab=None, *, counts=None, device=None,
                      dtype=None, seed: int = 1, **settings):
    """The LM output layer registered as ``name`` (``LM_LAYERS``) over ``vocab`` (a
    ``semhuff.vocab.Vocab``) or ``counts`` (one count per word id, in the caller's id order),
    with ``in_features`` inputs; its weights on ``device`` in ``dtype``. ``seed``: random trees
    and clusters. ``settings``: the layer's declared options, e.g. ``tree="semhuff"``,
    ``similarity="wordnet"``, ``sparse=True`` (tree), ``clusters``, ``clustering`` (class),
    ``reassign_every`` (self-organized), ``cutoffs`` (adaptive), ``ignore_index``,
    ``reduction`` (all). Anything else is a one-line ``OptionError``."""
    return build_layer(lm_layer_class(name), in_features, vocab, counts=counts, device=device,
                       dtype=dtype, seed=seed, _name=name, **settings)


def build_layer(cls, in_features: int, vocab=None, *, counts=None, device=None, dtype=None,
                seed: int = 1, _name: Optional[str] = None, **settings):
    """``make_output_layer`` for a class (``TreeSoftmax.from_counts`` uses it): the settings
    checked against ``cls``'s declarations, then ``cls.from_vocab``, then the vocabulary's
    fingerprint attached."""
    label = f"the {_name or cls.__name__} output layer"
    settings = check_settings(label, layer_options(cls), settings)
    vocab, words_known = as_vocab(vocab, counts)
    layer = cls.from_vocab(in_features, vocab, seed=seed, device=device, dtype=dtype,
                           **settings)
    attach_fingerprint(layer, vocab, words_known, device)
    return layer


# -- the vocabulary ----------------------------------------------------------------------------

def as_vocab(vocab, counts):
    """(a ``Vocab`` in the caller's id order, whether its words are real) from
    ``make_output_layer``'s ``vocab`` / ``counts``."""
    from ..vocab import Vocab
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
        return vocab, True
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
    return Vocab([f"#{i}" for i in range(array.size)], array, int(array.sum())), False


def require_frequency_order(vocab, what: str) -> None:
    """A one-line error unless the ids are in descending order of count (for layers whose
    structure is id ranges)."""
    from ..vocab import frequency_order
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


__all__ = ["LM_LAYERS", "LOSS_OPTIONS", "TRAINER_DEFAULTS", "boolean", "build_layer",
           "check_lm_layer_settings", "declared_lm_layer_options", "int_list",
           "layer_options", "lm_layer_class", "make_output_layer", "register_lm_layer",
           "require_frequency_order", "vocabulary_fingerprint"]
