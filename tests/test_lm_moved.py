"""The names semhuff.lm had before it was split by job (issue 47) keep working for one release,
each with a DeprecationWarning saying the new one: former module paths (the same objects, and a
monkeypatch through one reaches the code), former names of classes and functions."""
import importlib
import re
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
    said = re.escape(f"{module}.{old} is now {new_module}.{new_name}")
    with pytest.warns(DeprecationWarning, match=said):
        got = getattr(holder, old)
    if new_name.endswith("()"):  # a value made when asked for
        assert got == getattr(importlib.import_module(new_module), new_name[:-2])()
    else:
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


# -- former keywords, attributes and files -----------------------------------------------------------

def _tiny_data():
    import numpy as np
    from lm_helpers import zipf_vocab
    from semhuff.lm.token_ids import LMData
    rng = np.random.default_rng(3)
    vocab = zipf_vocab(30)
    p = vocab.counts / vocab.counts.sum()
    return LMData(vocab, rng.choice(30, 1200, p=p), rng.choice(30, 200, p=p), eos=False)


TINY = dict(output="tree", arch="gru", layer_options={"tree": "random"}, emb=6, hidden=6,
            batch_size=4, bptt=5, threads=1, progress=False)


def _as_before(settings: dict) -> dict:
    """Settings as a file written before the split held them: ``cell`` for ``arch``, the four
    layer fields (None unless given, the given ones also in ``layer_options``)."""
    old = {k: v for k, v in settings.items() if k != "arch"}
    return {**old, "cell": settings["arch"], "tree": None, "similarity": None, "clusters": None,
            "clustering": None}


def _keys_as_before(state: dict) -> dict:
    """A state_dict with the recurrent layer under its former name, ``lstm``, whatever its cell."""
    return {("lstm." + k[4:] if k.startswith("rnn.") else k): v for k, v in state.items()}


def test_former_settings_keywords_and_attribute_warn_and_mean_the_same():
    from semhuff.lm.settings import LMSettings
    with pytest.warns(DeprecationWarning, match=re.escape("LMSettings(cell=...) is now "
                                                          "LMSettings(arch=...)")):
        old = LMSettings(cell="gru", output="tree")
    with pytest.warns(DeprecationWarning, match=re.escape("LMSettings(tree=...) is now "
                                                          "LMSettings(layer_options={...})")):
        old = LMSettings(arch="gru", tree="random", clusters=None)
    assert old == LMSettings(arch="gru", layer_options={"tree": "random"})
    with pytest.warns(DeprecationWarning, match=re.escape("LMSettings.cell is now "
                                                          "LMSettings.arch")):
        assert old.cell == "gru"


def test_a_networks_former_keyword_and_attribute_warn():
    from semhuff.lm import make_output_layer
    from semhuff.lm.networks import LSTMLanguageModel, RecurrentLanguageModel
    layer = make_output_layer("full", 4, counts=[3, 2, 1])
    with pytest.warns(DeprecationWarning, match=r"cell=\.\.\.\) is now the network"):
        model = LSTMLanguageModel(3, layer, emb=4, hidden=4, cell="gru")
    assert isinstance(model.rnn, torch.nn.GRU) and isinstance(model, RecurrentLanguageModel)
    with pytest.warns(DeprecationWarning, match=r"\.lstm is now \.rnn"):
        assert model.lstm is model.rnn


def test_train_lms_former_keyword_warns_and_an_unknown_one_is_a_type_error():
    from semhuff.errors import OptionError
    from semhuff.lm.settings import LMSettings
    from semhuff.lm.trainer import train_lm
    with pytest.warns(DeprecationWarning, match=re.escape("train_lm(checkpoint_every=...) is "
                                                          "now train_lm(checkpoint_steps=...)")):
        with pytest.raises(OptionError, match="--checkpoint-steps need --checkpoint PATH"):
            train_lm(_tiny_data(), LMSettings(**TINY), checkpoint_every=7)  # taken as steps
    with pytest.raises(TypeError, match="checkpoint_evry"):
        train_lm(_tiny_data(), LMSettings(**TINY), checkpoint_evry=7)


def test_a_model_file_written_before_the_split_loads_as_it_was(tmp_path):
    """A GRU model saved before: ``cell`` and the four layer fields in its settings, its
    recurrent layer's weights under ``lstm.``: it loads, no warning, the same weights and
    perplexity as the model it was."""
    import warnings
    from semhuff.lm.evaluation import evaluate
    from semhuff.lm.models import load_model, save_model
    from semhuff.lm.settings import LMSettings
    from semhuff.lm.trainer import train_lm
    data = _tiny_data()
    model, report = train_lm(data, LMSettings(**TINY))
    path = tmp_path / "before.pt"
    save_model(str(path), model, data, report)
    payload = torch.load(path, weights_only=False)
    payload["settings"] = _as_before(payload["settings"])
    payload["state_dict"] = _keys_as_before(payload["state_dict"])
    assert any(k.startswith("lstm.") for k in payload["state_dict"])
    torch.save(payload, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back, vocab, settings = load_model(str(path))
    assert settings == LMSettings(**TINY)
    assert isinstance(back.rnn, torch.nn.GRU)
    assert all(torch.equal(a, b) for a, b in zip(back.parameters(), model.parameters()))
    assert torch.equal(back.output.tree_parent, model.output.tree_parent)
    assert evaluate(back, data.heldout).perplexity == evaluate(model, data.heldout).perplexity


def test_a_checkpoint_written_before_the_split_resumes_to_the_uninterrupted_numbers(tmp_path):
    """A checkpoint of epoch 1 in the former layout (settings with ``cell`` and the layer
    fields, weights under ``lstm.``): ``--resume`` takes it and ends where an uninterrupted run
    of 2 epochs ends."""
    import dataclasses
    from semhuff.lm.settings import LMSettings
    from semhuff.lm.trainer import train_lm
    data = _tiny_data()
    _, whole = train_lm(data, LMSettings(**TINY, epochs=2))
    path = str(tmp_path / "run.ckpt")
    train_lm(data, LMSettings(**TINY, epochs=1), checkpoint=path)
    payload = torch.load(path, weights_only=False)
    payload["settings"] = _as_before(payload["settings"])
    payload["model_state"] = _keys_as_before(payload["model_state"])
    payload["report"]["settings"] = _as_before(payload["report"]["settings"])
    torch.save(payload, path)
    _, resumed = train_lm(data, LMSettings(**TINY, epochs=2), checkpoint=path, resume=True)
    assert [dataclasses.asdict(e.heldout) for e in resumed.epochs] == \
        [dataclasses.asdict(e.heldout) for e in whole.epochs]
    assert [e.train_loss for e in resumed.epochs] == [e.train_loss for e in whole.epochs]
