"""semhuff-lm's optimizer (``kernels.optimizer_state.trainer_optimizer``: on the CPU the dense parameters in
a fused Adagrad group, the sparse ones in a plain group) against torch's plain one-group Adagrad;
and a checkpoint's one-group optimizer state (``regroup_state``) continued by it. (The heap
setting semhuff-lm makes, ``memory.keep_large_blocks``: tests/test_practitioner_tools.py.)"""
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from semhuff.lm import ClassSoftmax, TreeSoftmax  # noqa: E402
from semhuff.lm.kernels.optimizer_state import regroup_state, trainer_optimizer  # noqa: E402


class Tiny(torch.nn.Module):
    """An embedding with a sparse gradient, a dense layer, a dense-gradient two-level output
    and a sparse-gradient tree output: both kinds of parameter, interleaved."""

    def __init__(self, V=60, D=12):
        super().__init__()
        self.embedding = torch.nn.Embedding(V, D, sparse=True)
        self.mix = torch.nn.Linear(D, D)
        self.classes = ClassSoftmax(D, np.arange(V) % 7)
        self.tree = TreeSoftmax.from_counts(D, np.arange(V, 0, -1), sparse=True)

    def loss(self, x, y):
        h = torch.tanh(self.mix(self.embedding(x)))
        return self.classes(h, y).loss + self.tree(h, y).loss


def batches(n, V=60, N=20):
    g = torch.Generator().manual_seed(5)
    return [(torch.randint(0, V, (N,), generator=g), torch.randint(0, V, (N,), generator=g))
            for _ in range(n)]


def train(model, optimizer, data):
    for x, y in data:
        optimizer.zero_grad(set_to_none=True)
        model.loss(x, y).backward()
        optimizer.step()


def test_fused_dense_group_gives_plain_adagrads_numbers():
    torch.manual_seed(0)
    a = Tiny()
    b = Tiny()
    b.load_state_dict(a.state_dict())
    plain = torch.optim.Adagrad(a.parameters(), lr=0.1)
    ours = trainer_optimizer(b, 0.1, "cpu")
    fused = [g["fused"] for g in ours.param_groups]
    assert fused == [True, False]
    sparse_ids = {id(b.embedding.weight), id(b.tree.weight)}
    assert {id(p) for p in ours.param_groups[1]["params"]} == sparse_ids
    data = batches(8)
    train(a, plain, data)
    train(b, ours, data)
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_allclose(p.detach(), q.detach(), rtol=1e-5, atol=1e-6, err_msg=name)


def test_a_one_group_state_continues_in_the_grouped_optimizer():
    """A checkpoint written before the groups (one plain Adagrad group in
    ``model.parameters()`` order) resumes: the same numbers as the plain optimizer going on."""
    torch.manual_seed(1)
    a = Tiny()
    plain = torch.optim.Adagrad(a.parameters(), lr=0.2)
    data = batches(6)
    train(a, plain, data[:3])
    b = Tiny()
    b.load_state_dict(a.state_dict())
    ours = trainer_optimizer(b, 0.2, "cpu")
    saved = copy.deepcopy(plain.state_dict())  # as read from a file: no tensor shared
    with pytest.raises(ValueError):  # as it was: the groups do not match
        ours.load_state_dict(saved)
    ours.load_state_dict(regroup_state(saved, ours, b))
    assert [g["fused"] for g in ours.param_groups] == [True, False]
    train(a, plain, data[3:])
    train(b, ours, data[3:])
    for p, q in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
    # a state in the grouped form (a new checkpoint) passes through as it is
    assert regroup_state(ours.state_dict(), ours, b) == ours.state_dict()


def test_a_fused_group_holding_a_sparse_gradient_is_refused_in_one_line():
    """torch's fused Adagrad fails deep in its kernel on a sparse gradient; the check says what
    to do, at construction (check_optimizer) and at the first step (a plugin layer whose sparse
    weight is not in its sparse_parameters() is found there)."""
    from semhuff.lm.kernels.optimizer_state import OptimizerError, check_optimizer
    model = Tiny()
    optimizer = torch.optim.Adagrad(model.parameters(), lr=0.1, fused=True)
    with pytest.raises(OptimizerError, match="fused=True does not take sparse gradients"):
        check_optimizer(optimizer, model)
    x, y = batches(1)[0]
    model.loss(x, y).backward()
    with pytest.raises(OptimizerError, match="fused=True"):
        optimizer.step()
    check_optimizer(trainer_optimizer(model, 0.1, "cpu"), model)  # its groups pass
