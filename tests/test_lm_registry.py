"""The LM output layers' registry (semhuff.lm.layers.registry) on the Numba side's contract: declared
options (every one a layer does not take refused in one line, in Python and on semhuff-lm's
command line), the one-line swap from counts in the caller's id order (the tree equal to the
builder's over the sorted vocabulary, relabelled), device/dtype to the layer, and the
vocabulary's fingerprint in state_dict."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from semhuff.cli.lm import main as lm_main  # noqa: E402
from semhuff.errors import OptionError, TreeError  # noqa: E402
from semhuff.lm import LM_LAYERS, TreeSoftmax, make_output_layer  # noqa: E402
from semhuff.lm.layers.registry import (declared_lm_layer_options, layer_options,  # noqa: E402
                               lm_layer_class)
from semhuff.trees import make_tree  # noqa: E402
from semhuff.trees.spec import resolve_tree  # noqa: E402
from semhuff.trees.clusters import frequency_binning  # noqa: E402
from semhuff.trees.spec import relabel_leaves  # noqa: E402
from semhuff.vocab import Vocab  # noqa: E402

H = 8
BUILTIN = ("full", "adaptive", "tree", "class", "self-organized", "self-organized-binary")


def sorted_vocab(n=60):
    """Distinct counts (no ties, so the frequency order is unique), descending."""
    counts = np.arange(3 * n, 0, -3, dtype=np.int64) + 7
    return Vocab([f"w{i}" for i in range(n)], counts, int(counts.sum()))


def shuffled(vocab, seed=3):
    """(the same words under other ids, perm): caller id j is sorted word perm[j]."""
    perm = np.random.default_rng(seed).permutation(len(vocab))
    return Vocab([vocab.words[p] for p in perm], vocab.counts[perm], vocab.total_tokens), perm


def codes(tree, i):
    return tree.codes[i, :tree.lengths[i]].tolist()


# -- the one-line swap: counts in the caller's id order -------------------------------------------

def similarities(perm, seed=0):
    """(a SemHuff similarity over the sorted ids, the same one over the caller's ids): entry
    (j, k) of the caller's is that of sorted words perm[j], perm[k]."""
    import scipy.sparse as sp
    n = len(perm)
    sim = sp.random(n, n, density=0.15, random_state=seed, format="csr")
    sim = (sim + sim.T).tocsr()
    return sim, sim[perm][:, perm].tocsr()


@pytest.mark.parametrize("kind", ["huffman", "random", "alphabetical", "semhuff"])
def test_counts_in_any_id_order_give_the_sorted_vocabularys_tree(kind):
    """Word j of the caller gets the code the builder gives its word in the sorted vocabulary;
    SemHuff's similarity, given over the caller's ids, moves with the words."""
    ranked = sorted_vocab()
    mine, perm = shuffled(ranked)
    sorted_sim, my_sim = similarities(perm) if kind == "semhuff" else (None, None)
    # the builder over the frequency-sorted words
    reference = make_tree(kind, ranked, seed=5, similarity=sorted_sim)
    by_vocab = make_output_layer("tree", H, mine, tree=kind, seed=5, similarity=my_sim).tree
    for j, p in enumerate(perm):
        assert codes(by_vocab, j) == codes(reference, p)
    if kind == "huffman":  # from counts alone (no words), as a user's bincount gives them
        counts = torch.as_tensor(mine.counts)
        for layer in (make_output_layer("tree", H, counts=counts),
                      TreeSoftmax.from_counts(H, counts)):
            assert [codes(layer.tree, j) for j in range(len(mine))] == \
                [codes(reference, p) for p in perm]
        # the most frequent words get the shortest codes, whatever their ids
        lengths = by_vocab.lengths[np.argsort(-mine.counts, kind="stable")]
        assert np.all(np.diff(lengths) >= 0)


def test_the_relabelled_layer_scores_as_the_sorted_one_with_the_ids_mapped():
    ranked = sorted_vocab()
    mine, perm = shuffled(ranked)
    ours = make_output_layer("tree", H, counts=mine.counts).double()
    theirs = make_output_layer("tree", H, ranked).double()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():  # the same inner-node rows: the inner nodes are not relabelled
        theirs.weight.copy_(torch.randn(theirs.weight.shape, generator=g, dtype=torch.float64))
        ours.weight.copy_(theirs.weight)
    h = torch.randn(20, H, generator=g, dtype=torch.float64)
    t = torch.randint(0, len(mine), (20,), generator=g)
    assert torch.allclose(ours(h, t).output, theirs(h, torch.as_tensor(perm)[t]).output)
    assert torch.allclose(ours.log_prob(h), theirs.log_prob(h)[:, torch.as_tensor(perm)])


def test_class_clusters_follow_the_words_in_any_id_order():
    ranked = sorted_vocab()
    mine, perm = shuffled(ranked)
    layer = make_output_layer("class", H, mine, clusters=6)
    expected = frequency_binning(ranked.counts, 6)[perm]
    assert layer.cluster_of.tolist() == expected.tolist()


@pytest.mark.parametrize("name", ["adaptive", "self-organized", "self-organized-binary"])
def test_layers_that_need_frequency_order_say_so_in_one_line(name):
    mine, _ = shuffled(sorted_vocab())
    with pytest.raises(OptionError, match="descending order of count") as info:
        make_output_layer(name, H, mine)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("call,message", [
    (lambda: make_output_layer("tree", H, 20000), "counts="),
    (lambda: make_output_layer("tree", H), "counts="),
    (lambda: make_output_layer("tree", H, sorted_vocab(), counts=[3, 2, 1]), "not both"),
    (lambda: make_output_layer("tree", H, counts=[3.5, 2, 1]), "whole count"),
    (lambda: make_output_layer("tree", H, counts=[3, -2, 1]), ">= 0"),
    (lambda: make_output_layer("nosuch", H, sorted_vocab()), "unknown output layer"),
    (lambda: make_output_layer("tree", H, sorted_vocab(), tree=make_tree(
        "huffman", sorted_vocab(10))), "leaves"),
])
def test_bad_vocabularies_are_one_line_option_errors(call, message):
    with pytest.raises(OptionError, match=message) as info:
        call()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", BUILTIN)
def test_device_and_dtype_go_to_the_layer(name):
    layer = make_output_layer(name, H, sorted_vocab(), device="cpu", dtype=torch.float64)
    assert {p.dtype for p in layer.parameters()} == {torch.float64}
    assert {p.device.type for p in layer.parameters()} == {"cpu"}
    h = torch.randn(5, H, dtype=torch.float64)
    lp = layer.log_prob(h)
    assert lp.dtype == torch.float64
    assert torch.allclose(lp.exp().sum(1), torch.ones(5, dtype=torch.float64))


# -- the vocabulary's fingerprint in state_dict ---------------------------------------------------

@pytest.mark.parametrize("name", BUILTIN)
def test_a_state_for_another_vocabulary_of_the_same_size_is_refused(name):
    a = sorted_vocab()
    b = Vocab([f"x{i}" for i in range(len(a))], a.counts, a.total_tokens)  # other words
    layer = make_output_layer(name, H, a)
    assert "vocab_fingerprint" in layer.state_dict()
    make_output_layer(name, H, a).load_state_dict(layer.state_dict())  # the same words: fine
    with pytest.raises(OptionError, match="another vocabulary") as info:
        make_output_layer(name, H, b).load_state_dict(layer.state_dict())
    assert "\n" not in str(info.value)


def test_fingerprints_of_counts_and_of_nested_modules():
    ranked = sorted_vocab()
    mine, _ = shuffled(ranked)
    by_counts = make_output_layer("tree", H, counts=ranked.counts)
    with pytest.raises(OptionError, match="another vocabulary"):  # another id order
        make_output_layer("tree", H, counts=mine.counts).load_state_dict(by_counts.state_dict())
    # a layer made from the same counts loads it; a state without a fingerprint (a layer made
    # by its constructor, a file from before) loads as it is
    make_output_layer("tree", H, counts=ranked.counts).load_state_dict(by_counts.state_dict())
    plain = TreeSoftmax(H, make_tree("random", ranked, seed=2))
    made = make_output_layer("tree", H, ranked)
    made.load_state_dict(plain.state_dict())
    assert np.array_equal(made.tree.parent, plain.tree.parent)
    # inside a model (a prefixed key)
    outer = torch.nn.Sequential(make_output_layer("full", H, ranked))
    other = torch.nn.Sequential(make_output_layer("full", H, Vocab(
        [f"x{i}" for i in range(len(ranked))], ranked.counts, ranked.total_tokens)))
    with pytest.raises(OptionError, match="another vocabulary"):
        other.load_state_dict(outer.state_dict())


# -- tree specs -------------------------------------------------------------------------------------

def test_resolve_tree_takes_every_spec(tmp_path):
    ranked = sorted_vocab(30)
    huffman = make_tree("huffman", ranked)
    assert resolve_tree(huffman, ranked) is huffman
    assert np.array_equal(resolve_tree("huffman", ranked).parent, huffman.parent)
    # a tree file with its vocabulary in another word order is matched by word
    mine, perm = shuffled(ranked)
    rand = make_tree("random", ranked, seed=4)
    path = tmp_path / "t.npz"
    inverse = np.argsort(perm)
    relabel_leaves(rand, inverse).save(str(path), mine)  # leaf j = mine's word j
    back = resolve_tree(str(path), ranked)
    assert all(codes(back, i) == codes(rand, i) for i in range(len(ranked)))
    with pytest.raises(TreeError, match="another vocabulary"):
        resolve_tree(str(path), sorted_vocab(31))
    with pytest.raises(TreeError, match="ready tree"):
        resolve_tree(huffman, ranked, top_k=3)

    class Holder:  # a model or a layer: its .tree
        tree = rand
    assert resolve_tree(Holder(), ranked) is rand


# -- every option a layer does not take: refused in one line, Python and CLI -----------------------

def _value(option) -> str:
    if option.choices:
        return str(option.choices[-1])
    return {int: "3", float: "0.5"}.get(option.type, "true" if "true" in
                                         getattr(option.type, "__name__", "") else "3"
                                         if "integers" in getattr(option.type, "__name__", "")
                                         else "x")


def _unused():
    table = declared_lm_layer_options()
    for name in BUILTIN:
        takes = {o.name for o in layer_options(lm_layer_class(name))}
        for option_name, (option, _) in sorted(table.items()):
            if option.cli and option_name not in takes:
                yield name, option


@pytest.mark.parametrize("name,option", list(_unused()),
                         ids=lambda v: v if isinstance(v, str) else v.cli_flag)
def test_an_option_the_layer_does_not_take_is_refused_in_one_line(tmp_path, capsys, name,
                                                                  option):
    text = _value(option)
    with pytest.raises(OptionError, match=f"does not use {option.name}") as info:
        make_output_layer(name, H, sorted_vocab(), **{option.name: option.type(text)})
    assert "\n" not in str(info.value)
    out = tmp_path / "m.pt"
    code = lm_main(["lee", "--heldout-chars", "20000", "--loss", name, option.cli_flag, text,
                    "-o", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert f"{option.cli_flag}: not used by --loss {name}" in err[0]
    assert not out.exists()
    code = lm_main(["lee", "--heldout-chars", "20000", "--loss", name, "--layer-option",
                    f"{option.name}={text}", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"does not use {option.name}" in err[0], err


def test_the_registry_lists_the_builtin_layers_and_options_are_typed():
    assert set(BUILTIN) <= set(LM_LAYERS)
    # --layer-option is typed by the declaration: a bad value is refused in one line
    from semhuff.options import parse_assignments
    declared = layer_options(lm_layer_class("tree"))
    assert parse_assignments(["sparse=false", "ignore-index=0"], declared, "--loss tree") == \
        {"sparse": False, "ignore_index": 0}
    with pytest.raises(OptionError, match="cannot read"):
        parse_assignments(["sparse=maybe"], declared, "--loss tree")
