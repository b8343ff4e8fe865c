"""A semhuff output layer as the head of a Hugging Face causal LM (``pip install
'semhuff[hf]'``).

    from transformers import GPT2Config, GPT2LMHeadModel
    from semhuff.lm.hf import add_semhuff_head, semhuff_causal_lm

    model = add_semhuff_head(GPT2LMHeadModel(config), "tree", counts=counts)  # one call
    loss = model(input_ids, labels=input_ids).loss           # the layer's loss, shifted as HF's
    model.generate(input_ids, do_sample=True, top_k=50)       # greedy, sampling, top-k / top-p
    model.save_pretrained(path)                               # safetensors
    again = semhuff_causal_lm(GPT2LMHeadModel).from_pretrained(path)

``add_semhuff_head`` builds the layer (``make_output_layer``: any registered name, its
settings, ``counts`` one per token id or a ``vocab``), puts it where the model's ``lm_head``
was, records how in ``config.semhuff_head`` (so ``from_pretrained`` builds it again before the
weights load) and turns the model into ``semhuff_causal_lm(type(model))``, a subclass whose
``forward`` runs the model's own decoder (``base_model``) and then the layer:

* with ``labels``: the loss is the layer's (``forward(hidden[:, :-1], labels[:, 1:])``, the
  shift and ``-100`` as Hugging Face's causal LMs), and no logits are made (a tree scores a
  token's path, never the vocabulary);
* without: ``logits`` are the layer's exact log-probabilities (softmax gives the distribution
  back) at the last ``logits_to_keep`` positions, which ``generate`` asks one of: greedy search,
  sampling, temperature, top-k and top-p run on them as on any model's logits. ``generate``
  has no hook that hands the draw itself to the layer, so it reads each step's whole
  distribution; ``layer.sample`` (a tree's walk down) is the fast draw outside it.

The head's word embeddings are not tied (a tree has no word x hidden matrix): the model's
``tie_word_embeddings`` is set False. ``post_init`` leaves the layer as it was built (its
modules are marked initialised). Saving: the layer's tensors go to the safetensors file; its
``_extra_state`` (counters, a re-assignment history, a tree's kind: not tensors) to
``config.semhuff_head["extra_states"]``, set again when ``from_pretrained`` builds the layer (a
saved tree layer is built as the cheapest tree of its size, then its own tree loads: a SemHuff
tree needs no WordNet to load).
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..errors import OptionError
from .layers.base import _RenamedKey
from .layers.registry import DEFAULT_LM_LAYER, make_output_layer, rebuild_settings

EXTRA = "_extra_state"
_CLASSES: dict = {}


def _mark_initialised(module: nn.Module) -> None:
    for m in module.modules():
        m._is_hf_initialized = True


def _counts_list(counts, vocab):
    if vocab is not None:
        return [int(c) for c in vocab.counts]
    if torch.is_tensor(counts):
        counts = counts.detach().cpu().tolist()
    return [int(c) for c in counts]


def add_semhuff_head(model, layer: str = DEFAULT_LM_LAYER, counts=None, vocab=None,
                     **settings):
    """``model`` (a Hugging Face causal LM: ``GPT2LMHeadModel``, ``LlamaForCausalLM``, ...) with
    a semhuff output layer ``layer`` as its head, built over ``counts`` (one count per token id
    of the model's vocabulary) or ``vocab``; ``settings``: the layer's (``make_output_layer``).
    The same model object is returned, its class now ``semhuff_causal_lm(type(model))``."""
    config = model.config
    if counts is None and vocab is None:
        raise OptionError("add_semhuff_head needs counts= (one count per token id) or vocab=")
    spec = {"layer": layer, "settings": dict(settings), "counts": _counts_list(counts, vocab)}
    if len(spec["counts"]) != config.vocab_size:
        raise OptionError(f"{len(spec['counts']):,} counts for a model of vocab_size "
                          f"{config.vocab_size:,}")
    base = type(model)
    model.__class__ = semhuff_causal_lm(base)
    config.semhuff_head = spec
    config.tie_word_embeddings = False
    model._build_semhuff_head()
    return model


def semhuff_causal_lm(base):
    """The subclass of the Hugging Face causal-LM class ``base`` whose head is a semhuff layer
    (``config.semhuff_head``, as ``add_semhuff_head`` wrote it): ``from_pretrained`` on it
    loads a model ``save_pretrained`` wrote. Made once per ``base``."""
    if getattr(base, "_semhuff_base", None) is not None:
        return base
    if base in _CLASSES:
        return _CLASSES[base]
    from transformers.modeling_outputs import CausalLMOutputWithPast

    class SemhuffCausalLM(base):
        _semhuff_base = base
        _tied_weights_keys = None

        def __init__(self, config, *args, **kwargs):
            config.tie_word_embeddings = False
            super().__init__(config, *args, **kwargs)
            if getattr(config, "semhuff_head", None):
                self._build_semhuff_head()

        def _build_semhuff_head(self):
            spec = self.config.semhuff_head
            settings = dict(spec["settings"])
            if spec.get("extra_states") is not None:  # a saved model: its state holds the tree,
                # so the cheapest builder of the same size (no similarity source needed)
                settings = rebuild_settings(spec["layer"], settings, {"tree_parent": None})
            hidden = self.config.get_text_config().hidden_size if hasattr(
                self.config, "get_text_config") else self.config.hidden_size
            old = getattr(self, "lm_head", None)
            device = getattr(getattr(old, "weight", None), "device", None)
            if device is None or device.type == "meta":
                device = torch.device("cpu")
            with torch.device(device):  # from_pretrained builds on "meta": the layer's
                # structure (its tree, clusters, fingerprint) is data, made here for real
                head = make_output_layer(spec["layer"], hidden, counts=spec["counts"],
                                         device=device, **settings)
                if spec.get("extra_states"):
                    _set_extra_states(head, spec["extra_states"])
            self.lm_head = head
            _mark_initialised(head)
            head._register_state_dict_hook(_hf_state_dict)

        def save_pretrained(self, *args, **kwargs):
            self.config.semhuff_head = {**self.config.semhuff_head,
                                        "extra_states": _extra_states(self.lm_head)}
            return super().save_pretrained(*args, **kwargs)

        def get_output_embeddings(self):
            return None  # nothing to tie or resize: the head is not a word matrix

        def tie_weights(self, *args, **kwargs):
            return None

        def forward(self, input_ids=None, attention_mask=None, past_key_values=None,
                    labels: Optional[torch.Tensor] = None, logits_to_keep=0,
                    return_dict: Optional[bool] = None, **kwargs):
            kwargs.pop("num_items_in_batch", None)  # the Trainer's; the layer counts its own
            outputs = self.base_model(input_ids=input_ids, attention_mask=attention_mask,
                                      past_key_values=past_key_values, **kwargs)
            hidden = outputs[0]
            loss = logits = None
            if labels is not None:
                loss = self.lm_head(hidden[:, :-1].contiguous(),
                                    labels[:, 1:].contiguous().to(hidden.device)).loss
            else:
                keep = hidden if not logits_to_keep else (
                    hidden[:, -logits_to_keep:] if isinstance(logits_to_keep, int)
                    else hidden[:, logits_to_keep])
                logits = self.lm_head.log_prob(keep)
            return CausalLMOutputWithPast(
                loss=loss, logits=logits,
                past_key_values=getattr(outputs, "past_key_values", None),
                hidden_states=getattr(outputs, "hidden_states", None),
                attentions=getattr(outputs, "attentions", None))

    SemhuffCausalLM.__name__ = SemhuffCausalLM.__qualname__ = f"Semhuff{base.__name__}"
    _CLASSES[base] = SemhuffCausalLM
    return SemhuffCausalLM


def _hf_state_dict(module, state_dict, prefix, local_metadata):
    """The head's state as Hugging Face's loader sets it, tensor by tensor at each one's module
    path: the ``_extra_state`` entries out (safetensors holds tensors; ``save_pretrained``
    keeps them in the config: ``_extra_states``), and a weight a layer saves under its own name
    (``rename_in_state_dict``: "weight" for "rows.weight") under its real path."""
    for key in [k for k in state_dict if k.startswith(prefix) and k.endswith(EXTRA)]:
        del state_dict[key]
    for name, sub in module.named_modules():
        at = prefix + (name + "." if name else "")
        for hook in list(sub._state_dict_hooks.values()):
            renamed = getattr(hook, "__self__", None)
            if isinstance(renamed, _RenamedKey) and at + renamed.outer in state_dict:
                state_dict[at + renamed.inner] = state_dict.pop(at + renamed.outer)
    return state_dict


def _own_extra_state(module: nn.Module) -> bool:
    return type(module).get_extra_state is not nn.Module.get_extra_state


def _extra_states(head: nn.Module) -> dict:
    """Each of the head's modules' extra state, JSON-able (a tensor as its list and dtype)."""
    def plain(value):
        if torch.is_tensor(value):
            return {"tensor": value.detach().cpu().tolist(), "dtype": str(value.dtype)}
        return value
    return {name: {k: plain(v) for k, v in module.get_extra_state().items()}
            for name, module in head.named_modules() if _own_extra_state(module)}


def _set_extra_states(head: nn.Module, states: dict) -> None:
    def value(v):
        if isinstance(v, dict) and set(v) == {"tensor", "dtype"}:
            return torch.tensor(v["tensor"], dtype=getattr(torch, v["dtype"].split(".")[-1]))
        return v
    for name, state in states.items():
        head.get_submodule(name).set_extra_state({k: value(v) for k, v in state.items()})
