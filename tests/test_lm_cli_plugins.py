"""Plug points of semhuff-lm, used from one file outside the package as a developer would: an
LM output layer with an option, an LM network, and a tree builder (with an option) that both
semhuff-train and semhuff-lm use; tree files for both CLIs."""
import json
import math
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from semhuff.cli.lm import main as lm_main  # noqa: E402
from semhuff.cli.train import main as train_main  # noqa: E402

PLUGIN = textwrap.dedent('''
    """An LM output layer, an LM network and a tree builder, defined outside semhuff."""
    import numpy as np
    import torch
    from torch import nn

    from semhuff.lm.layers.base import LayerOutput
    from semhuff.lm.networks import register_lm_network
    from semhuff.lm.layers.registry import register_lm_layer
    from semhuff.options import Option, non_negative, positive_number
    from semhuff.trees import register_tree_builder
    from semhuff.trees.clusters import balanced_tree


    @register_lm_layer("plugin-tempered")
    class Tempered(nn.Module):
        """A full softmax over logits divided by a temperature (its option)."""
        OPTIONS = (Option("temperature", float, 1.0, "logits / this", check=positive_number),)

        def __init__(self, in_features, n_classes, temperature=1.0):
            super().__init__()
            self.in_features, self.n_classes = in_features, n_classes
            self.temperature = temperature
            self.linear = nn.Linear(in_features, n_classes)

        @classmethod
        def from_vocab(cls, in_features, vocab, *, seed=1, device=None, dtype=None, **settings):
            return cls(in_features, len(vocab.counts), **settings).to(device=device, dtype=dtype)

        def log_prob(self, input):
            return torch.log_softmax(self.linear(input) / self.temperature, dim=-1)

        def forward(self, input, target):
            out = self.log_prob(input).gather(-1, target.unsqueeze(-1)).squeeze(-1)
            return LayerOutput(out, -out.mean())

        def predict(self, input):
            return self.log_prob(input).argmax(-1)

        def after_step(self, optimizer=None):
            return None

        def cluster_log_prob(self, h, target):
            return None

        def describe(self):
            return f"tempered softmax (temperature {self.temperature:g})"


    @register_lm_network("plugin-bigram")
    class Bigram(nn.Module):
        """No recurrence: each position sees only its own word (a bigram model)."""
        def __init__(self, n_words, output, emb=8, hidden=8, dropout=0.0):
            super().__init__()
            self.embedding = nn.Embedding(n_words, emb)
            self.project = nn.Linear(emb, hidden)
            self.output = output

        def hidden(self, ids, state=None):
            return torch.tanh(self.project(self.embedding(ids))), None

        def forward(self, ids, targets, state=None):
            out, state = self.hidden(ids, state)
            return self.output(out, targets), state


    @register_tree_builder("plugin-rotated", (Option("offset", int, 0, "rotate the words by "
                                                     "this", check=non_negative),))
    def rotated(vocab, similarity=None, seed=1, offset=0):
        """A balanced tree over the frequency-sorted words rotated by ``offset``."""
        return balanced_tree(np.roll(np.arange(len(vocab)), offset), "plugin-rotated")
''')

TINY = ["lee", "--heldout-chars", "20000", "--max-vocab", "300", "--emb", "8", "--hidden", "8",
        "--train-tokens", "3000", "--no-progress", "-q"]


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    (tmp_path / "semhuff_lm_test_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "semhuff_lm_test_plugin"


def _data():
    from semhuff.cli.common import resolve_corpus
    from semhuff.lm.token_ids import load_data
    return load_data(resolve_corpus(["lee"]), None, 20000, 1, 300, 3000, None)


def test_a_plugin_output_layer_and_network_from_the_command_line(tmp_path, capsys, plugin):
    from semhuff.lm.models import load_model
    out, rep = tmp_path / "m.pt", tmp_path / "r.json"
    assert lm_main([*TINY, "--plugin", plugin, "--loss", "plugin-tempered", "--temperature",
                    "2", "--arch", "plugin-bigram", "-o", str(out), "--report", str(rep)]) == 0, \
        capsys.readouterr().err
    mod = sys.modules[plugin]
    model, vocab, settings = load_model(str(out))
    assert isinstance(model, mod.Bigram) and isinstance(model.output, mod.Tempered)
    assert model.output.temperature == 2.0 and settings.arch == "plugin-bigram"
    report = json.loads(rep.read_text())
    assert report["epochs"][0]["heldout"]["perplexity"] < report["untrained"]["perplexity"]
    # --layer-option reaches the same declaration, typed and checked by it
    assert lm_main([*TINY, "--plugin", plugin, "--loss", "plugin-tempered", "--layer-option",
                    "temperature=-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "temperature must be > 0" in err[0], err
    # its option is refused for another layer, in one line
    assert lm_main([*TINY, "--plugin", plugin, "--loss", "full", "--temperature", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--temperature: not used by --loss full" in err[0], err

    # a network's own option (the Transformer's --layers) is refused for another network
    assert lm_main([*TINY, "--layers", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--layers: not used by --arch lstm" in err[0], err
    from semhuff.errors import OptionError
    from semhuff.lm.settings import LMSettings
    with pytest.raises(OptionError, match="the lstm network does not use layers"):
        LMSettings(network_options={"layers": 3}).check()

    # from Python: make_output_layer finds it and passes its option; the numbers are its own
    from semhuff.lm import make_output_layer
    layer = make_output_layer("plugin-tempered", 8, vocab, temperature=0.5, dtype=torch.float64)
    h = torch.randn(4, 8, dtype=torch.float64)
    by_hand = torch.log_softmax((h @ layer.linear.weight.T + layer.linear.bias) / 0.5, dim=-1)
    assert torch.allclose(layer.log_prob(h), by_hand)
    assert layer.vocab_fingerprint[0] == len(vocab)  # the registry's fingerprint is there too


def test_a_plugin_tree_builder_in_semhuff_train_and_semhuff_lm(tmp_path, capsys, plugin):
    from semhuff import Word2Vec
    from semhuff.lm.models import load_model
    from semhuff.trees.clusters import balanced_tree
    model_path = tmp_path / "w.npz"
    assert train_main(["lee", "-o", str(tmp_path / "v.bin"), "--save-model", str(model_path),
                       "--plugin", plugin, "--tree", "plugin-rotated", "--offset", "3",
                       "--dim", "8", "--min-count", "3", "--epochs", "1", "--workers", "1",
                       "-q"]) == 0, capsys.readouterr().err
    w2v = Word2Vec.load(str(model_path), progress=False)
    expected = balanced_tree(np.roll(np.arange(len(w2v.vocab)), 3), "plugin-rotated")
    assert w2v.tree.kind == "plugin-rotated"
    assert np.array_equal(w2v.tree.parent, expected.parent)

    out = tmp_path / "m.pt"
    assert lm_main([*TINY, "--plugin", plugin, "--tree", "plugin-rotated", "--offset", "3",
                    "-o", str(out)]) == 0, capsys.readouterr().err
    model, vocab, _ = load_model(str(out))
    expected = balanced_tree(np.roll(np.arange(len(vocab)), 3), "plugin-rotated")
    assert np.array_equal(model.output.tree.parent, expected.parent)
    # the builder's option with another tree: refused by that tree's builder, in one line
    assert lm_main([*TINY, "--plugin", plugin, "--tree", "random", "--offset", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "offset" in err[0], err


def test_semhuff_lm_trains_on_a_tree_file(tmp_path, capsys):
    from semhuff.lm.evaluation import evaluate
    from semhuff.lm.models import load_model
    from semhuff.trees import make_tree
    from semhuff.trees.spec import relabel_leaves
    data = _data()
    tree = make_tree("random", data.vocab, seed=9)
    # stored with its words in another order: matched by word
    perm = np.random.default_rng(0).permutation(len(data.vocab))
    from semhuff.vocab import Vocab
    words = Vocab([data.vocab.words[p] for p in perm], data.vocab.counts[perm],
                  data.vocab.total_tokens)
    path = tmp_path / "tree.npz"
    relabel_leaves(tree, np.argsort(perm)).save(str(path), words)
    out = tmp_path / "m.pt"
    assert lm_main([*TINY, "--tree", str(path), "-o", str(out)]) == 0, capsys.readouterr().err
    model, vocab, _ = load_model(str(out))
    assert vocab.words == data.vocab.words
    got = model.output.tree
    assert all(got.codes[i, :got.lengths[i]].tolist() == tree.codes[i, :tree.lengths[i]].tolist()
               for i in range(len(vocab)))
    assert math.isfinite(evaluate(model, data.heldout).perplexity)
    # a tree file over other words, and a name that is neither: one line each
    other = tmp_path / "other.npz"
    make_tree("huffman", Vocab(["a", "b", "c"], [3, 2, 1], 6)).save(str(other),
                                                                    Vocab(["a", "b", "c"],
                                                                          [3, 2, 1], 6))
    for spec, message in ((str(other), "another vocabulary"), ("nosuch", "neither a tree kind")):
        assert lm_main([*TINY, "--tree", spec]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err


def test_semhuff_train_reads_a_tree_file_without_building_a_huffman_tree(tmp_path, capsys,
                                                                        lee_path, monkeypatch):
    from semhuff import Word2Vec
    from semhuff.trees import TREE_BUILDERS
    from semhuff.cli.tree import main as tree_main
    tree = tmp_path / "tree.npz"
    assert tree_main(["-q", "build", "--corpus", lee_path, "--kind", "random", "--min-count", "3",
                      "-o", str(tree)]) == 0
    built = []
    huffman = TREE_BUILDERS["huffman"]
    monkeypatch.setitem(TREE_BUILDERS, "huffman",
                        lambda *a, **k: built.append(1) or huffman(*a, **k))
    model = tmp_path / "m.npz"
    assert train_main(["lee", "-o", str(tmp_path / "v.bin"), "--save-model", str(model), "--tree",
                       str(tree), "--dim", "8", "--min-count", "3", "--epochs", "1",
                       "--workers", "1", "-q"]) == 0, capsys.readouterr().err
    assert built == []
    assert Word2Vec.load(str(model), progress=False).tree.kind == "random"
