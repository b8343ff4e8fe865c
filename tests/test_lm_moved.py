"""The names semhuff.lm had before it was split by job (issue 47) keep working for one release,
each with a DeprecationWarning saying the new one: former module paths (the same objects, and a
monkeypatch through one reaches the code), former names of classes and functions."""
import importlib
import sys

import pytest

torch = pytest.importorskip("torch")

import semhuff.lm  # noqa: E402
from semhuff.lm import _moved  # noqa: E402


def _fresh_import(name):
    sys.modules.pop(name, None)
    parent, _, child = name.rpartition(".")
    if child in vars(sys.modules[parent]):
        delattr(sys.modules[parent], child)
    return importlib.import_module(name)


@pytest.mark.parametrize("old, new", sorted(_moved.MOVED_MODULES.items()))
def test_a_former_module_path_warns_and_reads_the_new_module(old, new):
    with pytest.warns(DeprecationWarning, match=f"{old} is now {new}"):
        former = _fresh_import(old)
    module = importlib.import_module(new)
    public = [n for n in vars(module) if not n.startswith("_")]
    assert public and all(getattr(former, n) is getattr(module, n) for n in public)


def _moved_names():
    return [(module, old, target) for module, table in sorted(_moved.MOVED_NAMES.items())
            for old, target in sorted(table.items())]


@pytest.mark.parametrize("module, old, target", _moved_names())
def test_a_former_name_warns_and_is_the_new_object(module, old, target):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the module path's own warning
        holder = importlib.import_module(module)
    new_module, _, new_name = target.partition(":")
    with pytest.warns(DeprecationWarning, match=f"{module}.{old} is now {new_module}.{new_name}"):
        got = getattr(holder, old)
    assert got is getattr(importlib.import_module(new_module), new_name)


def test_an_unknown_name_is_still_an_attribute_error():
    with pytest.raises(AttributeError):
        semhuff.lm.NoSuchName
    with pytest.raises(ImportError):
        importlib.import_module("semhuff.lm.no_such_module")


def test_a_monkeypatch_through_a_former_path_reaches_the_layer_and_is_undone(monkeypatch):
    import numpy as np
    import warnings
    from semhuff.lm import ClassSoftmax
    from semhuff.lm.layers import classes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        former = importlib.import_module("semhuff.lm.class_softmax")
    real = classes.in_cluster_log_prob
    layer = ClassSoftmax(4, np.arange(10) % 3)
    h, t = torch.randn(5, 4), torch.arange(5)
    calls = []

    def counted(*args):
        calls.append(1)
        return real(*args)
    with monkeypatch.context() as patch:
        patch.setattr(former, "in_cluster_log_prob", counted)
        layer(h, t)
        assert calls == [1] and former.in_cluster_log_prob is counted
    assert classes.in_cluster_log_prob is real
    layer(h, t)
    assert calls == [1]
