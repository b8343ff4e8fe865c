"""The binary self-organized form's ``new_rows="carried"``: the rows a re-assignment creates,
against a hand computation with Python loops over the words' paths (no shared code), and the
option's checks."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm import make_output_layer  # noqa: E402
from semhuff.lm.self_organizing import SelfOrganizingSoftmax  # noqa: E402
from semhuff.lm.tree_softmax import carried_rows  # noqa: E402
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


def test_a_reassignment_with_carried_rows_keeps_every_row_finite_and_none_zero():
    counts = np.maximum((1e6 / np.arange(1, 81)).astype(np.int64), 1)
    from semhuff.vocab import Vocab
    vocab = Vocab([f"w{i}" for i in range(80)], counts, int(counts.sum()))
    layer = make_output_layer("self-organized-binary", 6, vocab, reassign_every=3, seed=2)
    assert layer.new_rows == "carried"  # the default
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
        SelfOrganizingSoftmax(4, counts, new_rows="carried")
    with pytest.raises(OptionError, match="zero or carried"):
        SelfOrganizingSoftmax(4, counts, form="binary", new_rows="mean")
