"""semhuff-lm and semhuff.lm.trainer (its settings, evaluation and saved models): the data
pipeline against hand examples, a tiny LM that learns (end to end, API and CLI), save / load,
bad input, divergence, and semhuff without torch."""
import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from semhuff.cli.lm import main as lm_main  # noqa: E402
from semhuff.errors import CorpusError, OptionError, TrainingDiverged  # noqa: E402
from semhuff.lm.token_ids import (EOS, UNK, batchify, build_vocab, load_data, split_heldout,  # noqa: E402
                             tokens)
from semhuff.lm.evaluation import evaluate  # noqa: E402
from semhuff.lm.models import load_model, save_model  # noqa: E402
from semhuff.lm.networks import lm_network_class  # noqa: E402
from semhuff.lm.settings import LMSettings  # noqa: E402
from semhuff.lm.trainer import train_lm  # noqa: E402


def test_tokens_unk_and_eos_by_hand():
    assert tokens("a b\n\nc a\n", eos=True) == ["a", "b", EOS, "c", "a", EOS]
    assert tokens("a b\nc a", eos=False) == ["a", "b", "c", "a"]
    vocab = build_vocab(["a", "b", "a", "c", "a", "b", "d"], max_vocab=3)
    # a (3) and b (2) kept; c and d become <unk> with their summed count 2, after a, tied with b
    assert vocab.words == ["a", "b", UNK] and vocab.counts.tolist() == [3, 2, 2]
    # nothing dropped: <unk> still has a place (count 1), for held-out words never seen
    assert build_vocab(["x", "y", "x"]).words == ["x", "y", UNK]


def test_text8_split_by_characters():
    text = "alpha beta gamma delta"  # 22 characters
    train, held = split_heldout(text, 8)  # the cut at 14 falls in "gamma": moved to its end
    assert (train, held) == ("alpha beta gamma", " delta")
    with pytest.raises(OptionError):
        split_heldout(text, 30)


def test_batchify_rows_are_contiguous_text():
    ids = np.arange(11)
    assert batchify(ids, 2).tolist() == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


@pytest.fixture(scope="module")
def small(tmp_path_factory, lee_path):
    """lee's first 260 documents (lines) as training text, the rest held out."""
    lines = open(lee_path, encoding="utf-8").read().splitlines()
    folder = tmp_path_factory.mktemp("lm")
    (folder / "train.txt").write_text("\n".join(lines[:260]) + "\n")
    (folder / "held.txt").write_text("\n".join(lines[260:]) + "\n")
    return folder


@pytest.mark.parametrize("output,arch", [("tree", "lstm"), ("self-organized-binary", "lstm"),
                                         ("full", "lstm"), ("tree", "gru")])
def test_a_tiny_lm_learns(small, output, arch):
    data = load_data([str(small / "train.txt")], [str(small / "held.txt")], max_vocab=500)
    assert data.eos and data.vocab.words.count(UNK) == 1
    settings = LMSettings(output=output, emb=32, hidden=32, arch=arch, epochs=2, batch_size=16,
                          progress=False, layer_options={"reassign_every": 20}
                          if output.startswith("self") else {})
    model, report = train_lm(data, settings)
    if output == "full":  # a zero-mean start: about uniform, perplexity ~V
        assert report.untrained.perplexity == pytest.approx(len(data.vocab), rel=0.1)
    first, last = report.epochs[0].heldout.perplexity, report.epochs[-1].heldout.perplexity
    assert last < first < report.untrained.perplexity
    # better than the training text's unigram model, computed here: it uses the context
    p = data.vocab.counts / data.vocab.counts.sum()
    unigram = math.exp(-np.log(p[data.heldout]).mean())
    assert last < 0.8 * unigram
    if output.startswith("self"):
        assert len(report.reassignments) >= 5
        h = report.epochs[-1].heldout
        assert h.cluster_perplexity * h.in_cluster_perplexity == pytest.approx(h.perplexity)
    # the held-out figure is the mean of the layer's own log-probabilities: recompute one batch
    again = evaluate(model, data.heldout, settings.eval_batch, settings.bptt)
    assert again.perplexity == pytest.approx(report.epochs[-1].heldout.perplexity, rel=1e-9)


@pytest.mark.parametrize("arch", ["lstm", "gru"])
def test_save_load_gives_the_same_perplexity(small, tmp_path, arch):
    data = load_data([str(small / "train.txt")], [str(small / "held.txt")], max_vocab=300)
    model, report = train_lm(data, LMSettings(output="self-organized", emb=16, hidden=16,
                                              arch=arch, progress=False,
                                              layer_options={"reassign_every": 10}))
    assert report.reassignments
    path = tmp_path / "m.pt"
    save_model(str(path), model, data, report)
    back, vocab, settings = load_model(str(path))
    assert vocab.words == data.vocab.words
    assert settings.arch == arch and isinstance(back.rnn, lm_network_class(arch).CELL)
    assert evaluate(back, data.heldout).perplexity == pytest.approx(
        report.epochs[-1].heldout.perplexity, rel=1e-9)


def test_cli_end_to_end_and_its_errors(small, tmp_path, capsys):
    out, rep = tmp_path / "lm.pt", tmp_path / "r.json"
    assert lm_main([str(small / "train.txt"), "--heldout", str(small / "held.txt"),
                    "--max-vocab", "400", "--emb", "16", "--hidden", "16", "--loss", "class",
                    "--clustering", "random", "--no-progress", "-o", str(out), "--report",
                    str(rep)]) == 0
    printed = capsys.readouterr().out
    assert "held-out perplexity" in printed and "cluster" in printed and out.stat().st_size
    report = json.loads(rep.read_text())
    assert report["epochs"][0]["heldout"]["perplexity"] < report["untrained"]["perplexity"]
    bad = [
        (["--heldout-chars", "50"], ["nope.txt"], "corpus not found"),
        ([], [str(small / "train.txt")], "give the held-out text"),
        (["--heldout-chars", "100", "--tree", "random", "--loss", "full"],
         [str(small / "train.txt")], "--tree: not used by --loss full"),
        (["--heldout-chars", "100", "--layer-option", "colour=1"], [str(small / "train.txt")],
         "colour"),
        (["--heldout-chars", "100", "--bptt", "0"], [str(small / "train.txt")], "bptt"),
    ]
    for flags, corpus, message in bad:
        target = tmp_path / "never.pt"
        assert lm_main([*corpus, *flags, "-o", str(target), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
        assert not target.exists()


def test_a_diverging_run_fails(small):
    data = load_data([str(small / "train.txt")], [str(small / "held.txt")], max_vocab=200)
    with pytest.raises(TrainingDiverged):
        train_lm(data, LMSettings(output="full", emb=8, hidden=8, lr=1e4, clip=1e4,
                                  progress=False))


def test_empty_held_out_is_an_error(small, tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(CorpusError):
        load_data([str(small / "train.txt")], [str(tmp_path / "empty.txt")])


def test_semhuff_imports_and_trains_without_torch(tmp_path):
    """With torch hidden, the package, skip-gram training and the other CLIs work; semhuff-lm
    says in one line what to install."""
    script = textwrap.dedent("""
        import sys

        class NoTorch:  # an import of torch fails as it does without the extra
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError(f"No module named {name!r}")

        sys.meta_path.insert(0, NoTorch())
        import semhuff
        from semhuff import Word2Vec
        from gensim.test.utils import common_texts
        m = Word2Vec(common_texts, min_count=1, epochs=1, vector_size=8, progress=False)
        assert len(m.wv) == 12
        from semhuff.cli import train  # noqa
        try:
            import semhuff.lm
        except ImportError as exc:
            assert "pip install 'semhuff[torch]'" in str(exc)
        else:
            raise SystemExit("semhuff.lm imported without torch")
        from semhuff.cli.lm import main
        sys.exit(main(["x.txt", "--heldout-chars", "10"]))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith("needs PyTorch: pip install 'semhuff[torch]'")


def test_the_trainers_sparse_default_holds_on_the_cpu_only():
    """sparse=True is semhuff-lm's choice for the tree forms on the CPU; on a GPU the dense
    gradient measured 5-7x faster for a whole LSTM step (docs/lm.md), so none is set there."""
    from semhuff.lm.settings import LMSettings
    for output in ("tree", "self-organized-binary"):
        assert LMSettings(output=output).layer_settings().get("sparse") is True
        assert "sparse" not in LMSettings(output=output, device="cuda").layer_settings()
        assert LMSettings(output=output, device="cuda:1",
                          layer_options={"sparse": True}).layer_settings()["sparse"] is True


def test_retree_every_rebuilds_the_tree_from_the_networks_own_embeddings():
    """--retree-every 1 over 2 epochs: after the first, a SemHuff tree over the LSTM's input
    embeddings, every row from carried_rows, Adagrad's sums restarted; training goes on."""
    import numpy as np

    from semhuff.cli.common import resolve_corpus
    from semhuff.errors import OptionError
    from semhuff.lm.token_ids import load_data
    from semhuff.lm.settings import LMSettings
    from semhuff.lm.trainer import train_lm
    from semhuff.trees.huffman import build_huffman
    data = load_data(resolve_corpus(["lee"]), None, 20000, 1, 200, 4000, None)
    seen = {}
    import semhuff.lm.layers.tree as tree_softmax
    original = tree_softmax.TreeSoftmax.retree

    def spy(self, tree, counts, optimizer=None):
        import torch
        old, before = self.tree, self.weight.detach().clone()
        original(self, tree, counts, optimizer)
        seen["tree"] = tree
        seen["carried"] = torch.allclose(self.weight, tree_softmax.carried_rows(
            old, tree, before, torch.as_tensor(counts)))
        seen["state_reset"] = bool((optimizer.state[self.weight]["sum"] == 0).all())
    tree_softmax.TreeSoftmax.retree = spy
    try:
        model, report = train_lm(data, LMSettings(output="tree", layer_options={"tree": "huffman"},
                                                  emb=8, hidden=8, epochs=2, retree_every=1,
                                                  threads=1, progress=False))
    finally:
        tree_softmax.TreeSoftmax.retree = original
    tree = model.output.tree
    assert tree is seen["tree"] and tree.kind == "semhuff"
    assert seen["carried"] and seen["state_reset"]
    assert not np.array_equal(tree.parent, build_huffman(data.vocab.counts).parent)
    assert [r.get("retree") for r in report.reassignments] == [
        "semhuff from the input embeddings"]
    assert all(np.isfinite(e.heldout.perplexity) for e in report.epochs)
    assert len(report.epochs) == 2
    with pytest.raises(OptionError, match="--loss tree"):
        LMSettings(output="class", retree_every=1).check()
    with pytest.raises(OptionError, match="retree_every"):
        LMSettings(retree_every=-1).check()
