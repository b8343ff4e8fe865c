"""Output layers and their registry: a name (``--loss``, ``Word2Vec(loss=...)``, the model
file) maps to the class that builds, trains, saves and restores that layer."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple, Type

from ..errors import ModelFileError, OptionError
from ..options import Option, check_settings, declared_by_owner
from .base import OutputLayer
from .classes import ClassSoftmax
from .hs import HierarchicalSoftmax
from .hs_ns import HierarchicalSoftmaxAndNegative
from .ns import NegativeSampling
from .self_organized import SelfOrganizedHS

OUTPUT_LAYERS: Dict[str, Type[OutputLayer]] = {}


def register_output_layer(name: str):
    """Class decorator: make an ``OutputLayer`` subclass available as ``loss=name``."""
    def register(cls):
        if not (isinstance(cls, type) and issubclass(cls, OutputLayer)):
            raise TypeError("register_output_layer decorates OutputLayer subclasses")
        if OUTPUT_LAYERS.get(name, cls) is not cls:
            raise ValueError(f"output layer name {name!r} is taken by {OUTPUT_LAYERS[name]!r}")
        cls.name = name
        OUTPUT_LAYERS[name] = cls
        return cls
    return register


register_output_layer("hs")(HierarchicalSoftmax)
register_output_layer("ns")(NegativeSampling)
register_output_layer("hs+ns")(HierarchicalSoftmaxAndNegative)
register_output_layer("class")(ClassSoftmax)
register_output_layer("hs-self-organized")(SelfOrganizedHS)


def layer_class(name: str) -> Type[OutputLayer]:
    try:
        return OUTPUT_LAYERS[name]
    except (KeyError, TypeError):
        raise OptionError(f"unknown output layer (loss) {name!r}; registered: "
                          f"{', '.join(sorted(OUTPUT_LAYERS))}") from None


def check_layer_settings(loss: str, settings: Dict[str, Any]) -> Dict[str, Any]:
    """The settings given for output layer ``loss``, validated by its declarations; one it does
    not take is an ``OptionError`` naming it (never silently unused)."""
    return check_settings(f"loss {loss!r}", layer_class(loss).declared_options(), settings)


def declared_layer_options() -> Dict[str, Tuple[Option, List[str]]]:
    """Every registered layer's options by name: the declaration and the layers taking it."""
    return declared_by_owner(OUTPUT_LAYERS, lambda cls: cls.declared_options())


def layer_from_state(name: str, config: dict, arrays) -> OutputLayer:
    """Rebuild a saved layer. Its class must be registered in this process (import the module
    that defines it before loading)."""
    if name not in OUTPUT_LAYERS:
        raise ModelFileError(f"the model was saved with output layer {name!r}, which is not "
                             f"registered here (import the module that defines it first); "
                             f"registered: {', '.join(sorted(OUTPUT_LAYERS))}")
    return OUTPUT_LAYERS[name].from_state(config, arrays)


__all__ = ["OUTPUT_LAYERS", "ClassSoftmax", "HierarchicalSoftmax",
           "HierarchicalSoftmaxAndNegative", "NegativeSampling",
           "OutputLayer", "SelfOrganizedHS",
           "check_layer_settings", "declared_layer_options", "layer_class", "layer_from_state",
           "register_output_layer"]
