"""``semhuff-lm --tree semhuff --similarity skipgram``: skip-gram vectors trained on the LM's
own training text first (``semhuff.lm_bootstrap``), cached by the data's fingerprint, the tree
of issue 45's text8 winner in one command."""
from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from semhuff.cli.common import resolve_corpus  # noqa: E402
from semhuff.cli.lm import main as lm_main  # noqa: E402
from semhuff.lm_bootstrap import bootstrap_vectors, vectors_path  # noqa: E402
from semhuff.lm.models import load_model  # noqa: E402
from semhuff.lm.token_ids import load_data  # noqa: E402
from semhuff.vectors_io import load_vectors  # noqa: E402

TINY = ["lee", "--max-vocab", "300", "--heldout-chars", "20000", "--emb", "16", "--hidden", "16",
        "--train-tokens", "5000", "--workers", "1", "--no-progress", "--epochs", "1"]

pytestmark = pytest.mark.usefixtures("torch_one_thread")


def _data(tokens=5000):
    return load_data(resolve_corpus(["lee"]), None, 20000, 1, 300, tokens, None)


def test_vectors_of_every_word_cached_by_the_data(tmp_path):
    data = _data()
    path = bootstrap_vectors(data, folder=str(tmp_path), workers=1)
    assert path == vectors_path(data, str(tmp_path)) and os.path.exists(path)
    assert sorted(os.listdir(tmp_path)) == [os.path.basename(path)]  # no token file left
    kv = load_vectors(path)
    assert set(kv.index_to_key) == set(data.vocab.words)  # min_count 1: every word of the LM
    assert kv.vectors.shape[1] == 100 and np.isfinite(kv.vectors).all()
    stamp = os.stat(path).st_mtime_ns
    assert bootstrap_vectors(data, folder=str(tmp_path)) == path  # the same data: cached
    assert os.stat(path).st_mtime_ns == stamp
    other = _data(4000)  # another training text: another file
    assert vectors_path(other, str(tmp_path)) != path


def test_semhuff_lm_trains_over_it_and_resumes_with_the_same_settings(tmp_path, monkeypatch,
                                                                      capsys):
    monkeypatch.setenv("SEMHUFF_LM_CACHE", str(tmp_path / "cache"))
    model, ckpt = str(tmp_path / "m.pt"), str(tmp_path / "m.ckpt")
    args = TINY + ["--loss", "class-tree", "--tree", "semhuff", "--similarity", "skipgram",
                   "--checkpoint", ckpt]
    assert lm_main(args + ["-o", model]) == 0
    assert len(os.listdir(tmp_path / "cache")) == 1
    loaded = load_model(model)
    assert loaded.model.output.tree.kind == "semhuff"
    assert loaded.settings.layer_options["similarity"].startswith(str(tmp_path / "cache"))
    capsys.readouterr()
    assert lm_main(args + ["--resume"]) == 0  # its settings match the checkpoint's
    assert "nothing to train" in capsys.readouterr().out


def test_without_the_semhuff_tree_it_is_refused_before_the_data(capsys):
    assert lm_main(TINY + ["--loss", "class-tree", "--similarity", "skipgram"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tree semhuff" in err[0]
