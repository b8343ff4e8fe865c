"""Output layers for neural language models over the project's trees and clusters (PyTorch).

Every layer has ``torch.nn.AdaptiveLogSoftmaxWithLoss``'s interface (``forward(input, target)``
-> ``(output, loss)``, ``log_prob``, ``predict``) plus ``after_step(optimizer)`` and
``describe()``; ``make_output_layer`` builds one by name (``LM_LAYERS``). With sparse
gradients (``sparse=True``: SGD, Adagrad, SparseAdam) clip with ``clip_grad_norm``, which
handles them (torch's ``clip_grad_norm_`` does not).

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
from .optim_state import clip_grad_norm  # noqa: E402
from .output import LM_LAYERS, make_output_layer  # noqa: E402
from .self_organizing import SelfOrganizingSoftmax  # noqa: E402
from .tree_softmax import TreeSoftmax  # noqa: E402

__all__ = ["AdaptiveSoftmax", "TwoLevelSoftmax", "FullSoftmax", "LayerOutput", "LM_LAYERS",
           "LMOutputLayer", "SelfOrganizingSoftmax", "TreeSoftmax", "clip_grad_norm",
           "make_output_layer"]
