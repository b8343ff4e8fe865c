"""Using a trained language model (issue 35: ``semhuff-lm score`` and ``semhuff-lm sample``).

* ``score_text(model, ids, batch, bptt)``: held-out perplexity of an id stream with the
  numbers of the trainer's own ``evaluate`` (it is called: the same batching, the same carried
  state, the same exact per-layer log-probabilities), plus the time it took and tokens/s;
* ``sample(model, vocab, prompt_ids=None, tokens=50, temperature=1.0, seed=1, top_k=None,
  top_p=None, no_unk=False)``: words drawn one at a time by the output layer's ``sample`` (its
  exact distribution, drawn without the whole of it where the layer can: a tree walks down)
  at the last position, each draw fed back. A recurrent network (LSTM, GRU: ``hidden`` returns a state)
  carries its state and reads one new token per step; a network without state (the
  Transformer: ``hidden`` returns None) re-reads the growing context, its last ``max_len``
  tokens. Reproducible: the draws use a ``torch.Generator`` seeded with ``seed`` and touch no
  global generator;
* ``encode_prompt(vocab, prompt)``: text or words -> ids, a word outside the vocabulary as
  ``<unk>`` (as the trainer maps its corpus);
* ``text_ids(paths, vocab, eos)`` and ``score_files(model, vocab, paths, eos, ...)``: text
  files read exactly as the trainer reads its held-out text (``load_data``: the same readers,
  ``<eos>`` at line ends when the model was trained with them, ``<unk>``), scored together and
  one by one: on the training run's held-out files (and ``max_tokens`` = its
  ``--heldout-tokens``) the total is the report's perplexity, exactly.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import List, Optional, Sequence, Union

import numpy as np
import torch

from ..errors import OptionError
from .kernels.sampling import check_sampling, excluded_ids, sample_from_log_prob
from .token_ids import EOS, UNK, read_text, to_ids, tokens as text_tokens

Prompt = Union[str, Sequence[str]]


@dataclass
class TextScore:
    perplexity: float
    nll: float                                  # mean, nats a token
    tokens: int                                 # the tokens scored (targets)
    seconds: float
    cluster_perplexity: Optional[float] = None  # clustered layers (as HeldOut)
    in_cluster_perplexity: Optional[float] = None

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")


def score_text(model: torch.nn.Module, ids, batch: int = 10, bptt: int = 20,
               precision: str = "fp32") -> TextScore:
    """Perplexity of ``ids`` (word ids of the model's vocabulary) under ``model``: exactly
    ``semhuff.lm.evaluation.evaluate(model, ids, batch, bptt, precision)``'s figures, and
    tokens/s."""
    from .evaluation import evaluate
    ids = _check_ids(ids, _vocab_size(model), "ids")
    if len(ids) < 2:
        raise OptionError(f"the text has {len(ids)} token(s): at least 2 are needed to score "
                          f"one prediction")
    for name, value in (("batch", batch), ("bptt", bptt)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise OptionError(f"{name} must be an integer >= 1, got {value!r}")
    started = time.perf_counter()
    held = evaluate(model, ids, batch, bptt, precision)
    seconds = time.perf_counter() - started
    return TextScore(held.perplexity, held.nll, held.tokens, seconds, held.cluster_perplexity,
                     held.in_cluster_perplexity)


def text_ids(paths: Sequence[str], vocab, eos: bool,
             max_tokens: Optional[int] = None) -> np.ndarray:
    """The ids of the text of ``paths`` (files or folders, plain or compressed), read as
    ``load_data`` reads held-out text: joined, split into words, ``<eos>`` at each line's end
    when ``eos``, words outside the vocabulary as ``<unk>``; the first ``max_tokens`` only."""
    if UNK not in vocab.index:
        raise OptionError(f"the vocabulary has no {UNK}: it is not a semhuff-lm vocabulary")
    words = text_tokens(read_text(list(paths)), bool(eos))
    if max_tokens is not None:
        words = words[:int(max_tokens)]
    return to_ids(words, vocab)


def score_files(model: torch.nn.Module, vocab, paths: Sequence[str], eos: bool,
                batch: int = 10, bptt: int = 20, max_tokens: Optional[int] = None,
                precision: str = "fp32"):
    """(the score of all of ``paths`` read together, [(path, its own score), ...]): perplexity,
    tokens, tokens/s (``score_text``), the text read by ``text_ids``. A file too short to
    score (fewer than 2 tokens) is an error naming it."""
    paths = list(paths)
    if not paths:
        raise OptionError("no text to score: give one or more files")
    total = score_text(model, text_ids(paths, vocab, eos, max_tokens), batch, bptt, precision)
    each = []
    if len(paths) > 1:
        for path in paths:
            ids = text_ids([path], vocab, eos, max_tokens)
            if len(ids) < 2:
                raise OptionError(f"{path}: {len(ids)} token(s), too few to score")
            each.append((path, score_text(model, ids, batch, bptt, precision)))
    else:
        each.append((paths[0], total))
    return total, each


def encode_prompt(vocab, prompt: Prompt) -> List[int]:
    """The ids of ``prompt`` (a text, split on whitespace, or a list of words); a word outside
    the vocabulary becomes ``<unk>``."""
    words = prompt.split() if isinstance(prompt, str) else list(prompt)
    if not all(isinstance(w, str) for w in words):
        raise OptionError("a prompt is a text or a list of words (give ids as prompt_ids)")
    unk = vocab.index.get(UNK)
    out = []
    for word in words:
        i = vocab.index.get(word, unk)
        if i is None:
            raise OptionError(f"the prompt's word {word!r} is not in the vocabulary, which has "
                              f"no {UNK} to stand for it")
        out.append(int(i))
    return out


@torch.no_grad()
def sample(model: torch.nn.Module, vocab, prompt_ids: Optional[Sequence[int]] = None,
           tokens: int = 50, temperature: float = 1.0, seed: int = 1,
           prompt: Optional[Prompt] = None, top_k: Optional[int] = None,
           top_p: Optional[float] = None, no_unk: bool = False) -> List[str]:
    """``tokens`` words continuing the prompt (``prompt_ids``: ids; or ``prompt``: a text or
    words, see ``encode_prompt``), each drawn by the output layer's ``sample`` from the model's
    exact distribution at the last position: its log-probabilities divided by ``temperature``
    (0: the most probable word, greedy), cut to the ``top_k`` most probable words and to the
    nucleus of mass ``top_p``; ``no_unk``: ``<unk>`` never drawn (the rest renormalised).
    Without a prompt the context starts at ``<eos>`` (a line's start) when the vocabulary has
    it (not emitted), else the first word is drawn from the vocabulary's counts. Only
    vocabulary words are emitted (``<eos>`` is a vocabulary word)."""
    V = len(vocab.words)
    if _vocab_size(model) != V:
        raise OptionError(f"the model predicts {_vocab_size(model):,} words, the vocabulary "
                          f"has {V:,}")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise OptionError(f"tokens must be an integer >= 1, got {tokens!r}")
    if prompt is not None and prompt_ids is not None:
        raise OptionError("give prompt (text or words) or prompt_ids, not both")
    context = encode_prompt(vocab, prompt) if prompt is not None else \
        list(map(int, _check_ids(prompt_ids, V, "prompt_ids"))) if prompt_ids is not None else []
    device = _device(model)
    generator = torch.Generator(device=device).manual_seed(int(seed))
    exclude = [vocab.index[UNK]] if no_unk and UNK in vocab.index else None
    draw = dict(temperature=temperature, top_k=top_k, top_p=top_p, generator=generator,
                exclude=exclude)
    check_sampling(temperature, top_k, top_p, V)
    emitted: List[int] = []
    if not context:
        if EOS in vocab.index:
            context = [vocab.index[EOS]]
        else:  # no sentence start to condition on: the unigram model's draw
            counts = torch.as_tensor(np.asarray(vocab.counts, dtype=np.float64), device=device)
            first = int(sample_from_log_prob(
                torch.log(counts / counts.sum()).unsqueeze(0), *check_sampling(
                    temperature, top_k, top_p, V), excluded_ids(exclude, V, device),
                generator)[0])
            context, emitted = [first], [first]
    was_training = model.training
    model.eval()
    try:
        max_len = getattr(model, "max_len", None)
        window = context[-max_len:] if max_len else context
        out, state = model.hidden(_row(window, device), None)
        recurrent = state is not None
        while len(emitted) < tokens:
            word = int(model.output.sample(out[:, -1], **draw)[0])
            emitted.append(word)
            context.append(word)
            if len(emitted) == tokens:
                break
            if recurrent:  # the state holds the context: one new token
                out, state = model.hidden(_row([word], device), state)
            else:  # no state: re-read the context, as much as the model takes
                out, _ = model.hidden(_row(context[-max_len:] if max_len else context, device),
                                      None)
    finally:
        model.train(was_training)
    return [vocab.words[i] for i in emitted]


def _row(ids: Sequence[int], device) -> torch.Tensor:
    return torch.as_tensor(list(ids), dtype=torch.long, device=device).unsqueeze(0)


def _device(model: torch.nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _vocab_size(model: torch.nn.Module) -> int:
    output = getattr(model, "output", None)
    n = getattr(output, "n_classes", None)
    if n is None:
        raise OptionError("the model has no output layer with n_classes (a semhuff.lm network "
                          "over a semhuff.lm output layer)")
    return int(n)


def _check_ids(ids, V: int, what: str) -> np.ndarray:
    array = np.asarray(ids.cpu() if torch.is_tensor(ids) else ids)
    if array.size == 0:
        return np.zeros(0, np.int64)
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise OptionError(f"{what} must be one sequence of integer word ids, got "
                          f"{array.dtype} of shape {array.shape}")
    low, high = int(array.min()), int(array.max())
    if low < 0 or high >= V:
        raise OptionError(f"{what} must be word ids in 0..{V - 1}, got {low if low < 0 else high}")
    return array.astype(np.int64, copy=False)
