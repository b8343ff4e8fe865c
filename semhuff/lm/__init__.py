"""Output layers for neural language models over the project's trees and clusters (PyTorch).

Every layer has ``torch.nn.AdaptiveLogSoftmaxWithLoss``'s interface (``forward(input, target)``
-> ``(output, loss)``, ``log_prob``, ``predict``) plus ``after_step(optimizer)`` and
``describe()``; ``make_output_layer`` builds one by name (``LM_LAYERS``; ``register_lm_layer``
adds one), ``TreeSoftmax.from_counts(H, counts)`` from your counts. With sparse gradients
(``sparse=True``: SGD or Adagrad without weight decay, SparseAdam; ``check_optimizer`` says at
construction whether an optimizer takes the model's gradients) clip with ``clip_grad_norm``
(torch 2.14's ``clip_grad_norm_`` handles sparse gradients too).

The package by job: ``layers/`` (the layers and their registry), ``kernels/`` (how they compute:
torch, Triton, Numba; the optimizer state of moving rows), and the ``semhuff-lm`` application
beside them: ``networks`` / ``transformer`` (the language models), ``token_ids`` (the data),
``settings``, ``trainer`` (a run), ``evaluation``, ``report``, ``models`` (a saved model),
``checkpoint``, ``parallel`` (torchrun), ``generate`` (score and sample).

PyTorch is optional for the rest of semhuff: ``import semhuff`` never needs it, and importing
this package without it is a one-line ``ImportError``.
"""
try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError("semhuff.lm needs PyTorch: pip install 'semhuff[torch]'") from None

from . import _moved  # noqa: E402
from .kernels.optimizer_state import OptimizerError, check_optimizer, clip_grad_norm  # noqa: E402
from .layers import (AdaptiveSoftmax, ClassSoftmax, FullSoftmax, LayerOutput,  # noqa: E402
                     LM_LAYERS, LMOutputLayer, SelfOrganizedBinary, SelfOrganizedSoftmax,
                     TreeSoftmax, lm_layer_class, make_output_layer, register_lm_layer)
from .layers.registry import declared_lm_layer_options  # noqa: E402
from . import networks, transformer  # noqa: E402,F401  (the built-in networks register there)

_moved.install()  # the former module paths (semhuff.lm.output, ...) for one more release
__getattr__ = _moved.moved_names(__name__)  # the former names (TwoLevelSoftmax, ...)

__all__ = ["AdaptiveSoftmax", "ClassSoftmax", "FullSoftmax", "LayerOutput", "LM_LAYERS",
           "LMOutputLayer", "OptimizerError", "SelfOrganizedBinary", "SelfOrganizedSoftmax",
           "TreeSoftmax", "check_optimizer", "clip_grad_norm", "declared_lm_layer_options",
           "lm_layer_class", "make_output_layer", "register_lm_layer"]
