"""Options declared once (``semhuff.options``): every output-layer setting the chosen layer does
not take is refused by name, on the command line and in Python; a plugin's layer, its option and
its device are reachable from the command line exactly as the built-in ones."""
import sys
import textwrap

import numpy as np
import pytest

from semhuff import Word2Vec
from semhuff.cli.train import main as train
from semhuff.errors import OptionError, TreeError
from semhuff.layers import OUTPUT_LAYERS, declared_layer_options, layer_class
from semhuff.vocab import Vocab

BUILTIN = ("hs", "ns", "class", "hs-self-organized")


def _a_valid_value(option) -> str:
    if option.choices:
        return str(option.choices[-1])
    return {int: "3", float: "0.5"}.get(option.type, "x")


def _cases():
    table = declared_layer_options()
    for loss in BUILTIN:
        takes = {o.name for o in layer_class(loss).declared_options()}
        for name, (option, _) in sorted(table.items()):
            if option.cli and name not in takes:
                yield loss, option


@pytest.mark.parametrize("loss,option", list(_cases()),
                         ids=lambda v: v if isinstance(v, str) else v.cli_flag)
def test_an_option_the_layer_does_not_use_is_refused_by_name(tmp_path, capsys, loss, option):
    out = tmp_path / "v.bin"
    code = train(["lee", "-o", str(out), "--loss", loss, option.cli_flag, _a_valid_value(option),
                  "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"{option.cli_flag}: not used by --loss {loss}" in err[0]
    assert not out.exists()
    # the same setting in Python: an OptionError naming it, before any corpus is read
    with pytest.raises(OptionError, match=f"loss '{loss}' does not use {option.name}"):
        Word2Vec(loss=loss, layer_options={option.name: option.type(_a_valid_value(option))})


def test_every_declared_option_is_a_keyword_its_layer_builds_with():
    """The declarations and the constructors agree: each layer builds with each of its own
    options at its declared default (tree builders' options with their own tree)."""
    vocab = Vocab([f"w{i}" for i in range(40)], np.arange(400, 0, -10), 8200, 1)
    for loss in BUILTIN:
        cls = layer_class(loss)
        for option in cls.OPTIONS:
            if option.default is None:
                continue
            layer = cls.create(vocab, seed=1, **{option.name: option.default})
            assert type(layer) is cls
    hs = layer_class("hs").create(vocab, tree="clusters", clusters=4)
    assert hs.tree.kind == "clusters"
    with pytest.raises(TreeError, match="the huffman tree does not use clusters"):
        layer_class("hs").create(vocab, tree="huffman", clusters=4)


PLUGIN = textwrap.dedent('''
    """An output layer and a device defined outside semhuff, in one file."""
    import numba
    import numpy as np

    from semhuff.devices import CpuDevice, register_device
    from semhuff.layers import OutputLayer, register_output_layer
    from semhuff.options import Option, positive_number

    CHUNKS = []


    @numba.njit(nogil=True)
    def body(h, w, weights, larg, alpha, err, state):
        # predict w by one logistic unit (its own row), the score scaled by the layer's option
        scale = larg[0][0]
        s = 0.0
        for d in range(h.shape[0]):
            s += h[d] * weights[w, d]
        p = 1.0 / (1.0 + np.exp(-scale * s))
        g = (1.0 - p) * scale * alpha
        for d in range(h.shape[0]):
            err[d] = g * weights[w, d]
            weights[w, d] += g * h[d]
        return -np.log(p), state


    @register_output_layer("plugin-logistic")
    class Logistic(OutputLayer):
        OPTIONS = (Option("scale", float, 1.0, "score scale", check=positive_number),)

        def __init__(self, scale=1.0):
            super().__init__()
            self.scale = float(scale)

        def n_rows(self, n_words):
            return n_words

        def kernel_args(self):
            return (np.array([self.scale], np.float32),)

        def custom_body(self):
            return body

        def config(self):
            return {"scale": self.scale}

        def row_updates(self, trained, counts):
            return trained  # a word's own row, once per prediction of it: Dask may combine


    @register_device("counting-cpu")
    class CountingCpu(CpuDevice):
        """The CPU's kernels, counting the chunks it trains."""
        def open(self, syn0, layer, workers):
            session = super().open(syn0, layer, workers)
            train_chunk = session.train_chunk

            def counted(*args):
                CHUNKS.append(1)
                return train_chunk(*args)
            session.train_chunk = counted
            return session
''')


def test_a_plugin_layer_its_option_and_its_device_from_the_command_line(tmp_path, capsys,
                                                                        monkeypatch):
    (tmp_path / "semhuff_test_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    model = tmp_path / "m.npz"
    plugin = ["--plugin", "semhuff_test_plugin", "--loss", "plugin-logistic"]
    common = ["--dim", "12", "--min-count", "3", "--epochs", "1", "-q"]
    assert train(["lee", "-o", str(model), *plugin, "--scale", "0.5", "--device", "counting-cpu",
                  "--workers", "2", *common]) == 0, capsys.readouterr().err
    mod = sys.modules["semhuff_test_plugin"]
    assert len(mod.CHUNKS) >= 1  # it trained on the plugin device
    trained = Word2Vec.load(str(model), progress=False)
    assert isinstance(trained.layer, mod.Logistic) and trained.layer.scale == 0.5
    assert "plugin-logistic" in OUTPUT_LAYERS
    # continue it; its option is part of the model and cannot change
    more = tmp_path / "m2.npz"
    assert train(["lee", "-o", str(more), "--init-model", str(model), *plugin[:2],
                  *common[4:]]) == 0
    again = Word2Vec.load(str(more), progress=False)
    assert again.train_calls == 2 and not np.array_equal(again.syn0, trained.syn0)
    capsys.readouterr()
    assert train(["lee", "-o", str(more), "--init-model", str(model), *plugin, "--scale", "2",
                  *common[4:]]) == 2
    assert "--scale 2.0 (the model keeps its output layer: 0.5)" in capsys.readouterr().err
    # on Dask (two worker processes, which import the plugin by its name too)
    pytest.importorskip("distributed", reason="the dask extra is not installed")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    on_dask = tmp_path / "dask.npz"
    assert train(["lee", "-o", str(on_dask), *plugin, "--scale", "0.5", "--dask", "local:2",
                  "--workers", "1", *common]) == 0, capsys.readouterr().err
    dasked = Word2Vec.load(str(on_dask), progress=False)
    assert isinstance(dasked.layer, mod.Logistic) and dasked.layer.scale == 0.5
    assert np.isfinite(dasked.syn0).all() and not np.allclose(dasked.layer.weights, 0)
    # --layer-option reaches the same declaration, and checks it
    assert train(["lee", "-o", str(more), *plugin, "--layer-option", "scale=-1", *common]) == 2
    assert "scale must be > 0" in capsys.readouterr().err
