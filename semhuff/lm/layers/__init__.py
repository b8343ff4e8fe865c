"""The PyTorch output layers by name (``registry``: ``LM_LAYERS``, ``register_lm_layer``,
``make_output_layer``): ``full`` (the full and the adaptive softmax), ``tree`` (hierarchical
softmax over any tree), ``class`` (the two-level class softmax), ``self-organized`` and
``self-organized-binary`` (clusters re-learned while training), ``head-tree``, ``class-tree`` and
``organized-tree`` (a flat softmax over frequent words or clusters, trees below: issue 45). Each module here is a layer,
named for it; what they share is ``base`` (the interface) and ``vocabulary`` (what a layer is
made for); how they compute is ``semhuff.lm.kernels``."""
from .base import LayerOutput, LMOutputLayer
from .class_tree import ClassTreeSoftmax
from .classes import ClassSoftmax
from .full import AdaptiveSoftmax, FullSoftmax
from .head_tree import HeadTreeSoftmax
from .organized_tree import OrganizedTreeSoftmax
from .registry import (DEFAULT_LM_LAYER, LM_LAYERS, declared_lm_layer_options, lm_layer_class,
                       make_output_layer, register_lm_layer)
from .self_organized import SelfOrganizedBinary, SelfOrganizedSoftmax
from .tree import TreeSoftmax

# the built-in layers, registered as a plugin's would be (``register_lm_layer``); the tree forms
# train with sparse gradients in semhuff-lm on the CPU (faster there: docs/lm.md)
register_lm_layer("full")(FullSoftmax)
register_lm_layer("adaptive")(AdaptiveSoftmax)
register_lm_layer("tree", trainer_defaults={"sparse": True})(TreeSoftmax)
register_lm_layer("class")(ClassSoftmax)
register_lm_layer("self-organized")(SelfOrganizedSoftmax)
register_lm_layer("self-organized-binary", trainer_defaults={"sparse": True})(SelfOrganizedBinary)
register_lm_layer("head-tree", trainer_defaults={"sparse": True})(HeadTreeSoftmax)
register_lm_layer("class-tree", trainer_defaults={"sparse": True})(ClassTreeSoftmax)
register_lm_layer("organized-tree", trainer_defaults={"sparse": True})(OrganizedTreeSoftmax)

__all__ = ["AdaptiveSoftmax", "ClassSoftmax", "ClassTreeSoftmax", "DEFAULT_LM_LAYER",
           "FullSoftmax", "HeadTreeSoftmax", "LM_LAYERS", "LMOutputLayer", "OrganizedTreeSoftmax", "LayerOutput", "SelfOrganizedBinary", "SelfOrganizedSoftmax",
           "TreeSoftmax", "declared_lm_layer_options", "lm_layer_class", "make_output_layer",
           "register_lm_layer"]
