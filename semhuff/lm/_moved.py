"""Where the names of ``semhuff.lm`` went when the package was split by job: the former module
paths, names, keywords and settings keep working for one release, each with a
``DeprecationWarning`` saying the new one; files written before still load. The package uses
this module only to take those former names (``install``, ``moved_names``,
``accept_former_settings``, ``renamed_keyword``, ``upgrade_settings``).

* ``MOVED_MODULES``: a former module path -> its new module. Imported under the former path it
  is a stand-in that reads from, and writes to, the new module (so ``monkeypatch.setattr`` on
  it reaches the code), and also knows the names that moved out of it (``MOVED_NAMES``);
* ``MOVED_NAMES``: a module -> {former name: "new.module:name"}, for a module that stays
  (``moved_names`` is its ``__getattr__``) or a former path ("module:function()": the value
  the function makes);
* ``LEGACY_LAYER_FIELDS``, ``RENAMED_SETTINGS``: the ``LMSettings`` fields that became other
  things, for saved files and for callers (``upgrade_settings``).
"""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from typing import Any, Dict

# a former module path -> its new module
MOVED_MODULES = {
    "semhuff.lm.base": "semhuff.lm.layers.base",
    "semhuff.lm.full": "semhuff.lm.layers.full",
    "semhuff.lm.tree_softmax": "semhuff.lm.layers.tree",
    "semhuff.lm.class_softmax": "semhuff.lm.layers.classes",
    "semhuff.lm.self_organizing": "semhuff.lm.layers.self_organized",
    "semhuff.lm.output": "semhuff.lm.layers.registry",
    "semhuff.lm.paths": "semhuff.lm.kernels.paths",
    "semhuff.lm.path_gradients": "semhuff.lm.kernels.path_gradients",
    "semhuff.lm.triton_paths": "semhuff.lm.kernels.paths_triton",
    "semhuff.lm.triton_clusters": "semhuff.lm.kernels.clusters_triton",
    "semhuff.lm.numba_clusters": "semhuff.lm.kernels.clusters_numba",
    "semhuff.lm.optim_state": "semhuff.lm.kernels.optimizer_state",
}

_CLASSES = {"TwoLevelSoftmax": "semhuff.lm.layers.classes:ClassSoftmax",
            "SelfOrganizingSoftmax": "semhuff.lm.layers.self_organized:SelfOrganizedSoftmax",
            "SelfOrganizingBinary": "semhuff.lm.layers.self_organized:SelfOrganizedBinary"}

# a module (or a former path) -> {former name: "new.module:name"}
MOVED_NAMES: Dict[str, Dict[str, str]] = {
    "semhuff.lm": dict(_CLASSES),
    "semhuff.lm.class_softmax": {
        "TwoLevelSoftmax": _CLASSES["TwoLevelSoftmax"],
        "InClusterLogProb": "semhuff.lm.kernels.clusters_torch:InClusterLogProb"},
    "semhuff.lm.self_organizing": {k: v for k, v in _CLASSES.items() if "Organiz" in k},
    "semhuff.lm.base": {"tokens_by_cluster": "semhuff.lm.kernels.clusters_torch:tokens_by_cluster"},
    "semhuff.lm.output": {
        **{name: f"semhuff.lm.layers.base:{name}" for name in ("LOSS_OPTIONS", "SPARSE")},
        **{name: f"semhuff.options:{name}" for name in ("boolean", "int_list")},
        **{name: f"semhuff.lm.layers.vocabulary:{name}"
           for name in ("as_vocab", "attach_fingerprint", "check_fingerprint",
                        "require_frequency_order", "vocabulary_fingerprint")},
        "tree_for": "semhuff.lm.layers.tree:tree_for",
        "CLUSTERS": "semhuff.trees.clusters:CLUSTERS",
        "TREE": "semhuff.trees.spec:TREE",
        "SIMILARITY": "semhuff.trees.spec:SIMILARITY"},
    "semhuff.lm.trainer": {  # (what the run itself uses is still there: LMSettings, evaluate)
        "PRECISIONS": "semhuff.lm.settings:PRECISIONS",
        **{name: f"semhuff.lm.report:{name}" for name in ("HeldOut", "write_report")},
        **{name: f"semhuff.lm.models:{name}" for name in ("LoadedModel", "load_model",
                                                         "save_model")},
        "LAYER_FIELDS": "semhuff.lm._moved:LEGACY_LAYER_FIELDS"},
    "semhuff.lm.networks": {"CELLS": "semhuff.lm.networks:recurrent_cells()"},
}

# LMSettings fields that became other things: saved files keep them, callers may still give them
LEGACY_LAYER_FIELDS = ("tree", "similarity", "clusters", "clustering")  # now layer_options
RENAMED_SETTINGS = {"cell": "arch"}


def _resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    if name.endswith("()"):  # a value made when asked for
        return getattr(importlib.import_module(module), name[:-2])()
    return getattr(importlib.import_module(module), name)


def _warn(old: str, new: str) -> None:
    """The warning, attributed to the first caller outside this file and the import system."""
    frame, level = sys._getframe(1), 2
    while frame is not None:
        internal = "importlib" in frame.f_code.co_filename  # warnings skips those itself
        if not internal and frame.f_code.co_filename != __file__:
            break
        frame, level = frame.f_back, level + (not internal)
    warnings.warn(f"{old} is now {new} (the former name works for one more release)",
                  DeprecationWarning, stacklevel=level)


def moved_names(module: str):
    """A module's ``__getattr__`` for the names that moved out of it."""
    table = MOVED_NAMES.get(module, {})

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        _warn(f"{module}.{name}", table[name].replace(":", "."))
        return _resolve(table[name])
    return __getattr__


class _FormerModule(types.ModuleType):
    """A former module path: reads and writes go to the new module; the names that moved
    elsewhere come from ``MOVED_NAMES``."""

    def __init__(self, name: str, target: types.ModuleType):
        super().__init__(name, target.__doc__)
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_moved", moved_names(name))

    def __getattribute__(self, name: str):
        if name == "__dict__":  # what monkeypatch reads to undo a setattr: the new module's
            return object.__getattribute__(self, "_target").__dict__
        return super().__getattribute__(name)

    def __getattr__(self, name: str):
        if name in MOVED_NAMES.get(object.__getattribute__(self, "__name__"), {}):
            return object.__getattribute__(self, "_moved")(name)
        return getattr(object.__getattribute__(self, "_target"), name)

    def __setattr__(self, name: str, value) -> None:
        if name.startswith("__"):
            object.__setattr__(self, name, value)
        else:
            setattr(object.__getattribute__(self, "_target"), name, value)

    def __delattr__(self, name: str) -> None:
        delattr(object.__getattribute__(self, "_target"), name)

    def __dir__(self):
        return dir(object.__getattribute__(self, "_target"))


class _FormerModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the former module paths (``MOVED_MODULES``)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED_MODULES:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        new = MOVED_MODULES[spec.name]
        _warn(spec.name, new)
        return _FormerModule(spec.name, importlib.import_module(new))

    def exec_module(self, module) -> None:
        pass


def install() -> None:
    if not any(isinstance(f, _FormerModules) for f in sys.meta_path):
        sys.meta_path.append(_FormerModules())


def upgrade_settings(saved: dict, *, warn: bool, takes=None) -> dict:
    """``LMSettings`` keywords (or a saved file's settings) in today's names: ``cell`` is
    ``arch``; ``tree``, ``similarity``, ``clusters``, ``clustering`` go into ``layer_options``
    (None: not given, dropped; ``takes``: the layer's option names, the others dropped: files
    from before the layer registry held tree and clustering for every layer). ``warn``: a
    caller's keywords (a saved file's are not)."""
    out = dict(saved)
    for old, new in RENAMED_SETTINGS.items():
        if old in out:
            if warn:
                _warn(f"LMSettings({old}=...)", f"LMSettings({new}=...)")
            value = out.pop(old)
            out.setdefault(new, value)
    given = {name: out.pop(name) for name in LEGACY_LAYER_FIELDS if name in out}
    given = {k: v for k, v in given.items() if v is not None and (takes is None or k in takes)}
    if given:
        if warn:
            _warn(f"LMSettings({', '.join(f'{k}=...' for k in given)})",
                  "LMSettings(layer_options={...})")
        out["layer_options"] = {**given, **(out.get("layer_options") or {})}
    return out


def accept_former_settings(cls):
    """``LMSettings`` taking its former keywords (``upgrade_settings``) and attributes
    (``cell``), each with the warning."""
    init = cls.__init__

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        init(self, *args, **upgrade_settings(kwargs, warn=True))

    def former(old: str, new: str):
        def get(self):
            _warn(f"LMSettings.{old}", f"LMSettings.{new}")
            return getattr(self, new)
        return property(get)

    cls.__init__ = __init__
    for old, new in RENAMED_SETTINGS.items():
        setattr(cls, old, former(old, new))
    return cls


def renamed_keyword(where: str, former: dict, old: str, new: str, value):
    """``value``, or the keyword's former name's value (``former``: the call's other keywords,
    each a ``TypeError`` as Python's own unless ``old``) with the warning."""
    unknown = sorted(set(former) - {old})
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}")
    if old not in former:
        return value
    _warn(f"{where}({old}=...)", f"{where}({new}=...)")
    return former[old]

