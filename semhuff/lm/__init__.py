"""Output layers for neural language models over the project's trees and clusters (PyTorch).

Every layer has ``torch.nn.AdaptiveLogSoftmaxWithLoss``'s interface (``forward(input, target)``
-> ``(output, loss)``, ``log_prob``, ``predict``) plus ``after_step(optimizer)`` and
``describe()``; ``make_output_layer`` builds one by name (``LM_LAYERS``; ``register_lm_layer``
adds one, ``semhuff.lm.output``), ``TreeSoftmax.from_counts(H, counts)`` from your counts. With sparse
gradients (``sparse=True``: SGD or Adagrad without weight decay, SparseAdam; ``check_optimizer``
says at construction whether an optimizer takes the model's gradients) clip with
``clip_grad_norm`` (torch 2.14's ``clip_grad_norm_`` handles sparse gradients too).

PyTorch is optional for the rest of semhuff: ``import semhuff`` never needs it, and importing
this package without it is a one-line ``ImportError``.
"""
try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError("semhuff.lm needs PyTorch: pip install 'semhuff[torch]'") from None

from .base import LayerOutput, LMOutputLayer  # noqa: E402
from .class_softmax import TwoLevelSoftmax  # noqa: E402
from .full import AdaptiveSoftmax, FullSoftmax  # noqa: E402
from .optim_state import OptimizerError, check_optimizer, clip_grad_norm  # noqa: E402
from .output import (LM_LAYERS, declared_lm_layer_options, lm_layer_class,  # noqa: E402
                     make_output_layer, register_lm_layer)
from .self_organizing import SelfOrganizingBinary, SelfOrganizingSoftmax  # noqa: E402
from .tree_softmax import TreeSoftmax  # noqa: E402
from . import networks, transformer  # noqa: E402,F401  (the built-in networks register there)

# the built-in layers, registered as a plugin's would be (``register_lm_layer``); the tree forms
# train with sparse gradients in semhuff-lm (measured faster: eval/bench/lm_layers.py)
register_lm_layer("full")(FullSoftmax)
register_lm_layer("adaptive")(AdaptiveSoftmax)
register_lm_layer("tree", trainer_defaults={"sparse": True})(TreeSoftmax)
register_lm_layer("class")(TwoLevelSoftmax)
register_lm_layer("self-organized")(SelfOrganizingSoftmax)
register_lm_layer("self-organized-binary", trainer_defaults={"sparse": True})(SelfOrganizingBinary)

__all__ = ["AdaptiveSoftmax", "TwoLevelSoftmax", "FullSoftmax", "LayerOutput", "LM_LAYERS",
           "LMOutputLayer", "OptimizerError", "SelfOrganizingSoftmax", "TreeSoftmax",
           "check_optimizer", "clip_grad_norm",
           "declared_lm_layer_options", "lm_layer_class", "make_output_layer",
           "register_lm_layer"]
