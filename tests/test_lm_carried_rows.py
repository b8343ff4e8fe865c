"""The binary self-organized form's ``new_rows="carried"``: the rows a re-assignment creates,
against a hand computation with Python loops over the words' paths (no shared code), and the
option's checks."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm import make_output_layer  # noqa: E402
from semhuff.lm.layers.self_organized import SelfOrganizedSoftmax  # noqa: E402
from semhuff.lm.layers.tree import carried_rows  # noqa: E402
from semhuff.trees.clusters import cluster_tree  # noqa: E402
from semhuff.trees.huffman import build_huffman  # noqa: E402


def naive_carried_rows(old, new, W, counts):
    V, D = old.n_words, W.shape[1]
    e = np.zeros((V, D))
    for w in range(V):
        for j in range(old.lengths[w]):
            sign = 1.0 if old.codes[w, j] == 0 else -1.0
            e[w] += sign * W[old.points[w, j]]
    rows = np.zeros((new.n_words - 1, D))
    for node in range(new.n_words - 1):
        side_sum, side_mass = [np.zeros(D), np.zeros(D)], [0.0, 0.0]
        for w in range(V):
            for j in range(new.lengths[w]):
                if new.points[w, j] == node:
                    side = int(new.codes[w, j])
                    side_sum[side] = side_sum[side] + counts[w] * e[w]
                    side_mass[side] += counts[w]
        rows[node] = side_sum[0] / side_mass[0] - side_sum[1] / side_mass[1]
    target = np.linalg.norm(W, axis=1).mean()
    return rows * (target / np.linalg.norm(rows, axis=1))[:, None]


def test_carried_rows_equal_a_hand_computation():
    rng = np.random.default_rng(5)
    V, D = 23, 4
    counts = np.sort(rng.integers(1, 500, size=V))[::-1].copy()
    old = build_huffman(counts)
    cluster_of = rng.integers(0, 5, size=V)
    new, _ = cluster_tree(cluster_of, counts, 5, kind="self-organized")
    W = rng.normal(size=(V - 1, D))
    got = carried_rows(old, new, torch.as_tensor(W), torch.as_tensor(counts), chunk=3)
    want = naive_carried_rows(old, new, W, counts)
    assert np.allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


def zipf_vocab(n=80):
    from semhuff.vocab import Vocab
    counts = np.maximum((1e6 / np.arange(1, n + 1)).astype(np.int64), 1)
    return Vocab([f"w{i}" for i in range(n)], counts, int(counts.sum()))


def reassigned(new_rows):
    """A binary self-organized layer over 80 words re-assigning at its third step: (the tree
    and the weight just before, the layer after)."""
    vocab = zipf_vocab()
    layer = make_output_layer("self-organized-binary", 6, vocab, reassign_every=3, seed=2,
                              new_rows=new_rows)
    opt = torch.optim.Adagrad(layer.parameters(), lr=0.3)
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        opt.zero_grad()
        layer(torch.randn(64, 6, generator=g), torch.randint(0, 80, (64,), generator=g)) \
            .loss.backward()
        opt.step()
        old, before = layer.body.tree, layer.body.weight.detach().clone()
        info = layer.after_step(opt)
    assert info is not None and layer.body.tree is not old
    return old, before, layer


def test_a_reassignments_new_rows_are_carried_from_the_old_tree_onto_the_new():
    """The rows a re-assignment creates (zero with new_rows="zero"; the others are kept) are
    the hand computation's from the old tree's rows and paths to the new tree's sides."""
    old, before, layer = reassigned("carried")
    _, _, zero = reassigned("zero")
    fresh = (zero.body.weight == 0).all(1)
    assert 0 < int(fresh.sum()) < len(fresh)
    got = layer.body.weight.detach()
    assert torch.equal(got[~fresh], zero.body.weight.detach()[~fresh])
    want = naive_carried_rows(old, layer.body.tree, before.double().numpy(),
                              layer.counts.numpy())
    np.testing.assert_allclose(got[fresh].numpy(), want[fresh.numpy()], rtol=1e-4, atol=1e-5)


def test_retree_carries_every_row_from_the_old_tree_onto_the_new():
    vocab = zipf_vocab()
    layer = make_output_layer("tree", 6, vocab)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(layer.weight.shape, generator=g))
    old, before = layer.tree, layer.weight.detach().double().numpy().copy()
    cluster_of = np.random.default_rng(2).integers(0, 7, size=80)
    new, _ = cluster_tree(cluster_of, vocab.counts, 7)
    layer.retree(new, vocab.counts)
    want = naive_carried_rows(old, new, before, vocab.counts)
    np.testing.assert_allclose(layer.weight.detach().numpy(), want, rtol=1e-4, atol=1e-5)


def test_a_reassignment_with_carried_rows_keeps_every_row_finite_and_none_zero():
    layer = make_output_layer("self-organized-binary", 6, zipf_vocab(), reassign_every=3, seed=2,
                              new_rows="carried")  # (the named default is zero rows: issue 44)
    opt = torch.optim.Adagrad(layer.parameters(), lr=0.3)
    g = torch.Generator().manual_seed(0)
    infos = []
    for _ in range(6):
        opt.zero_grad()
        layer(torch.randn(64, 6, generator=g), torch.randint(0, 80, (64,), generator=g)) \
            .loss.backward()
        opt.step()
        info = layer.after_step(opt)
        if info is not None:
            infos.append(info)
    assert len(infos) == 2 and infos[0]["rows_kept"] < 1
    w = layer.body.weight.detach()
    assert torch.isfinite(w).all() and (w.norm(dim=1) > 0).all()


def test_new_rows_is_the_binary_forms_and_checked():
    counts = np.arange(30, 0, -1)
    with pytest.raises(OptionError, match="binary form only"):
        SelfOrganizedSoftmax(4, counts, new_rows="carried")
    with pytest.raises(OptionError, match="zero or carried"):
        SelfOrganizedSoftmax(4, counts, form="binary", new_rows="mean")
