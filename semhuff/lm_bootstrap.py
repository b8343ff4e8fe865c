"""Skip-gram vectors trained on a language model's own training text, the similarity behind the
bootstrapped SemHuff tree (``semhuff-lm --tree semhuff --similarity skipgram``): the tree of
issue 45's text8 winner (``class-tree``, docs/lm.md) in one command. Outside ``semhuff.lm``:
it trains with the word2vec wing, which the LM wing never imports (tests/test_structure.py);
the CLI joins the two here.

Decided: the tables' recipe (``eval/bench/lm_tables.py`` calls this): semhuff's skip-gram with
hierarchical softmax, dim 100, window 5, 5 epochs, every word of the LM's vocabulary kept
(min_count 1), over the training ids written as words (the out-of-vocabulary token included).
The vectors are cached by the data's fingerprint, so a resumed run (and any run on the same
data) builds the same tree without training them again. Under torchrun every rank trains them
in one thread (deterministic: the ranks' trees are the same) unless the file is there.
"""
from __future__ import annotations

import hashlib
import logging
import os
from typing import Optional

logger = logging.getLogger(__name__)

SKIPGRAM = "skipgram"  # the --similarity value that asks for these vectors


def cache_folder() -> str:
    """$SEMHUFF_LM_CACHE, else $XDG_CACHE_HOME/semhuff/lm, else ~/.cache/semhuff/lm."""
    given = os.environ.get("SEMHUFF_LM_CACHE")
    if given:
        return given
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "semhuff", "lm")


def vectors_path(data, folder: Optional[str] = None) -> str:
    """Where ``data``'s vectors are (or go): one file per training text and vocabulary."""
    from .lm.checkpoint import data_fingerprint
    key = data_fingerprint(data.train, data.vocab.words).encode("ascii")
    return os.path.join(folder or cache_folder(),
                        f"skipgram-{hashlib.sha1(key).hexdigest()[:16]}.bin")


def bootstrap_vectors(data, folder: Optional[str] = None, workers: Optional[int] = None,
                      seed: int = 1, path: Optional[str] = None) -> str:
    """The path of skip-gram vectors trained on ``data.train`` (an ``LMData``), trained now
    unless there already (``save_vectors`` writes atomically: a run cut short leaves no
    half-written vectors behind; the token file it trains on is removed)."""
    from .cpu_session import available_cpus
    from .model import Word2Vec
    path = path or vectors_path(data, folder)
    if os.path.exists(path):
        logger.info("skip-gram vectors of the training text: %s (cached)", path)
        return path
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    text = f"{path}.{os.getpid()}.tokens.txt"  # torchrun's ranks each train: their own file
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        workers = 1  # one thread is deterministic: every rank trains the same vectors
    words = data.vocab.words
    logger.info("training skip-gram vectors on the %s training tokens for the SemHuff tree "
                "(cached in %s)", f"{len(data.train):,}", path)
    try:
        with open(text, "w", encoding="utf-8") as fh:
            fh.write(" ".join(words[i] for i in data.train.tolist()))
        model = Word2Vec(text, vector_size=100, window=5, min_count=1, epochs=5, seed=seed,
                         workers=workers or min(2, available_cpus()), progress=False)
        model.save_vectors(path)
    finally:
        if os.path.exists(text):
            os.remove(text)
    return path
