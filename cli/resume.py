"""``semhuff-train --init-model``: continue a saved model with the options the user gave.

Options that shape the model (dimension, architecture, output layer, tree, vocabulary) cannot
change when training continues: giving one that differs from the saved model is an error, never
silently ignored. Training settings (window, learning rate, down-sampling, seed, threads,
device) apply to the continued run and are saved with the model.
"""
from __future__ import annotations

import argparse
from typing import Callable, List

from semhuff.errors import OptionError
from semhuff.layers import declared_layer_options
from semhuff.model import Word2Vec

# CLI option (dest) -> (flag, what the model keeps, the saved model's value)
KEPT = {
    "dim": ("--dim", "its vector dimension", lambda m: m.vector_size),
    "model": ("--sg/--cbow", "its architecture", lambda m: "sg" if m.sg else "cbow"),
    "loss": ("--loss", "its output layer", lambda m: m.loss),
    "min_count": ("--min-count", "its vocabulary", lambda m: m.min_count),
    "max_vocab_size": ("--max-vocab-size", "its vocabulary", lambda m: m.max_vocab_size),
    "max_final_vocab": ("--max-final-vocab", "its vocabulary", lambda m: m.max_final_vocab),
}
# CLI option (dest) -> model attribute, applied to the continued run
APPLIED = {"window": "window", "alpha": "alpha", "min_alpha": "min_alpha", "sample": "sample",
           "seed": "seed", "workers": "workers", "device": "device",
           "max_sentence_length": "max_sentence_length"}


def given_options(build_parser: Callable[[], argparse.ArgumentParser], argv: List[str]) -> set:
    """The options (dests) the command line gives explicitly, whatever their value."""
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv)))


def _layer_table() -> dict:
    """KEPT's rows for every output-layer option, from the layers' declarations: a layer's
    options are saved with it and shape it."""
    def saved(name):
        if name == "tree":  # a tree file's tree is saved as a tree, not as its path
            return lambda m: getattr(m.tree, "kind", None) or m.layer_setting("tree")
        return lambda m: m.layer_setting(name)
    return {name: (option.cli_flag, "its output layer", saved(name))
            for name, (option, _) in declared_layer_options().items()}


def conflicting_options(model, args, given: set, table: dict) -> List[str]:
    """One phrase per option the command line gives with a value other than the model's
    (``table``'s and every output-layer option)."""
    if getattr(args, "layer_option", None):
        raise OptionError("--layer-option cannot change a saved model's output layer; leave "
                          "it out to continue training it")
    table = {**table, **_layer_table()}
    conflicts = []
    for dest, (flag, what, saved) in table.items():
        if dest in given and getattr(args, dest) != saved(model):
            conflicts.append(f"{flag} {getattr(args, dest)} (the model keeps {what}: "
                             f"{saved(model) if saved(model) is not None else 'none'})")
    return conflicts


def continue_model(args, given: set, progress: bool) -> Word2Vec:
    """The model of ``--init-model``, with the given training settings applied; an
    ``OptionError`` naming every given option the saved model cannot take."""
    model = Word2Vec.load(args.init_model, progress=progress)
    conflicts = conflicting_options(model, args, given, KEPT)
    if conflicts:
        raise OptionError(f"--init-model {args.init_model} cannot change: {'; '.join(conflicts)}; "
                          f"leave these options out to continue training it")
    changes = {attr: getattr(args, dest) for dest, attr in APPLIED.items()
               if dest in given or dest == "workers"}
    Word2Vec(**{**model.params(), **changes}, progress=False)  # validates the new settings
    for attr, value in changes.items():
        setattr(model, attr, value)
    return model
