"""A language model built from ``LMSettings`` (the network ``arch`` over the output layer
``output``, both by name), saved with its settings and vocabulary (``save_model``: a torch file
``semhuff-lm -o`` writes) and rebuilt from it (``load_model``): the layer is made with the
settings its saved state then loads into (``registry.rebuild_settings``: a tree layer's tree
comes from the file, not from its builder and similarity source)."""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

from ..errors import ModelFileError
from ..io_utils import atomic_output
from ..vocab import Vocab
from .layers.registry import (DEFAULT_LM_LAYER, layer_options, lm_layer_class, make_output_layer,
                              rebuild_settings)
from .networks import LanguageModel, lm_network_class
from .report import LMReport
from .settings import LMSettings, resolve_device
from .token_ids import LMData

LAYER = "output"  # a network's attribute (and state_dict prefix) for its output layer


def build_model(vocab: Vocab, s: LMSettings, layer_settings: Optional[dict] = None
                ) -> LanguageModel:
    """The network ``s.arch`` over the output layer ``s.output``, both by name; the layer with
    ``layer_settings`` (default ``s.layer_settings()``)."""
    torch.manual_seed(s.seed)
    settings = s.layer_settings() if layer_settings is None else layer_settings
    layer = make_output_layer(s.output, s.hidden, vocab, seed=s.seed, **settings)
    return lm_network_class(s.arch)(len(vocab), layer, emb=s.emb, hidden=s.hidden,
                                    dropout=s.dropout, **s.network_options)


def save_model(path: str, model: LanguageModel, data: LMData, report: LMReport) -> None:
    """The model's state_dict (the output layer's tree / clusters included), its settings and
    vocabulary: ``load_model`` rebuilds it. Written atomically."""
    payload = {"state_dict": model.state_dict(), "settings": report.settings,
               "words": data.vocab.words, "counts": data.vocab.counts.tolist(),
               "eos": data.eos, "report": report.to_dict()}
    with atomic_output(path) as fh:
        torch.save(payload, fh)


class LoadedModel(tuple):
    """``(model, vocab, settings)`` as ``load_model`` has always returned (unpack it so), with
    ``.eos`` (whether the model's text has ``<eos>`` at line ends) and ``.report`` (the
    training run's report, a dict) as attributes."""

    def __new__(cls, model, vocab, settings, eos: bool, report):
        loaded = super().__new__(cls, (model, vocab, settings))
        loaded.eos, loaded.report = bool(eos), report
        return loaded

    model = property(lambda self: self[0])
    vocab = property(lambda self: self[1])
    settings = property(lambda self: self[2])


def load_model(path: str, device: str = "cpu") -> LoadedModel:
    """(model, vocab, settings) of a file ``save_model`` wrote (``.eos``, ``.report`` too), the
    model on ``device``."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except FileNotFoundError:
        raise ModelFileError(f"model not found: {path}") from None
    except Exception as exc:  # not a torch file, or a damaged one
        raise ModelFileError(f"{path} is not a semhuff-lm model "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0][:100]})") from None
    if not isinstance(payload, dict) or "state_dict" not in payload:
        what = ("a semhuff-lm checkpoint (semhuff-lm --checkpoint it --resume continues it)"
                if isinstance(payload, dict) and "model_state" in payload else "another file")
        raise ModelFileError(f"{path} is not a semhuff-lm model: it is {what}")
    vocab = Vocab(payload["words"], np.asarray(payload["counts"]),
                  int(np.sum(payload["counts"])))
    saved = dict(payload["settings"])
    layer_class = lm_layer_class(saved.get("output", DEFAULT_LM_LAYER))
    settings = LMSettings.from_saved(saved, takes={o.name for o in layer_options(layer_class)})
    state = payload["state_dict"]
    prefix = LAYER + "."
    layer_state = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    model = build_model(vocab, settings, rebuild_settings(settings.output,
                                                          settings.layer_settings(), layer_state))
    model.load_state_dict(state)
    return LoadedModel(model.to(resolve_device(device)), vocab, settings, payload["eos"],
                       payload.get("report"))
