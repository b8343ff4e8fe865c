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
  that names it, never silently ignored: ``hashfxn`` other than ``hash``,
  ``null_word=1``, ``sorted_vocab=0``, ``train(word_count != 0)``;
* sentences are lists of tokens, as in gensim: a string or a list of strings is refused with a
  ``CorpusError`` saying so (gensim warns and trains on single characters), unless they name
  existing corpus files (semhuff's extension; gensim's way is ``corpus_file=``);
* ``build_vocab(update=True)`` appends the new words after the old ones, as gensim does (the
  vocabulary is no longer sorted by count; the Huffman tree is rebuilt over the new counts and
  keeps the output rows in merge order, as gensim's does);
* ``batch_words``, ``queue_factor``, ``report_delay``, ``progress_per``, ``load(mmap=...)`` and
  ``save``'s ``sep_limit`` / ``separately`` / ``pickle_protocol`` only tune how work is split,
  logged or stored in gensim: accepted, with the same results;
* ``save()`` writes semhuff's model file (``.npz`` content, any name), ``load()`` reads it, any
  semhuff model file, or a model gensim saved (read with gensim, then converted: its vectors,
  counts and trained output layer, over gensim's own Huffman tree); gensim's ``Word2Vec.load``
  cannot read semhuff's file (``UnpicklingError``): ``save(fname, format="gensim")`` writes
  gensim's own pickle (vectors, counts, and the output layer: hierarchical softmax over this
  model's tree, whatever tree it is, or negative sampling), which gensim loads and trains on;
* after ``build_vocab(update=True)``, down-sampling keeps each word by its count in the whole
  vocabulary (the old counts plus the update's) against the vocabulary's total, as for any
  semhuff model; gensim recomputes the keep probability of the update's words from the update
  corpus alone (their counts there against its total) and leaves the other words' as they were.
  On purpose: a semhuff model's down-sampling is a function of its vocabulary and ``sample``
  only, so it is the same after save / load, ``--init-model``, a checkpoint or on Dask; and a
  small update is not thinned as if it were a corpus of its own (lee's first 200 lines, then
  the next 60 as the update, ``sample=1e-3``: gensim thins 56 of the 2,352 words, semhuff 44;
  ``tests/test_gensim_export.py`` checks both rules against gensim);
* ``predict_output_word()`` also answers for hierarchical softmax (gensim: negative sampling
  only), with the exact distribution P(w | context) the tree defines; ``score()`` gives exact
  float64 log probabilities (gensim skips the terms whose score is beyond +-6);
* ``syn1`` is a read-only copy with gensim's shape (one row per word; semhuff's tree has one
  fewer inner node, gensim's last row stays zero too); ``wv.vectors_lockf`` is honoured with one
  entry (all words) or one per word (gensim takes any length, modulo; others are refused), and
  saved with the model;
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

import numpy as np

from . import __version__ as _semhuff_version
from . import model as _model
from .corpus import as_corpus, is_one_shot
from .errors import CorpusError, UnsupportedArgument, VocabError
from .gensim_support import (cum_table, from_gensim, hs_log_probs, huffman_tree,
                             score_sentences)
from .hooks import Hook
from .layers import layer_class
from .vectors_io import to_keyed_vectors
from .vocab import Vocab, gensim_sample_fraction, keep_probability, no_word_kept

logger = logging.getLogger(__name__)

MAX_WORDS_IN_BATCH = 10000  # gensim's default batch_words

#: gensim Word2Vec methods this adapter does not provide (a clear error instead of AttributeError)
_NOT_PROVIDED = {
    "estimate_memory": "not implemented in semhuff",
    "make_cum_table": "semhuff's negative sampling draws noise words with an alias table",
    "create_binary_tree": "semhuff builds trees with semhuff.trees.make_tree",
    "intersect_word2vec_format": "gensim 4 has it on model.wv (KeyedVectors: give "
                                 "wv.vectors_lockf one entry per word first, as in gensim); "
                                 "or model.semhuff.intersect_vectors(path, lockf=0.0)",
}


def _refuse(condition: bool, what: str, why: str) -> None:
    if condition:
        raise UnsupportedArgument(f"semhuff.gensim.Word2Vec does not support {what}: {why}")


def _ns_settings(loss: str, negative, ns_exponent) -> dict:
    """semhuff's layer settings for gensim's negative / ns_exponent: they are negative
    sampling's, and gensim ignores them when it trains hierarchical softmax alone."""
    return {"negative": negative, "ns_exponent": ns_exponent} if loss in ("ns", "hs+ns") else {}


def _loss(hs, negative) -> str:
    """gensim's hs / negative switches -> semhuff's output layer."""
    if not hs and not negative:
        raise ValueError("You must set either 'hs' or 'negative' to be positive for proper training. "
                         "When both 'hs=0' and 'negative=0', there will be no training.")
    if hs and negative > 0:  # both output layers on the same input vectors, as gensim
        return "hs+ns"
    return "hs" if hs else "ns"


def _check_not_strings(corpus_iterable) -> None:
    """gensim's sentences are lists of tokens: a string, or a list of strings, that does not
    name existing corpus files (semhuff's extension) is a mistake (gensim warns and counts
    single characters; semhuff's own API would look for files of those names)."""
    def is_path(p):
        return isinstance(p, (str, os.PathLike)) and os.path.exists(p)

    if isinstance(corpus_iterable, (str, bytes, os.PathLike)):
        if is_path(corpus_iterable):
            return
        raise CorpusError(f"sentences must be lists of tokens, got the string "
                          f"{str(corpus_iterable)[:40]!r}, which is not a file either; a text "
                          f"file is corpus_file=path")
    if isinstance(corpus_iterable, (list, tuple)) and corpus_iterable \
            and isinstance(corpus_iterable[0], (str, bytes, os.PathLike)) \
            and not all(is_path(p) for p in corpus_iterable):
        raise CorpusError(f"sentences must be lists of tokens (e.g. [['hello', 'world'], ...]), "
                          f"got a sequence of strings ({str(corpus_iterable[0])[:40]!r}, ...) "
                          f"that are not files: split each sentence into words; a text file is "
                          f"corpus_file=path")


def _downsampling(kept: dict, sample, retain_total: int) -> dict:
    """gensim's estimate of what down-sampling leaves, for ``prepare_vocab``'s report: the
    words it thins and the tokens it keeps, by the keep probabilities training uses."""
    counts = np.fromiter(kept.values(), np.float64, len(kept))
    fraction = gensim_sample_fraction(sample or 0.0, retain_total)
    keep = keep_probability(counts, fraction * retain_total) if fraction else np.ones_like(counts)
    return {"downsample_unique": int((keep < 1.0).sum()),
            "downsample_total": int((keep * counts).sum())}


def _call_on_class_only(*args, **kwargs):
    raise AttributeError("This method should be called on a class object.")


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
        _refuse(min_count < 0, f"min_count={min_count}", "it must be >= 0")
        loss = _loss(hs, negative)
        if loss == "hs+ns":  # gensim's own warning, word for word
            logger.warning("Both hierarchical softmax and negative sampling are activated. This "
                           "is probably a mistake. You should set either 'hs=0' or 'negative=0' "
                           "to disable one of them. ")
        self.semhuff = _model.Word2Vec(
            vector_size=vector_size, window=window, min_count=max(1, int(min_count)),
            max_vocab_size=max_vocab_size, sample=0.0, sg=int(sg), cbow_mean=int(cbow_mean),
            loss=loss, **_ns_settings(loss, negative, ns_exponent),
            alpha=alpha, min_alpha=min_alpha, epochs=epochs, workers=workers, seed=seed,
            shrink_windows=bool(shrink_windows), progress=False)
        self.load = _call_on_class_only  # gensim's: load() is a class method
        self._init_gensim_state(hs, negative, min_count, max_final_vocab, compute_loss,
                                batch_words, comment)
        self.ns_exponent = ns_exponent
        self.sample = sample  # gensim's reading (the property below); the semhuff model's is set
        self.add_lifecycle_event("created", params=str(self))
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
        self.null_word, self.sorted_vocab, self.hashfxn = 0, 1, hash
        self.min_alpha_yet_reached = self.alpha  # gensim's: warn when a later train() starts higher
        self.corpus_retained_words = None  # in-vocabulary words of the corpus last scanned
        self.raw_vocab = defaultdict(int)
        self._raw_total = 0
        self._prepared = None  # the vocabulary prepare_vocab() made, for prepare_weights()
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
        _check_not_strings(corpus_iterable)
        if passes > 1 and corpus_iterable is not None and is_one_shot(corpus_iterable):
            # gensim checks generators only; any iterator would train on nothing after the scan
            raise TypeError(f"Using a generator as corpus_iterable can't support {passes} passes. "
                            f"Try a re-iterable sequence.")

    def build_vocab(self, corpus_iterable=None, corpus_file=None, update=False, progress_per=10000,
                    keep_raw_vocab=False, trim_rule=None, min_count=None, sample=None,
                    dry_run=False):
        """gensim's ``build_vocab``: ``scan_vocab`` (``corpus_count``, ``corpus_total_words``,
        ``max_vocab_size`` pruning), ``prepare_vocab`` (``min_count``, ``max_final_vocab``,
        ``trim_rule``: gensim's own rules) and ``prepare_weights`` (the output layer and fresh
        weights; with ``update=True`` the new words are added and the trained rows kept)."""
        self._check_corpus_sanity(corpus_iterable, corpus_file, passes=1)
        total, sentences = self.scan_vocab(corpus_iterable, corpus_file, progress_per,
                                           trim_rule=trim_rule)
        self.corpus_count, self.corpus_total_words = sentences, total
        self.prepare_vocab(update=update, keep_raw_vocab=keep_raw_vocab, trim_rule=trim_rule,
                           min_count=min_count, sample=sample, dry_run=dry_run)
        if not dry_run:
            self.prepare_weights(update=update)
        self.add_lifecycle_event("build_vocab", update=update, trim_rule=str(trim_rule))

    def scan_vocab(self, corpus_iterable=None, corpus_file=None, progress_per=10000, workers=None,
                   trim_rule=None):
        """Count the corpus's words into ``raw_vocab`` (gensim's pruning by ``max_vocab_size``);
        returns ``(total words, sentences)``."""
        from gensim.utils import prune_vocab

        _check_not_strings(corpus_iterable)
        source = corpus_iterable if corpus_iterable is not None else os.fspath(corpus_file)
        counting = _CountingCorpus(as_corpus(source, self.semhuff.max_sentence_length))
        raw: dict = defaultdict(int)
        total, min_reduce = 0, 1
        for sentence in counting:  # gensim's _scan_vocab
            if counting.sentences == 1 and isinstance(sentence, (str, bytes)):
                raise CorpusError(f"sentences must be lists of tokens (e.g. [['hello', 'world'], "
                                  f"...]), the first one is the string {sentence[:40]!r}")
            for word in sentence:
                raw[word] += 1
            total += len(sentence)
            if self.max_vocab_size and len(raw) > self.max_vocab_size:
                prune_vocab(raw, min_reduce, trim_rule=trim_rule)
                min_reduce += 1
        self.raw_vocab, self._raw_total = raw, total
        logger.info("collected %d word types from a corpus of %d raw words and %d sentences",
                    len(raw), total, counting.sentences)
        return total, counting.sentences

    def prepare_vocab(self, update=False, keep_raw_vocab=False, trim_rule=None, min_count=None,
                      sample=None, dry_run=False):
        """gensim's ``prepare_vocab`` on ``raw_vocab``: the words kept (``effective_min_count``
        from ``min_count`` and ``max_final_vocab``, ``trim_rule``), or with ``update`` the new
        words added after the old ones and every old word's count raised by its new count.
        Returns gensim's report (``drop_unique``, ``retain_total``, ``downsample_unique``,
        ``downsample_total``, ``num_retained_words``); ``dry_run`` only reports."""
        from gensim.utils import keep_vocab_item

        raw = self.raw_vocab
        min_count = min_count or self.min_count
        sample = sample or self.sample
        self.effective_min_count = min_count
        if self.max_final_vocab is not None:
            calc_min_count = 1
            if self.max_final_vocab < len(raw):
                calc_min_count = sorted(raw.values(), reverse=True)[self.max_final_vocab] + 1
            self.effective_min_count = max(calc_min_count, min_count)
        kept = {w: c for w, c in raw.items()
                if keep_vocab_item(w, c, self.effective_min_count, trim_rule=trim_rule)}
        drop_unique = len(raw) - len(kept)
        retain_total = sum(kept.values())
        old = self.semhuff.vocab
        if update and old is None:
            raise VocabError("You cannot do an online vocabulary-update of a model which has no "
                             "prior vocabulary. First build the vocabulary of your model with a "
                             "corpus before doing an online update.")
        if not update and not raw and not dry_run:
            raise VocabError("the corpus has no words: there is no vocabulary to build")
        if not update and not kept and not dry_run:  # the raw counts' numbers
            raise no_word_kept(raw, self.effective_min_count, trimmed=trim_rule is not None)
        if not dry_run:
            if update:
                new_words = [w for w in kept if w not in old.index]
                counts = np.concatenate([
                    old.counts + np.array([raw.get(w, 0) for w in old.words], np.int64),
                    np.array([kept[w] for w in new_words], np.int64)])
                vocab = Vocab(list(old.words) + new_words, counts,
                              old.total_tokens + self._raw_total, old.min_count)
                logger.info("vocabulary update: %d new words, %d words' counts raised",
                            len(new_words), len(kept) - len(new_words))
            else:
                self.min_count, self.sample = min_count, sample
                vocab = Vocab.from_counts(kept, min_count=1, total_tokens=self._raw_total)
            self._prepared = vocab
            # the schedule of the next train(): in-vocabulary words of the corpus just scanned
            self.corpus_retained_words = sum(c for w, c in raw.items() if w in vocab.index)
            if not keep_raw_vocab:
                self.raw_vocab = defaultdict(int)
        report = {"drop_unique": drop_unique, "retain_total": retain_total,
                  "num_retained_words": len(kept), **_downsampling(kept, sample, retain_total)}
        logger.info("prepare_vocab: %s", report)
        return report

    def prepare_weights(self, update=False):
        """The vocabulary ``prepare_vocab`` made becomes the model's: the output layer over it
        (hs / negative as they are now) and fresh weights, or with ``update`` the trained
        weights kept and rows added for the new words."""
        vocab, self._prepared = self._prepared, None
        if vocab is None:
            raise VocabError("prepare_weights() needs prepare_vocab() (or build_vocab()) first")
        if update:
            self._grow_vocab(vocab)
        else:
            self._set_vocab(vocab)

    def build_vocab_from_freq(self, word_freq, keep_raw_vocab=False, corpus_count=None,
                              trim_rule=None, update=False):
        """The vocabulary from a ``{word: count}`` dict instead of a corpus scan (gensim's
        ``prepare_vocab`` rules, ``update`` as in ``build_vocab``)."""
        self.raw_vocab = defaultdict(int, word_freq)
        self._raw_total = int(sum(word_freq.values()))
        self.corpus_count = int(corpus_count or 0)
        self.prepare_vocab(update=update, keep_raw_vocab=keep_raw_vocab, trim_rule=trim_rule)
        self.prepare_weights(update=update)

    def _make_layer(self, vocab: Vocab):
        """The output layer gensim's switches name, over ``vocab`` in its own order."""
        model = self.semhuff
        model.loss = _loss(self.hs, self.negative)
        # the layer's settings follow gensim's switches as they are now
        model.layer_settings = _ns_settings(model.loss, self.negative, self.ns_exponent)
        if model.loss in ("hs", "hs+ns"):
            if len(vocab) < 2:
                raise VocabError(f"hierarchical softmax needs at least 2 words in the "
                                 f"vocabulary, got {len(vocab)}")
            return layer_class(model.loss).create(vocab, tree=huffman_tree(vocab.counts),
                                                  **model.layer_settings)
        return layer_class("ns").create(vocab, negative=self.negative,
                                        ns_exponent=self.ns_exponent)

    def _set_vocab(self, vocab: Vocab) -> Vocab:
        """The semhuff model's vocabulary, output layer and fresh weights."""
        model = self.semhuff
        model.min_count = max(1, self.effective_min_count)
        model.layer = self._make_layer(vocab)
        model.vocab = vocab
        model._init_weights()
        self.sample = self.sample  # its fraction for this vocabulary
        self._take_locks()  # gensim's vectors_lockf stays on wv through a new vocabulary
        self._kv = None
        return vocab

    def _grow_vocab(self, vocab: Vocab) -> None:
        """gensim's ``update_weights``: the old words keep their vectors and output rows, the
        new words get fresh random vectors and zero output rows (the Huffman tree is rebuilt
        over the new counts; its inner rows keep their merge order, as gensim's do)."""
        model = self.semhuff
        old_words, dim = len(model.vocab), model.vector_size
        rng = np.random.default_rng([abs(int(model.seed)), old_words])
        fresh = (rng.random((len(vocab) - old_words, dim), dtype=np.float32)
                 - np.float32(0.5)) / np.float32(dim)
        syn0 = np.concatenate([model.syn0, fresh])
        layer = self._make_layer(vocab)
        layer.allocate(len(vocab), dim)
        if model.layer is not None:
            rows = min(len(layer.weights), len(model.layer.weights))
            layer.weights[:rows] = model.layer.weights[:rows]
        model.vocab, model.layer, model.syn0 = vocab, layer, syn0
        model._wv = None
        self.sample = self.sample
        self._take_locks()  # (sized for the old words: the user resizes it, as in gensim)
        self._kv = None

    # -- training ----------------------------------------------------------------------------------
    def train(self, corpus_iterable=None, corpus_file=None, total_examples=None, total_words=None,
              epochs=None, start_alpha=None, end_alpha=None, word_count=0, queue_factor=2,
              report_delay=1.0, compute_loss=False, callbacks=()):
        """gensim's ``train``: ``epochs`` and one of ``total_examples`` / ``total_words`` are
        required (they set the learning-rate schedule); returns ``(trained words, raw words)``
        (words after down-sampling, and all words read)."""
        self.alpha = start_alpha or self.alpha  # kept for later calls, as in gensim
        self.min_alpha = end_alpha or self.min_alpha
        self._check_training_sanity(epochs, total_examples, total_words)
        _refuse(word_count != 0, f"word_count={word_count}", "each train() call starts at 0")
        self._check_corpus_sanity(corpus_iterable, corpus_file, passes=1)  # epochs 2+ from a cache
        self._check_locks()
        self.epochs = epochs
        model = self.semhuff
        if model.layer is None:  # vectors given as ``model.wv = kv``: a fresh output layer
            model.layer = self._make_layer(model.vocab)
            model.layer.allocate(len(model.vocab), model.vector_size)
        self.compute_loss = compute_loss
        self.running_training_loss = 0.0
        hook = _Callbacks(self, callbacks)
        source = corpus_iterable if corpus_iterable is not None else os.fspath(corpus_file)
        started = time.perf_counter()
        report = self.semhuff.train(source, epochs=epochs, hooks=[hook],
                                    words_per_epoch=self._words_per_epoch(total_examples, total_words))
        self.running_training_loss = sum(e.loss for e in report.epochs) if compute_loss else 0.0
        self.train_count += 1
        elapsed = time.perf_counter() - started
        self.total_train_time += elapsed
        self.min_alpha_yet_reached = self.min_alpha
        self.add_lifecycle_event("train", msg=(
            f"training on {report.raw_words} raw words ({report.trained_words} effective words) "
            f"took {elapsed:.1f}s, {report.trained_words / max(elapsed, 1e-9):.0f} effective "
            f"words/s"))
        self._fresh_wv()
        for callback in hook.callbacks:
            callback.on_train_end(self)
        return report.trained_words, report.raw_words

    def _check_training_sanity(self, epochs, total_examples, total_words):
        """gensim's checks and messages."""
        if self.alpha > self.min_alpha_yet_reached:
            logger.warning("Effective 'alpha' higher than previous training cycles")
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
        # the corpus last scanned (after an online update: the new corpus, not the union of
        # the counts); a model loaded from gensim or given vectors: the vocabulary's counts
        retained = self.corpus_retained_words
        scanned = self.corpus_total_words
        if retained is None or not scanned:
            retained, scanned = vocab.retained_tokens, vocab.total_tokens
        if total_words is not None and total_words != scanned:
            return max(1, round(total_words * retained / max(1, scanned)))
        if total_words is None and total_examples != self.corpus_count and self.corpus_count:
            return max(1, round(total_examples * retained / self.corpus_count))
        return retained

    def _take_locks(self) -> None:
        """gensim's ``wv.vectors_lockf`` (the array ``wv`` holds now: gensim's users assign or
        resize it) becomes the semhuff model's ``lockf``, which trains and saves it."""
        if self._kv is not None:
            self.semhuff.lockf = getattr(self._kv, "vectors_lockf", None)

    def _check_locks(self) -> None:
        """gensim's ``wv.vectors_lockf``: one factor for all words or one per word, honoured;
        gensim's kernels take any length (word i's factor at i modulo it), semhuff refuses
        another length rather than guess."""
        self._take_locks()
        lockf = self.semhuff.lockf
        if lockf is None:
            return
        lockf = np.asarray(lockf)
        words = len(self.semhuff.vocab)
        _refuse(lockf.ndim != 1 or len(lockf) not in (1, words),
                f"wv.vectors_lockf of shape {lockf.shape}",
                f"give one factor (all words) or one per word ({words}); after a vocabulary "
                f"update, resize it as in gensim")

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
            self._take_locks()  # the locks set on the one it replaces
            kv = to_keyed_vectors(model.vocab.words, model.vocab.counts, model.syn0, copy=False)
            # gensim's default is one 1 (nothing locked); the model's own factors if it has some
            kv.vectors_lockf = (np.ones(1, dtype=np.float32) if model.lockf is None
                                else model.lockf)
            tree = model.tree
            if tree is not None:  # each word's Huffman code and path, as gensim's vecattrs
                codes, points = np.empty(len(kv), object), np.empty(len(kv), object)
                for w, n in enumerate(tree.lengths):
                    codes[w] = tree.codes[w, :n].astype(np.uint8)
                    points[w] = tree.points[w, :n].astype(np.uint32)
                kv.expandos["code"], kv.expandos["point"] = codes, points
            self._kv = kv
        return self._kv

    @wv.setter
    def wv(self, kv):
        """gensim's ``model.wv = kv``: its words (counts from its ``count`` attribute, else
        descending ranks) and vectors become the model's; the output layer is untrained (a
        fresh one is made by the next ``train()``; ``predict_output_word`` needs a trained
        one), so this is a start from pretrained vectors."""
        model = self.semhuff
        words = list(kv.index_to_key)
        counts = (np.asarray(kv.expandos["count"], np.int64) if "count" in kv.expandos
                  else np.arange(len(words), 0, -1, dtype=np.int64))
        model.vector_size = int(kv.vector_size)
        model.vocab = Vocab(words, counts, int(counts.sum()), 1)
        model.syn0 = np.ascontiguousarray(kv.vectors, dtype=np.float32)
        model.layer = None
        model._wv = None
        model.lockf = getattr(kv, "vectors_lockf", None)
        self.corpus_retained_words = None
        self._kv = kv if model.syn0 is kv.vectors else None

    def _fresh_wv(self) -> None:
        """The vectors moved: drop the cached unit norms (gensim's ``_clear_post_train``)."""
        if self._kv is not None:
            self._kv.norms = None

    @property
    def syn1neg(self):
        model = self.semhuff
        if model.layer is None or model.loss not in ("ns", "hs+ns"):
            return None
        return model.layer.weights if model.loss == "ns" else model.layer.syn1neg

    @property
    def syn1(self):
        """gensim's shape, one row per word (semhuff's tree has V - 1 inner nodes; the last
        row, unused in gensim too, is zero): a read-only copy, so writing to it fails loudly.
        The live rows are ``model.semhuff.layer.weights``."""
        model = self.semhuff
        if model.loss not in ("hs", "hs+ns") or model.layer is None:
            return None
        rows = model.layer.weights
        out = np.zeros((len(model.vocab), rows.shape[1]), dtype=np.float32)
        out[:len(rows)] = rows[:len(out)]
        out.flags.writeable = False
        return out

    @property
    def cum_table(self):
        """gensim's noise table for negative sampling (recomputed from the counts; semhuff
        draws noise words with an alias table of the same distribution)."""
        if not self.negative or self.semhuff.vocab is None:
            raise AttributeError("cum_table: the model has no negative-sampling vocabulary")
        return cum_table(self.semhuff.vocab.counts, self.ns_exponent)

    @property
    def shrink_windows(self) -> bool:
        return self.semhuff.shrink_windows

    @shrink_windows.setter
    def shrink_windows(self, value) -> None:
        self.semhuff.shrink_windows = bool(value)

    # -- using the trained model -------------------------------------------------------------------
    def predict_output_word(self, context_words_list, topn=10):
        """The ``topn`` most probable centre words given the context (words or indexes), as
        ``[(word, probability)]``, None when every context word is unknown. The input is the
        mean (``cbow_mean``) or sum of the context vectors, as gensim's. Negative sampling:
        gensim's softmax over ``syn1neg``; hierarchical softmax: the exact distribution
        P(w | context) the tree defines (gensim offers negative sampling only)."""
        from gensim import matutils

        model = self.semhuff
        if model.vocab is None or model.layer is None:
            raise RuntimeError("Parameters required for predicting the output words not found.")
        wv = self.wv
        indices = [wv.get_index(w) for w in context_words_list if w in wv]
        if not indices:
            logger.warning("All the input context words are out-of-vocabulary for the current "
                           "model.")
            return None
        l1 = np.sum(model.syn0[indices], axis=0)
        if self.cbow_mean:
            l1 /= len(indices)
        if model.loss == "hs":
            prob = np.exp(hs_log_probs(l1, model.layer.weights, model.tree))
        else:  # negative sampling's rows whenever there are some, as gensim
            prob = np.exp(np.dot(l1, self.syn1neg.T))
            prob /= np.sum(prob)
        top = matutils.argsort(prob, topn=topn, reverse=True)
        return [(wv.index_to_key[i], prob[i]) for i in top]

    def score(self, sentences, total_sentences=int(1e6), chunksize=100, queue_factor=2,
              report_delay=1):
        """gensim's ``score``: the log probability of each sentence (float32 array) under
        hierarchical softmax, each word predicted from its full window (``semhuff.gensim_support.
        score_sentences``); ``chunksize``, ``queue_factor``, ``report_delay`` only tune gensim's
        threads. Semhuff's held-out perplexity, for any normalised layer, is
        ``model.semhuff.score(corpus)``."""
        model = self.semhuff
        if model.loss not in ("hs", "hs+ns") or model.layer is None:
            raise RuntimeError("We have currently only implemented score for the hierarchical "
                               "softmax scheme, so you need to have run word2vec with hs=1 and "
                               "negative=0 for this to work.")
        _check_not_strings(sentences)
        return score_sentences(sentences, model.vocab.index, model.syn0, model.layer.weights,
                               model.tree, bool(self.sg), self.window, bool(self.cbow_mean),
                               int(total_sentences))

    def reset_from(self, other_model):
        """gensim's ``reset_from``: ``other_model``'s vocabulary and corpus counts, with this
        model's settings and fresh weights."""
        other = other_model.semhuff
        if other.vocab is None:
            raise VocabError("reset_from: the other model has no vocabulary")
        self.corpus_count = other_model.corpus_count
        self.corpus_total_words = other_model.corpus_total_words
        self.corpus_retained_words = other_model.corpus_retained_words
        self._set_vocab(other.vocab)

    def add_lifecycle_event(self, event_name, log_level=logging.INFO, **event):
        """gensim's ``lifecycle_events``: a dict per creation, vocabulary build, training, save
        and load (gensim's own recorder, with semhuff's version added); saved with the model."""
        from gensim.utils import SaveLoad
        SaveLoad.add_lifecycle_event(self, event_name, log_level, semhuff=_semhuff_version,
                                     **event)

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
              "corpus_count", "corpus_total_words", "train_count", "total_train_time",
              "corpus_retained_words", "min_alpha_yet_reached", "lifecycle_events")

    def save(self, fname_or_handle, separately=None, sep_limit=10 * 1024 ** 2, ignore=frozenset(),
             pickle_protocol=4, format="npz"):
        """semhuff's model file (``semhuff.Word2Vec.save``) with this adapter's gensim state;
        gensim's other arguments only say how it splits its pickle: accepted, one file is
        written. ``format="gensim"``: gensim's own ``Word2Vec`` pickle instead, which
        ``gensim.models.Word2Vec.load`` reads (semhuff's file it cannot: ``UnpicklingError``),
        with this adapter's counters (``corpus_count``, ``train_count`` ...)."""
        self.add_lifecycle_event("saved", fname_or_handle=str(fname_or_handle))
        self._take_locks()  # wv.vectors_lockf is saved as the model's lockf
        if format == "gensim":
            from .io_utils import atomic_path
            model = self.semhuff.to_gensim()
            for key in ("corpus_count", "corpus_total_words", "train_count", "total_train_time",
                        "comment", "compute_loss", "running_training_loss", "lifecycle_events"):
                if getattr(self, key, None) is not None:
                    setattr(model, key, getattr(self, key))
            model.sample, model.min_count = self.sample, self.min_count
            with atomic_path(os.fspath(fname_or_handle)) as tmp:
                model.save(tmp, separately=[], pickle_protocol=pickle_protocol)
            return
        self.semhuff.annotations["gensim"] = {k: getattr(self, k, None) for k in self._SAVED}
        self.semhuff.save(fname_or_handle)

    @classmethod
    def load(cls, fname, mmap=None):
        """A model saved by ``save`` (or any semhuff model file). ``mmap`` is accepted: the
        arrays are read into memory, with the same values."""
        with open(fname, "rb") as fh:  # a missing file: FileNotFoundError, as in gensim
            pickled = fh.read(1) == b"\x80"
        if pickled:
            return cls._load_gensim(fname, mmap)
        inner = _model.Word2Vec.load(fname, progress=False)
        self = cls.__new__(cls)
        self.semhuff = inner
        state = inner.annotations.get("gensim", {})
        hs = state.get("hs", int(inner.loss in ("hs", "hs+ns")))
        negative = state.get("negative", inner.negative if inner.loss in ("ns", "hs+ns") else 0)
        self.ns_exponent = state.get("ns_exponent", inner.ns_exponent or 0.75)
        self._init_gensim_state(hs, negative, state.get("min_count", inner.min_count),
                                state.get("max_final_vocab"), state.get("compute_loss", False),
                                state.get("batch_words", MAX_WORDS_IN_BATCH), state.get("comment"))
        for key in ("effective_min_count", "running_training_loss", "corpus_count",
                    "corpus_total_words", "train_count", "total_train_time",
                    "corpus_retained_words", "min_alpha_yet_reached", "lifecycle_events"):
            if state.get(key) is not None:
                setattr(self, key, state[key])
        self._sample = state.get("sample", inner.sample)  # the inner model holds its fraction
        self.add_lifecycle_event("loaded", fname=str(fname))
        return self

    @classmethod
    def _load_gensim(cls, fname, mmap=None):
        """A model gensim saved: read by gensim (its errors, e.g. the ``AttributeError`` for a
        pickle that is not a Word2Vec), then converted (``gensim_support.from_gensim``)."""
        from gensim.models import Word2Vec as GensimWord2Vec

        loaded = GensimWord2Vec.load(fname, mmap=mmap)
        settings, vocab, syn0, layer = from_gensim(loaded, fname)
        self = cls.__new__(cls)
        loss = layer.name
        self.semhuff = _model.Word2Vec(
            vector_size=syn0.shape[1], window=int(settings.get("window", 5)),
            min_count=max(1, int(settings.get("min_count") or 1)),
            max_vocab_size=settings.get("max_vocab_size"), sample=0.0,
            sg=int(settings.get("sg", 0)), cbow_mean=int(settings.get("cbow_mean", 1)),
            loss=loss, **_ns_settings(loss, int(settings.get("negative", 0)),
                                      settings.get("ns_exponent", 0.75)),
            alpha=settings.get("alpha", 0.025), min_alpha=settings.get("min_alpha", 0.0001),
            epochs=int(settings.get("epochs", 5)), workers=int(settings.get("workers", 3)),
            seed=int(settings.get("seed", 1)),
            shrink_windows=bool(settings.get("shrink_windows", True)), progress=False)
        self.semhuff.vocab, self.semhuff.syn0, self.semhuff.layer = vocab, syn0, layer
        lockf = getattr(loaded.wv, "vectors_lockf", None)  # its locks, as gensim saved them
        if lockf is not None and not np.all(np.asarray(lockf) == 1.0):
            self.semhuff.lockf = np.array(lockf, dtype=np.float32)
        self.ns_exponent = settings.get("ns_exponent", 0.75)
        self._init_gensim_state(int(settings.get("hs", 0)), int(settings.get("negative", 0)),
                                settings.get("min_count", 5), settings.get("max_final_vocab"),
                                settings.get("compute_loss", False),
                                settings.get("batch_words", MAX_WORDS_IN_BATCH),
                                settings.get("comment"))
        for key in ("effective_min_count", "running_training_loss", "corpus_count",
                    "corpus_total_words", "train_count", "total_train_time",
                    "min_alpha_yet_reached", "lifecycle_events"):
            if key in settings:
                setattr(self, key, settings[key])
        self.sample = settings.get("sample", 1e-3)
        # gensim's load recorded the "loaded" event in the history taken over
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
