"""A semhuff head on a Hugging Face causal LM (semhuff.lm.hf, issue 44): a tiny randomly
initialised GPT-2 (no download). The loss is the layer's on the shifted hidden states, it
trains, ``generate`` is the greedy / sampled continuation of the layer's exact distribution,
``save_pretrained`` / ``from_pretrained`` (safetensors) give the same model back, and
``post_init`` leaves the head as it was built."""
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

from semhuff.errors import OptionError  # noqa: E402
from semhuff.lm.hf import add_semhuff_head, semhuff_causal_lm  # noqa: E402

V = 40
COUNTS = [max(1, 1000 // (i + 1)) for i in range(V)]


def tiny(layer="tree", seed=0, **settings):
    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=V, n_positions=24, n_embd=16, n_layer=1, n_head=2,
                        bos_token_id=None, eos_token_id=None)  # no word ends a generation
    return add_semhuff_head(GPT2LMHeadModel(config), layer, counts=COUNTS, **settings)


def ids(n=4, length=10, seed=1):
    return torch.randint(0, V, (n, length), generator=torch.Generator().manual_seed(seed))


def train(model, steps=15):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x = ids()
    losses = []
    for _ in range(steps):
        loss = model(x, labels=x).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        model.lm_head.after_step(optimizer)
        losses.append(loss.item())
    return losses


def test_one_call_puts_the_layer_there_and_the_loss_is_the_layers():
    model = tiny()
    assert type(model).__name__ == "SemhuffGPT2LMHeadModel"
    assert isinstance(model, GPT2LMHeadModel)
    x = ids()
    out = model(x, labels=x)
    hidden = model.transformer(x)[0]
    expected = model.lm_head(hidden[:, :-1], x[:, 1:]).loss
    assert torch.allclose(out.loss, expected) and out.logits is None
    logits = model(x).logits  # without labels: the whole distribution, log-probabilities
    assert torch.allclose(logits.exp().sum(-1), torch.ones(4, 10), atol=1e-5)
    assert torch.allclose(logits, model.lm_head.log_prob(hidden))
    with pytest.raises(OptionError):
        add_semhuff_head(GPT2LMHeadModel(model.config), "tree", counts=COUNTS[:-1])


@pytest.mark.parametrize("layer", ["tree", "class"])
def test_it_trains(layer):
    losses = train(tiny(layer))
    assert losses[-1] < 0.8 * losses[0]


def test_generate_is_the_layers_distribution():
    model = tiny()
    train(model)
    model.eval()
    prompt = ids(2, 3, seed=5)
    greedy = model.generate(prompt, max_new_tokens=6, do_sample=False, pad_token_id=0)
    # by hand: the most probable word of the layer's log_prob, fed back
    context = prompt.clone()
    with torch.no_grad():
        for _ in range(6):
            word = model.lm_head.predict(model.transformer(context)[0][:, -1])
            context = torch.cat([context, word.unsqueeze(1)], dim=1)
    assert torch.equal(greedy, context)
    top1 = model.generate(prompt, max_new_tokens=6, do_sample=True, top_k=1, pad_token_id=0)
    assert torch.equal(top1, greedy)
    draws = [model.generate(prompt, max_new_tokens=6, do_sample=True, top_p=0.9,
                            temperature=0.8, pad_token_id=0) for _ in range(2)]
    assert all(d.shape == (2, 9) and int(d.max()) < V for d in draws)


ORGANIZED_TREE = {"reassign_every": 4, "head": 4, "clusters": 5}


@pytest.mark.parametrize("layer,settings", [("tree", {}), ("tree", {"tree": "random"}),
                                            ("self-organized-binary", {"reassign_every": 4}),
                                            ("head-tree", {"head": 4, "tail_entries": 3,
                                                           "tree": "random"}),
                                            ("organized-tree", ORGANIZED_TREE)])
def test_save_pretrained_and_from_pretrained_round_trip(tmp_path, layer, settings):
    model = tiny(layer, **settings)
    train(model, steps=9)
    model.eval()
    model.save_pretrained(tmp_path)
    assert os.path.isfile(tmp_path / "model.safetensors")
    again = semhuff_causal_lm(GPT2LMHeadModel).from_pretrained(tmp_path).eval()
    x = ids(seed=3)
    assert torch.equal(again(x).logits, model(x).logits)
    tree = lambda m: getattr(m.lm_head, "body", m.lm_head).tree  # noqa: E731
    assert tree(again).kind == tree(model).kind
    assert np.array_equal(tree(again).parent, tree(model).parent)
    if "reassign_every" in settings:
        assert model.lm_head.reassignments == 2
        assert (again.lm_head.steps, again.lm_head.reassignments) == (9, 2)
    prompt = ids(2, 3, seed=5)
    assert torch.equal(again.generate(prompt, max_new_tokens=5, do_sample=False, pad_token_id=0),
                       model.generate(prompt, max_new_tokens=5, do_sample=False, pad_token_id=0))


def test_organized_tree_from_pretrained_trains_on_as_the_saved_one(tmp_path):
    """Through the next re-assignment (step 12), the loaded model and the saved one: the
    loaded organizer's clusters and statistic are the ones the loader wrote into the buffers
    (each step its own batch, so a word's statistic may date from an earlier interval)."""
    def steps(model, first, last, rows):
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        for step in range(first, last):
            x = ids(n=rows, seed=step)
            model(x, labels=x).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            model.lm_head.after_step(optimizer)

    model = tiny("organized-tree", **ORGANIZED_TREE)
    steps(model, 0, 9, rows=2)
    model.save_pretrained(tmp_path)
    again = semhuff_causal_lm(GPT2LMHeadModel).from_pretrained(tmp_path)
    for m in (model, again):
        m.train()
        torch.manual_seed(1)  # the same dropout
        steps(m, 9, 12, rows=1)  # fewer words seen in the last interval
        m.eval()
    assert again.lm_head.reassignments == model.lm_head.reassignments == 3
    assert torch.equal(again.lm_head.entry, model.lm_head.entry)
    x = ids(seed=3)
    assert torch.equal(again(x).logits, model(x).logits)


def test_post_init_leaves_the_head_as_built():
    model = tiny()
    class_model = tiny("class")
    before = class_model.lm_head.word_weight.detach().clone()
    model.post_init()
    class_model.post_init()
    assert not model.lm_head.weight.any()  # the tree's rows start at zero, as built
    assert torch.equal(class_model.lm_head.word_weight, before)
