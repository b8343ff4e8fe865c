"""gensim's ``Word2Vec`` on semhuff's trainer: change one import line.

    from gensim.models import Word2Vec   ->   from semhuff.gensim import Word2Vec

Same signature, positional order and defaults as gensim 4 (CBOW with negative sampling), the same
meaning for each argument, and the same ``build_vocab`` / ``train`` / ``corpus_count`` /
``get_latest_training_loss`` / callbacks protocol; ``.wv`` is a gensim ``KeyedVectors`` that
sees the training as it happens. This is a thin adapter: the work is done by a
``semhuff.Word2Vec`` (``model.semhuff``), whose own API keeps semhuff's defaults (skip-gram,
hierarchical softmax).

What differs, on purpose:

* an argument or value semhuff cannot honour raises ``UnsupportedArgument`` (a ``ValueError``)
  that names it, never silently ignored: ``hs=1`` together with ``negative > 0`` (gensim trains
  both output layers at once; semhuff trains one), ``hashfxn`` other than ``hash``,
  ``null_word=1``, ``sorted_vocab=0``, ``shrink_windows=False``, ``build_vocab(update=True)``,
  ``keep_raw_vocab=True``, ``dry_run=True``, ``train(word_count != 0)``;
* ``batch_words``, ``queue_factor``, ``report_delay``, ``progress_per`` and ``load(mmap=...)``
  only tune how work is split, logged or read into memory in gensim: accepted, with the same
  results;
* ``save()`` writes semhuff's model file (``.npz`` content, any name), ``load()`` reads it (or
  any semhuff model file);
* ``score()`` (gensim's per-sentence log probabilities) is not provided: semhuff's held-out
  perplexity is ``model.semhuff.score(corpus)``;
* sentences longer than 10,000 tokens are cut into pieces, never truncated (gensim drops the
  rest); a generator can be given to ``train()`` (semhuff caches the first pass), not to the
  constructor, which reads the corpus twice (gensim's ``TypeError``);
* ``get_latest_training_loss()`` (with ``compute_loss=True``) is the summed negative
  log-likelihood of every prediction since the start of the last ``train()`` call, gensim's
  definition, accumulated in float64 over all threads (gensim's float32 tally, shared by its
  threads without a lock, loses updates).
"""
from __future__ import annotations

import logging
import os
import time
from collections import defaultdict

from . import model as _model
from .corpus import as_corpus, is_one_shot
from .errors import ModelFileError, UnsupportedArgument
from .hooks import Hook
from .vectors_io import to_keyed_vectors
from .vocab import Vocab, gensim_sample_fraction

logger = logging.getLogger(__name__)

MAX_WORDS_IN_BATCH = 10000  # gensim's default batch_words

#: gensim Word2Vec methods this adapter does not provide (a clear error instead of AttributeError)
_NOT_PROVIDED = {
    "score": "semhuff's held-out perplexity is model.semhuff.score(corpus) (semhuff.Word2Vec.score)",
    "predict_output_word": "not implemented in semhuff",
    "estimate_memory": "not implemented in semhuff",
    "reset_from": "not implemented in semhuff",
    "make_cum_table": "semhuff's negative sampling draws noise words with an alias table",
    "create_binary_tree": "semhuff builds trees with semhuff.trees.make_tree",
    "intersect_word2vec_format": "not implemented in semhuff",
}


def _refuse(condition: bool, what: str, why: str) -> None:
    if condition:
        raise UnsupportedArgument(f"semhuff.gensim.Word2Vec does not support {what}: {why}")


def _ns_settings(loss: str, negative, ns_exponent) -> dict:
    """semhuff's layer settings for gensim's negative / ns_exponent: they are negative
    sampling's, and gensim ignores them when it trains hierarchical softmax alone."""
    return {"negative": negative, "ns_exponent": ns_exponent} if loss == "ns" else {}


def _loss(hs, negative) -> str:
    """gensim's hs / negative switches -> semhuff's output layer."""
    if not hs and not negative:
        raise ValueError("You must set either 'hs' or 'negative' to be positive for proper training. "
                         "When both 'hs=0' and 'negative=0', there will be no training.")
    _refuse(bool(hs) and negative > 0, f"hs=1 together with negative={negative}",
            "gensim then trains hierarchical softmax and negative sampling at once, semhuff one "
            "output layer; set negative=0 (hierarchical softmax) or hs=0 (negative sampling)")
    return "hs" if hs else "ns"


class _Setting:
    """A setting the gensim model shares with the semhuff model it drives."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, obj, owner=None):
        return self if obj is None else getattr(obj.semhuff, self.name)

    def __set__(self, obj, value):
        setattr(obj.semhuff, self.name, value)


class _Callbacks(Hook):
    """gensim callbacks (``CallbackAny2Vec``) at semhuff's hook points, with the model as their
    argument; the running loss is brought up to date first. ``on_train_end`` is called by
    ``Word2Vec.train`` once training has succeeded, as in gensim. (gensim 4 never calls
    ``on_batch_begin`` / ``on_batch_end``; neither does this.)"""

    def __init__(self, model: "Word2Vec", callbacks):
        self.model = model
        self.callbacks = list(callbacks)
        self.done_loss = 0.0  # finished epochs of this train() call

    def _call(self, method: str) -> None:
        self.model._fresh_wv()
        for callback in self.callbacks:
            getattr(callback, method)(self.model)

    def on_train_begin(self, context):
        self._call("on_train_begin")

    def on_epoch_begin(self, context):
        self._call("on_epoch_begin")

    def on_epoch_end(self, context):
        self.done_loss += context.loss
        if self.model.compute_loss:
            self.model.running_training_loss = self.done_loss
        self._call("on_epoch_end")


class _CountingCorpus:
    """One pass over a corpus that counts its sentences (gensim's ``corpus_count``)."""

    def __init__(self, corpus):
        self.corpus = corpus
        self.sentences = 0

    def __iter__(self):
        for sentence in self.corpus:
            self.sentences += 1
            yield sentence


class Word2Vec:
    """gensim 4's ``Word2Vec`` (same signature, defaults and meaning), trained by semhuff."""

    def __init__(self, sentences=None, corpus_file=None, vector_size=100, alpha=0.025, window=5,
                 min_count=5, max_vocab_size=None, sample=1e-3, seed=1, workers=3,
                 min_alpha=0.0001, sg=0, hs=0, negative=5, ns_exponent=0.75, cbow_mean=1,
                 hashfxn=hash, epochs=5, null_word=0, trim_rule=None, sorted_vocab=1,
                 batch_words=MAX_WORDS_IN_BATCH, compute_loss=False, callbacks=(), comment=None,
                 max_final_vocab=None, shrink_windows=True):
        _refuse(hashfxn is not hash, "hashfxn", "initial vectors are drawn from seed alone")
        _refuse(bool(null_word), "null_word=1", "CBOW windows are not padded with a null word")
        _refuse(not sorted_vocab, "sorted_vocab=0", "the vocabulary is always sorted by frequency")
        _refuse(not shrink_windows, "shrink_windows=False",
                "windows are always word2vec's reduced windows")
        _refuse(min_count < 0, f"min_count={min_count}", "it must be >= 0")
        loss = _loss(hs, negative)
        self.semhuff = _model.Word2Vec(
            vector_size=vector_size, window=window, min_count=max(1, int(min_count)),
            max_vocab_size=max_vocab_size, sample=0.0, sg=int(sg), cbow_mean=int(cbow_mean),
            loss=loss, **_ns_settings(loss, negative, ns_exponent),
            alpha=alpha, min_alpha=min_alpha, epochs=epochs, workers=workers, seed=seed,
            progress=False)
        self._init_gensim_state(hs, negative, min_count, max_final_vocab, compute_loss,
                                batch_words, comment)
        self.ns_exponent = ns_exponent
        self.sample = sample  # gensim's reading (the property below); the semhuff model's is set
        if sentences is not None or corpus_file is not None:
            self._check_corpus_sanity(sentences, corpus_file, passes=epochs + 1)
            self.build_vocab(corpus_iterable=sentences, corpus_file=corpus_file, trim_rule=trim_rule)
            self.train(corpus_iterable=sentences, corpus_file=corpus_file,
                       total_examples=self.corpus_count, total_words=self.corpus_total_words,
                       epochs=self.epochs, start_alpha=self.alpha, end_alpha=self.min_alpha,
                       compute_loss=self.compute_loss, callbacks=callbacks)
        else:
            if trim_rule is not None:
                logger.warning("trim_rule is only used by build_vocab() and is not stored: "
                               "the model was created without sentences, so it is ignored")
            if callbacks:
                logger.warning("callbacks are not stored: give them to train() (the model was "
                               "created without sentences, so they are ignored)")

    def _init_gensim_state(self, hs, negative, min_count, max_final_vocab, compute_loss,
                           batch_words, comment):
        self.hs = int(hs)
        self.negative = int(negative)
        self.min_count = min_count
        self.effective_min_count = min_count
        self.max_final_vocab = max_final_vocab
        self.compute_loss = bool(compute_loss)
        self.running_training_loss = 0.0
        self.batch_words = batch_words
        self.comment = comment
        self.corpus_count = 0
        self.corpus_total_words = 0
        self.train_count = 0
        self.total_train_time = 0.0
        self.null_word, self.sorted_vocab, self.shrink_windows, self.hashfxn = 0, 1, True, hash
        self._kv = None
        self._empty_kv = None

    # -- vocabulary --------------------------------------------------------------------------------
    @staticmethod
    def _check_corpus_sanity(corpus_iterable=None, corpus_file=None, passes=1):
        """gensim's checks and messages."""
        from collections.abc import Iterable
        if corpus_file is None and corpus_iterable is None:
            raise TypeError("Either one of corpus_file or corpus_iterable value must be provided")
        if corpus_file is not None and corpus_iterable is not None:
            raise TypeError("Both corpus_file and corpus_iterable must not be provided at the same time"
                            " (Word2Vec(sentences, 50)? gensim 4's second argument is corpus_file: "
                            "use vector_size=50)")
        if corpus_iterable is None and not (isinstance(corpus_file, (str, os.PathLike))
                                            and os.path.isfile(corpus_file)):
            raise TypeError(f"Parameter corpus_file must be a valid path to a file, got {corpus_file!r} instead")
        if corpus_iterable is not None and not isinstance(corpus_iterable, Iterable):
            raise TypeError(f"The corpus_iterable must be an iterable of lists of strings, got "
                            f"{corpus_iterable!r} instead")
        if passes > 1 and corpus_iterable is not None and is_one_shot(corpus_iterable):
            # gensim checks generators only; any iterator would train on nothing after the scan
            raise TypeError(f"Using a generator as corpus_iterable can't support {passes} passes. "
                            f"Try a re-iterable sequence.")

    def build_vocab(self, corpus_iterable=None, corpus_file=None, update=False, progress_per=10000,
                    keep_raw_vocab=False, trim_rule=None, min_count=None, sample=None,
                    dry_run=False):
        """Scan the corpus: vocabulary (``min_count``, ``max_final_vocab``, ``trim_rule`` and
        ``max_vocab_size`` pruning with gensim's own rules), ``corpus_count``,
        ``corpus_total_words``, the output layer and fresh weights."""
        _refuse(update, "build_vocab(update=True)",
                "the output layer (its tree) is built for a fixed vocabulary; build a new model")
        _refuse(keep_raw_vocab, "keep_raw_vocab=True", "the raw counts are not kept")
        _refuse(dry_run, "dry_run=True", "build the vocabulary to see its size")
        self._check_corpus_sanity(corpus_iterable, corpus_file, passes=1)
        from gensim.utils import keep_vocab_item, prune_vocab

        source = corpus_iterable if corpus_iterable is not None else os.fspath(corpus_file)
        counting = _CountingCorpus(as_corpus(source, self.semhuff.max_sentence_length))
        raw: dict = defaultdict(int)
        total, min_reduce = 0, 1
        for sentence in counting:  # gensim's scan_vocab
            for word in sentence:
                raw[word] += 1
            total += len(sentence)
            if self.max_vocab_size and len(raw) > self.max_vocab_size:
                prune_vocab(raw, min_reduce, trim_rule=trim_rule)
                min_reduce += 1
        min_count = min_count or self.min_count
        self.min_count, self.sample = min_count, sample or self.sample
        self.effective_min_count = min_count
        if self.max_final_vocab is not None and self.max_final_vocab < len(raw):
            by_count = sorted(raw.values(), reverse=True)
            self.effective_min_count = max(by_count[self.max_final_vocab] + 1, min_count)
        kept = {w: c for w, c in raw.items()
                if keep_vocab_item(w, c, self.effective_min_count, trim_rule=trim_rule)}
        vocab = self._set_vocab(kept, total, counting.sentences)
        logger.info("vocabulary: %d of %d distinct words (effective min_count %d), %d sentences, "
                    "%d words", len(vocab), len(raw), self.effective_min_count, self.corpus_count,
                    total)

    def build_vocab_from_freq(self, word_freq, keep_raw_vocab=False, corpus_count=None,
                              trim_rule=None, update=False):
        """The vocabulary from a ``{word: count}`` dict instead of a corpus scan."""
        _refuse(update, "build_vocab_from_freq(update=True)",
                "the output layer (its tree) is built for a fixed vocabulary")
        _refuse(keep_raw_vocab, "keep_raw_vocab=True", "the raw counts are not kept")
        from gensim.utils import keep_vocab_item

        self.effective_min_count = self.min_count
        kept = {w: c for w, c in word_freq.items()
                if keep_vocab_item(w, c, self.min_count, trim_rule=trim_rule)}
        self._set_vocab(kept, int(sum(word_freq.values())), int(corpus_count or 0))

    def _set_vocab(self, kept: dict, total_words: int, sentences: int) -> Vocab:
        """The semhuff model's vocabulary, output layer (from hs / negative as they are now)
        and fresh weights."""
        model = self.semhuff
        model.loss = _loss(self.hs, self.negative)
        # the layer's settings follow gensim's switches as they are now
        model.layer_settings = _ns_settings(model.loss, self.negative, self.ns_exponent)
        model.min_count = max(1, self.effective_min_count)
        vocab = Vocab.from_counts(kept, min_count=1, total_tokens=total_words)
        model.set_vocab(vocab)
        self.sample = self.sample  # its fraction for this vocabulary
        self.corpus_count, self.corpus_total_words = sentences, total_words
        self._kv = None
        return vocab

    # -- training ----------------------------------------------------------------------------------
    def train(self, corpus_iterable=None, corpus_file=None, total_examples=None, total_words=None,
              epochs=None, start_alpha=None, end_alpha=None, word_count=0, queue_factor=2,
              report_delay=1.0, compute_loss=False, callbacks=()):
        """gensim's ``train``: ``epochs`` and one of ``total_examples`` / ``total_words`` are
        required (they set the learning-rate schedule); returns ``(trained words, raw words)``
        (words after down-sampling, and all words read)."""
        self._check_training_sanity(epochs, total_examples, total_words)
        _refuse(word_count != 0, f"word_count={word_count}", "each train() call starts at 0")
        self._check_corpus_sanity(corpus_iterable, corpus_file, passes=1)  # epochs 2+ from a cache
        self.alpha = start_alpha or self.alpha  # kept for later calls, as in gensim
        self.min_alpha = end_alpha or self.min_alpha
        self.epochs = epochs
        self.compute_loss = compute_loss
        self.running_training_loss = 0.0
        hook = _Callbacks(self, callbacks)
        source = corpus_iterable if corpus_iterable is not None else os.fspath(corpus_file)
        started = time.perf_counter()
        report = self.semhuff.train(source, epochs=epochs, hooks=[hook],
                                    words_per_epoch=self._words_per_epoch(total_examples, total_words))
        self.running_training_loss = sum(e.loss for e in report.epochs) if compute_loss else 0.0
        self.train_count += 1
        self.total_train_time += time.perf_counter() - started
        self._fresh_wv()
        for callback in hook.callbacks:
            callback.on_train_end(self)
        return report.trained_words, report.raw_words

    def _check_training_sanity(self, epochs, total_examples, total_words):
        """gensim's checks and messages."""
        if self.semhuff.vocab is None:
            raise RuntimeError("you must first build vocabulary before training the model")
        if total_words is None and total_examples is None:
            raise ValueError("You must specify either total_examples or total_words, for proper "
                             "learning-rate and progress calculations. If you've just built the "
                             "vocabulary using the same corpus, using the count cached in the model "
                             "is sufficient: total_examples=model.corpus_count.")
        if epochs is None or epochs <= 0:
            raise ValueError("You must specify an explicit epochs count. The usual value is "
                             "epochs=model.epochs.")

    def _words_per_epoch(self, total_examples, total_words):
        """In-vocabulary words per epoch for the learning-rate schedule: the vocabulary's corpus
        unless the totals given describe another one (then scaled from them, as gensim's
        progress is). Always a number: gensim's totals set the schedule, so semhuff's own
        count of the corpus (``semhuff.Word2Vec.train``'s default) is never needed here."""
        vocab = self.semhuff.vocab
        share = vocab.retained_tokens / max(1, vocab.total_tokens)
        if total_words is not None and total_words != self.corpus_total_words:
            return max(1, round(total_words * share))
        if total_words is None and total_examples != self.corpus_count and self.corpus_count:
            return max(1, round(total_examples * vocab.retained_tokens / self.corpus_count))
        return vocab.retained_tokens

    def get_latest_training_loss(self) -> float:
        """The summed loss (negative log-likelihood, nats) of the last ``train()`` call so far;
        0.0 unless ``compute_loss`` (gensim's meaning)."""
        return self.running_training_loss

    # -- vectors -----------------------------------------------------------------------------------
    @property
    def wv(self):
        """A gensim ``KeyedVectors`` over the live input vectors: empty before ``build_vocab``,
        the initial vectors after it, updated in place by training."""
        model = self.semhuff
        if model.vocab is None:
            if self._empty_kv is None:
                from gensim.models import KeyedVectors
                self._empty_kv = KeyedVectors(self.vector_size)
            return self._empty_kv
        if self._kv is None or self._kv.vectors is not model.syn0:
            self._kv = to_keyed_vectors(model.vocab.words, model.vocab.counts, model.syn0, copy=False)
        return self._kv

    def _fresh_wv(self) -> None:
        """The vectors moved: drop the cached unit norms (gensim's ``_clear_post_train``)."""
        if self._kv is not None:
            self._kv.norms = None

    @property
    def syn1neg(self):
        return self.semhuff.layer.weights if self.semhuff.loss == "ns" and self.semhuff.layer else None

    @property
    def syn1(self):
        return self.semhuff.layer.weights if self.semhuff.loss == "hs" and self.semhuff.layer else None

    @property
    def layer1_size(self) -> int:
        return self.vector_size

    def __getattr__(self, name):
        if name in _NOT_PROVIDED:
            raise NotImplementedError(f"semhuff.gensim.Word2Vec has no {name}(): {_NOT_PROVIDED[name]}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __str__(self):
        words = len(self.semhuff.vocab) if self.semhuff.vocab is not None else 0
        return (f"{type(self).__name__}<vocab={words}, vector_size={self.vector_size}, "
                f"alpha={self.alpha}>")

    __repr__ = __str__

    # -- persistence -------------------------------------------------------------------------------
    _SAVED = ("hs", "negative", "ns_exponent", "sample", "min_count", "effective_min_count",
              "max_final_vocab", "compute_loss", "running_training_loss", "batch_words", "comment",
              "corpus_count", "corpus_total_words", "train_count", "total_train_time")

    def save(self, fname):
        """semhuff's model file (``semhuff.Word2Vec.save``) with this adapter's gensim state."""
        self.semhuff.annotations["gensim"] = {k: getattr(self, k) for k in self._SAVED}
        self.semhuff.save(fname)

    @classmethod
    def load(cls, fname, mmap=None):
        """A model saved by ``save`` (or any semhuff model file). ``mmap`` is accepted: the
        arrays are read into memory, with the same values."""
        with open(fname, "rb") as fh:  # a missing file: FileNotFoundError, as in gensim
            pickled = fh.read(1) == b"\x80"
        if pickled:
            raise ModelFileError(f"{fname} is a gensim model (a pickle): load it with "
                                 f"gensim.models.Word2Vec.load; semhuff.gensim reads semhuff model files")
        inner = _model.Word2Vec.load(fname, progress=False)
        self = cls.__new__(cls)
        self.semhuff = inner
        state = inner.annotations.get("gensim", {})
        hs = state.get("hs", int(inner.loss == "hs"))
        negative = state.get("negative", inner.negative if inner.loss == "ns" else 0)
        self.ns_exponent = state.get("ns_exponent", inner.ns_exponent or 0.75)
        self._init_gensim_state(hs, negative, state.get("min_count", inner.min_count),
                                state.get("max_final_vocab"), state.get("compute_loss", False),
                                state.get("batch_words", MAX_WORDS_IN_BATCH), state.get("comment"))
        for key in ("effective_min_count", "running_training_loss", "corpus_count",
                    "corpus_total_words", "train_count", "total_train_time"):
            if key in state:
                setattr(self, key, state[key])
        self._sample = state.get("sample", inner.sample)  # the inner model holds its fraction
        return self

    @property
    def sample(self):
        """gensim's ``sample``: below 1 word2vec.c's fraction, from 1 on gensim's count reading
        (``vocab.gensim_sample_fraction``: gensim's keep probabilities); the semhuff model
        (whose own API takes fractions only) gets the equivalent fraction."""
        return self._sample

    @sample.setter
    def sample(self, value):
        vocab = self.semhuff.vocab
        self.semhuff.sample = gensim_sample_fraction(value, vocab.retained_tokens if vocab else 1)
        self._sample = value


# settings that live on model.semhuff (reading or setting them here is reading or setting them there)
for _name in ("vector_size", "alpha", "min_alpha", "window", "seed", "workers", "sg",
              "cbow_mean", "epochs", "max_vocab_size"):
    setattr(Word2Vec, _name, _Setting(_name))
del _name

__all__ = ["Word2Vec", "UnsupportedArgument"]
