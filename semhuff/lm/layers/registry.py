"""The LM output layers by name, on the same contract as the Numba trainer's output layers
(``semhuff.layers``): a registry (``LM_LAYERS``, ``register_lm_layer``) of classes that declare
the settings they take once, as ``semhuff.options.Option`` values (``OPTIONS``; the tree layer
adds its tree builders' own, ``declared_options()``), and build themselves from a vocabulary
(``from_vocab``). Everything reads those declarations: ``make_output_layer`` (a setting the
layer does not take is a one-line ``OptionError`` naming it), ``semhuff-lm``'s flags (one per
declared option) and ``--layer-option NAME=VALUE`` (typed by the declaration).

A layer class registered here has ``torch.nn.AdaptiveLogSoftmaxWithLoss``'s interface
(``forward(input, target) -> (output, loss)``, ``log_prob``, ``predict``) plus ``INTERFACE``'s
``after_step(optimizer)``, ``describe()`` and ``cluster_log_prob(h, target)`` (None for a layer
without clusters), and the classmethod ``from_vocab(in_features, vocab, *, seed, device, dtype,
**settings)`` (``vocabulary.py``: which vocabularies). Every built-in layer takes
``ignore_index`` and ``reduction`` (``base.LOSS_OPTIONS``, as ``torch.nn.CrossEntropyLoss``).

What the LM application may ask a layer, never its name or class (``tests/test_structure.py``):

* ``retree(tree, counts, optimizer)`` with its ``tree``: the layer trains on over another tree,
  its rows carried over (``semhuff-lm --retree-every``; ``layers_with("retree")``);
* ``settings_for_state(settings, state)`` (a classmethod): the settings of a layer that a saved
  ``state_dict`` then loads into, when the state holds what the settings would build (the tree
  layer's tree: ``rebuild_settings``); without it, the saved settings;
* ``uses_every_parameter`` (False: a data-parallel run looks for parameters a step left
  unused), ``sparse_parameters()`` (the optimizer's groups), a registration's
  ``trainer_defaults`` (``trainer_defaults``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Type

from torch import nn

from ...errors import OptionError
from ...options import Option, check_settings, declared_by_owner
from .vocabulary import as_vocab, attach_fingerprint

LM_LAYERS: Dict[str, Type[nn.Module]] = {}
TRAINER_DEFAULTS: Dict[str, Dict[str, Any]] = {}  # the LM trainer's own choices per layer
DEFAULT_LM_LAYER = "tree"  # make_output_layer's and semhuff-lm's when none is named

# what the trainer and the CLIs call on a layer
INTERFACE = ("from_vocab", "forward", "log_prob", "predict", "after_step", "describe",
             "cluster_log_prob")


def register_lm_layer(name: str, trainer_defaults: Optional[Dict[str, Any]] = None):
    """Class decorator: make an LM output layer class available as
    ``make_output_layer(name, ...)``, ``semhuff-lm --loss name`` and in saved LM models.
    ``trainer_defaults``: settings the LM trainer uses on the CPU unless told otherwise (e.g.
    ``{"sparse": True}`` where sparse gradients train faster there; on a GPU the layer's own
    defaults, docs/lm.md)."""
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


def trainer_defaults(name: str) -> Dict[str, Any]:
    """The settings the LM trainer gives layer ``name`` on the CPU unless told otherwise."""
    return dict(TRAINER_DEFAULTS.get(name, {}))


def layers_with(capability: str) -> List[str]:
    """The registered layers that have method ``capability`` (e.g. ``"retree"``)."""
    return sorted(name for name, cls in LM_LAYERS.items()
                  if callable(getattr(cls, capability, None)))


def rebuild_settings(name: str, settings: Dict[str, Any], state: Dict[str, Any]
                     ) -> Dict[str, Any]:
    """The settings to build layer ``name`` with before loading ``state`` (its ``state_dict``)
    into it: the layer's ``settings_for_state`` where it has one, else ``settings``."""
    cls = lm_layer_class(name)
    rebuild = getattr(cls, "settings_for_state", None)
    return dict(rebuild(dict(settings), state)) if callable(rebuild) else dict(settings)


__all__ = ["DEFAULT_LM_LAYER", "INTERFACE", "LM_LAYERS", "TRAINER_DEFAULTS", "build_layer",
           "check_lm_layer_settings", "declared_lm_layer_options", "layer_options",
           "layers_with", "lm_layer_class", "make_output_layer", "rebuild_settings",
           "register_lm_layer", "trainer_defaults"]
