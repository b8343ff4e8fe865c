"""``Word2Vec``: the public API (close to gensim's) tying the data flow together:
corpus -> vocab -> output layer (tree) -> device session + trainer -> vectors -> export / score."""
from __future__ import annotations

import json
import logging
import os
from typing import List, Optional, Sequence, Union

import numpy as np

from . import checkpoint as checkpoint_file
from . import memory
from . import health
from .corpus import DEFAULT_MAX_SENTENCE_LENGTH, Corpus, as_corpus, is_one_shot, is_url
from .distributed import DaskRunner
from .encode import count_words
from .cpu_session import CpuSession, with_room
from .devices import check_device_options, check_layer_device, make_device, scoring_device
from .errors import (CorpusError, ModelFileError, OptionError, SemhuffError, TrainingDiverged,
                     VectorsError)
from .hooks import Hook
from .io_utils import (MODEL_LAYER_PREFIX, atomic_output, atomic_path, open_npz, pack_words,
                       unpack_words)
from .layers import OutputLayer, check_layer_settings, layer_class, layer_from_state
from .schedule import check_rate
from .scoring import ScoreReport, score
from .trainer import TrainReport, TrainSettings, train
from .trees.base import Tree
from .vectors_io import (resolve_format, save_keyed_vectors, save_word2vec_binary,
                         to_keyed_vectors)
from .vocab import Vocab, check_sample
from .wording import counted

logger = logging.getLogger(__name__)

MODEL_FORMAT_VERSION = 2
MAX_SEED = 2 ** 32 - 1
MAX_SENSIBLE_ALPHA = 0.5  # a warning from here (0.025 is word2vec's; on lee 0.5 failed, 0.25 not)
_LAYER_PREFIX = MODEL_LAYER_PREFIX


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _check_options(vector_size, window, min_count, sample, alpha, min_alpha, epochs, workers,
                   max_sentence_length, max_vocab_size, seed=1):
    def need(cond, msg):
        if not cond:
            raise OptionError(msg)
    need(isinstance(vector_size, (int, np.integer)) and vector_size >= 1, f"vector_size must be a positive integer, got {vector_size!r}")
    need(vector_size <= 10_000, f"vector_size {vector_size} is unreasonably large (max 10000)")
    need(isinstance(window, (int, np.integer)) and window >= 1, f"window must be a positive integer, got {window!r}")
    need(isinstance(min_count, (int, np.integer)) and min_count >= 1, f"min_count must be >= 1, got {min_count!r}")
    check_sample(sample)  # word2vec.c's fraction: >= 1 is an error here (semhuff.gensim's reading)
    check_rate(alpha, min_alpha)
    if alpha >= MAX_SENSIBLE_ALPHA:  # word2vec.c and gensim accept any; a warning, not an error
        logger.warning("alpha=%g is far above word2vec's usual 0.025 (skip-gram) / 0.05 (CBOW): "
                       "training will most likely diverge or fail", alpha)
    need(isinstance(epochs, (int, np.integer)) and epochs >= 1, f"epochs must be >= 1, got {epochs!r}")
    need(isinstance(workers, (int, np.integer)) and workers >= 1, f"workers must be >= 1, got {workers!r}")
    need(max_sentence_length >= 1, "max_sentence_length must be >= 1")
    need(max_vocab_size is None or max_vocab_size >= 1, "max_vocab_size must be >= 1")
    # gensim's range (numpy's RandomState refuses others); word2vec.c's seed is unsigned
    need(isinstance(seed, (int, np.integer)) and not isinstance(seed, bool)
         and 0 <= seed <= MAX_SEED, f"seed must be an integer in 0..{MAX_SEED}, got {seed!r}")


class Word2Vec:
    """Skip-gram / CBOW word vectors trained with hierarchical softmax over any tree, with
    negative sampling, or with any registered output layer (``semhuff.layers``).

    >>> model = Word2Vec("corpus.txt.gz", vector_size=100, epochs=5)   # doctest: +SKIP
    >>> model.wv.most_similar("king")                                    # doctest: +SKIP

    ``sentences`` is a path (file or directory; plain, gzip, bz2 or xz text), a list of paths,
    or any re-iterable of token lists (the gensim convention). Given one, the vocabulary is
    built and training runs at once. ``loss`` names the output layer; the layer takes the
    settings it declares (``OutputLayer.OPTIONS``): ``tree``, ``similarity``, ``hs_order`` (and
    a tree builder's own, e.g. ``top_k``) for "hs"; ``negative``, ``ns_exponent`` for "ns";
    the rest (``clip``, ``clusters``, ...) as ``layer_options``. A setting the chosen layer does
    not take is an ``OptionError`` naming it. ``hooks`` run
    while training (``semhuff.hooks``); ``word_stats`` has the kernels count predictions and
    nll per target word into ``model.layer.word_stats``. ``init_vectors`` (a vectors file or a
    ``KeyedVectors`` of dimension ``vector_size``): the words it shares with the vocabulary start
    from its vectors (``intersect_vectors``) and keep training, or with ``init_vectors_lockf=0``
    stay as they are (their lock factor, below).

    ``lockf`` (gensim's ``wv.vectors_lockf``): a lock factor per word, set after the vocabulary
    exists; every update of word i's input vector is multiplied by ``lockf[i]`` (0: frozen,
    bit for bit; 1: trained as usual; between: slower). A float32 array of one entry per word,
    or of one entry for all; None (the default) or all ones: nothing locked, and training runs
    the kernels without locks. Saved with the model (and in checkpoints); a new vocabulary
    resets it. The output layer is never locked. Not on Dask or the GPU (refused).

    ``device`` says where training runs: "cpu" (Hogwild threads) or "cuda" (``semhuff.gpu``:
    batches of pairs on one GPU, ``backend`` "numba" or "cupy", ``device_options`` such as
    ``{"batch_pairs": 8192}``; docs/gpu.md). An unusable device fails at once
    with a ``DeviceError``. The model file, the vectors and the exports are the same whatever
    trained them; scoring always runs on the CPU.
    """

    def __init__(self, sentences=None, *, vector_size: int = 100, window: int = 5,
                 min_count: int = 5, max_vocab_size: Optional[int] = None,
                 max_final_vocab: Optional[int] = None, sample: float = 1e-3, sg: int = 1,
                 cbow_mean: int = 1,
                 loss: str = "hs", negative: Optional[int] = None,
                 ns_exponent: Optional[float] = None, tree: Union[str, Tree, None] = None,
                 similarity=None, hs_order: Optional[str] = None,
                 layer_options: Optional[dict] = None, word_stats: bool = False,
                 alpha: float = 0.025, min_alpha: float = 0.0001, epochs: int = 5,
                 workers: Optional[int] = None, device: str = "cpu",
                 backend: Optional[str] = None, device_options: Optional[dict] = None,
                 seed: int = 1, shrink_windows: bool = True,
                 max_sentence_length: int = DEFAULT_MAX_SENTENCE_LENGTH,
                 chunk_words: int = 100_000, progress: bool = True,
                 hooks: Sequence[Hook] = (), tmp_dir: Optional[str] = None,
                 cache_ids: bool = True, dask=None, init_vectors=None,
                 init_vectors_lockf: float = 1.0):
        workers = default_workers() if workers is None else workers
        _check_options(vector_size, window, min_count, sample, alpha, min_alpha, epochs,
                       workers, max_sentence_length, max_vocab_size, seed)
        named = dict(negative=negative, ns_exponent=ns_exponent, tree=tree,
                     similarity=similarity, hs_order=hs_order)
        # the output layer's settings: those given, checked against what it declares
        self.loss = loss
        self.layer_settings = {k: v for k, v in named.items() if v is not None}
        self.layer_settings.update(layer_options or {})
        check_layer_settings(loss, self.layer_settings)
        self.device_options = dict(device_options or {})
        make_device(device, backend, **self.device_options)  # fails now, not after the vocabulary scan
        self.vector_size = int(vector_size)
        self.window = int(window)
        self.min_count = int(min_count)
        self.max_vocab_size = max_vocab_size
        self.max_final_vocab = max_final_vocab
        self.sample = float(sample)
        self.sg = int(bool(sg))
        self.cbow_mean = int(bool(cbow_mean))
        self.word_stats = bool(word_stats)
        self.alpha = float(alpha)
        self.min_alpha = float(min_alpha)
        self.epochs = int(epochs)
        self.workers = int(workers)
        self.device = device
        self.backend = backend
        self.seed = int(seed)
        # word2vec's reduced windows (a half-width drawn from 1..window), or always the full
        # window (gensim's shrink_windows=False)
        self.shrink_windows = bool(shrink_windows)
        self.max_sentence_length = int(max_sentence_length)
        self.chunk_words = int(chunk_words)
        self.progress = progress
        self.hooks = list(hooks)
        self.tmp_dir = tmp_dir      # where the first epoch's id cache goes (None: TMPDIR);
        self.cache_ids = bool(cache_ids)  # both belong to this machine: not saved
        self.dask_runner: Optional[DaskRunner] = None
        self.dask = dask  # train on a Dask cluster (semhuff.distributed): an address, local:N, ...
        self.vocab: Optional[Vocab] = None
        self.syn0: Optional[np.ndarray] = None
        self.layer: Optional[OutputLayer] = None
        self.reports: List[TrainReport] = []
        self.train_calls = 0  # completed train() calls, saved: each call's seed is seed + this
        self.annotations: dict = {}  # JSON-able notes saved with the model (semhuff.gensim's)
        self._wv = None
        self._scanned = None  # (corpus key, vocab) of build_vocab's scan: see _epoch_words
        # pretrained input vectors for the words they share with the vocabulary, set by every
        # set_vocab until training starts; read now, so a bad file fails before the scan
        self.init_vectors = init_vectors
        self.init_vectors_lockf = _check_lock_value(init_vectors_lockf, "init_vectors_lockf")
        self.init_vectors_used: Optional[int] = None  # how many rows came from them
        # lock factors of the input vectors (gensim's vectors_lockf; the class docstring)
        self.lockf: Optional[np.ndarray] = None
        self._pretrained = (None if init_vectors is None
                            else _pretrained_vectors(init_vectors, self.vector_size))
        if sentences is not None:
            if is_one_shot(sentences):
                raise CorpusError("sentences is a one-shot iterator (a generator?): the vocabulary "
                                  "scan would consume it and leave nothing to train on; pass a "
                                  "list, a path, or an object whose __iter__ starts a new pass")
            corpus = as_corpus(sentences, self.max_sentence_length)
            self.build_vocab(corpus)
            self.train(corpus)

    # -- data flow --------------------------------------------------------------------------------
    def build_vocab(self, sentences) -> Vocab:
        """Scan the corpus, then ``set_vocab``: the vocabulary, the output layer (its tree) and
        freshly initialised weights."""
        if self.dask_runner is not None:
            vocab = self.set_vocab(self.dask_runner.build_vocab(self, sentences))
            self._scanned = (_corpus_key(as_corpus(sentences, self.max_sentence_length)), vocab)
            return vocab
        corpus = as_corpus(sentences, self.max_sentence_length)
        bar = _scan_bar(self.progress)
        try:
            vocab = Vocab.build(corpus, self.min_count, self.max_vocab_size,
                                self.max_final_vocab, progress=bar.update, workers=self.workers)
        finally:
            bar.close()
        memory.release_freed_memory()  # the scan's freed tables: before the weights come
        stats = getattr(corpus, "stats", None)
        if stats is not None and stats.invalid_utf8:
            logger.warning("%d invalid UTF-8 sequences were replaced by U+FFFD", stats.invalid_utf8)
        self.set_vocab(vocab)
        self._scanned = (_corpus_key(corpus), vocab)
        return vocab

    def set_vocab(self, vocab: Vocab) -> Vocab:
        """Use a ready vocabulary (e.g. one ``Vocab.build`` made once for several models): build
        the output layer over it (a ``Tree`` given as ``tree`` must have one leaf per word) and
        fresh weights. No corpus is read."""
        self.vocab = vocab
        self.layer = self._make_layer()
        self._init_weights()
        self.lockf = None  # another vocabulary: the old factors name other words
        if self._pretrained is not None:
            self.init_vectors_used = self.intersect_vectors(self._pretrained,
                                                            lockf=self.init_vectors_lockf)
        return vocab

    def intersect_vectors(self, source, fmt: str = "auto", lockf: float = 1.0) -> int:
        """Set the input vector of every vocabulary word that ``source`` (a vectors file in
        any format ``load_vectors`` reads, or a ``KeyedVectors``) also has to its vector there;
        the other words keep their random start. Returns how many were set (and logs it).

        ``lockf``: the lock factor of the words set (``Word2Vec.lockf``): 1 (the default) they
        keep training, 0 they stay the file's vectors, bit for bit (gensim's
        ``intersect_word2vec_format(lockf=...)``, whose default is 0). The other words'
        factors are unchanged. Their dimension must be the model's (``OptionError``)."""
        if self.syn0 is None:
            raise SemhuffError("build_vocab() must run before intersect_vectors()")
        lockf = _check_lock_value(lockf, "lockf")
        kv = _pretrained_vectors(source, self.vector_size, fmt)
        index = kv.key_to_index
        pairs = [(i, index[w]) for i, w in enumerate(self.vocab.words) if w in index]
        ours = np.fromiter((i for i, _ in pairs), np.int64, len(pairs))
        theirs = np.fromiter((j for _, j in pairs), np.int64, len(pairs))
        rows = np.asarray(kv.vectors[theirs], dtype=np.float32)
        if not np.isfinite(rows).all():
            raise VectorsError(f"init_vectors {_label(source)}: some of the vectors to take are "
                               f"not finite (NaN or infinite)")
        self.syn0[ours] = rows
        if lockf != 1.0:
            factors = self._lock_factors()
            self.lockf = np.ones(len(self.vocab), np.float32) if factors is None else factors
            self.lockf[ours] = lockf
        self._wv = None
        message = ("init_vectors %s: %d of %d vocabulary words start from its vectors (it has "
                   "%d words), the other %d at random")
        args = (_label(source), len(ours), len(self.vocab), len(kv), len(self.vocab) - len(ours))
        (logger.info if len(ours) else logger.warning)(message, *args)
        return len(ours)

    def _make_layer(self) -> OutputLayer:
        settings = check_layer_settings(self.loss, self.layer_settings)
        layer = layer_class(self.loss).create(self.vocab, seed=self.seed, **settings)
        if self.word_stats:
            layer.track_word_stats(len(self.vocab))
        return layer

    def _init_weights(self) -> None:
        # word2vec's initialisation: uniform in [-0.5, 0.5) / dim, output layer at zero.
        rng = np.random.default_rng(self.seed)
        V, D = len(self.vocab), self.vector_size
        inputs, outputs = self._hot_room()
        # both matrices get room below them for the threads' private copies of their hottest
        # rows (cpu_session.HotRows), which is never written until then: with it, training
        # with two or more threads copies neither matrix (the input vectors were once doubled
        # while training). The random start is the same numbers as without.
        self.syn0 = np.empty((V + inputs, D), dtype=np.float32)[:V]
        rng.random(dtype=np.float32, out=self.syn0)
        self.syn0 -= np.float32(0.5)
        self.syn0 /= np.float32(D)
        self.layer.allocate(V, D)
        self._give_room(outputs)
        self._wv = None

    def _hot_room(self) -> tuple:
        """Rows of room (input vectors, output weights) for ``workers`` threads' private copies
        of the hottest rows (``CpuSession``; none for one thread)."""
        if self.workers < 2:
            return 0, 0
        outputs = self.layer.hot_row_count(1 << 62) if self.layer is not None else 0
        return self.workers * CpuSession.HOT_INPUTS, self.workers * max(int(outputs), 0)

    def _give_room(self, rows: int) -> None:
        weights = getattr(self.layer, "weights", None)
        if isinstance(weights, np.ndarray) and weights.ndim == 2 and weights.dtype == np.float32:
            self.layer.weights = with_room(weights, rows)

    def _session(self, workers: Optional[int] = None, device_name: Optional[str] = None):
        name = self.device if device_name is None else device_name
        device = (make_device(name, self.backend, **self.device_options) if name == self.device
                  else make_device(name))
        check_layer_device(self.layer, device)
        return device.open(self.syn0, self.layer, self.workers if workers is None else workers)

    def train(self, sentences=None, epochs: Optional[int] = None, corpus_file=None,
              hooks: Sequence[Hook] = (), words_per_epoch: Optional[int] = None,
              checkpoint: Optional[str] = None, checkpoint_every: float = 30.0,
              _resume=None, _epoch_words=None) -> TrainReport:
        """Train (or keep training) on ``sentences``; the learning rate decays linearly from
        ``alpha`` to ``min_alpha`` over these ``epochs``, which hold ``words_per_epoch``
        in-vocabulary words each. Default: the words of ``sentences`` itself, so the rate
        reaches ``min_alpha`` at the end of this call and the progress bar 100% whatever the
        corpus: taken from the vocabulary's scan when ``sentences`` is the corpus
        ``build_vocab`` scanned (the same files, unchanged, or the same object), else counted
        by one reading pass first (compiled for files, about as fast as the vocabulary scan),
        as when continuing a loaded model on more text. A one-shot iterator cannot be counted
        ahead: give ``words_per_epoch`` (else the vocabulary's corpus length is used, with a
        warning). Returns the ``TrainReport``. A run whose loss or weights become non-finite raises
        ``TrainingDiverged``. ``checkpoint``: a file written (atomically) every
        ``checkpoint_every`` minutes and at the end, from which ``Word2Vec.resume`` continues
        a killed run (``semhuff.checkpoint``)."""
        if self.vocab is None:
            raise SemhuffError("build_vocab() must run before train()")
        locks = self._lock_factors()
        if locks is not None and self.dask_runner is not None:
            raise OptionError("locked input vectors (lockf other than 1) are not implemented "
                              "on Dask: train on one machine")
        self._pretrained = None  # applied by set_vocab: no need to hold it while training
        source = sentences if sentences is not None else corpus_file
        if source is None:
            raise SemhuffError("train() needs a corpus")
        corpus = as_corpus(source, self.max_sentence_length)
        epochs = self.epochs if epochs is None else int(epochs)
        if epochs < 1:
            raise OptionError("epochs must be >= 1")
        settings = TrainSettings.from_model(self, epochs, locks)
        logger.info("training %s, %s, dim %d, window %d, %s, %s on %s%s",
                    "skip-gram" if self.sg else "CBOW", self.layer.describe(), self.vector_size,
                    self.window, counted(epochs, "epoch"), counted(self.workers, "worker"),
                    self.device,
                    f" ({self.backend})" if self.backend else "")
        retained, raw = (_epoch_words if _epoch_words is not None
                         else self._epoch_words(corpus, words_per_epoch))
        saver = None
        if checkpoint is not None:
            saver = checkpoint_file.Checkpointer(self, checkpoint, checkpoint_every, corpus,
                                                 epochs, words_per_epoch, (retained, raw))
        if self.dask_runner is not None:
            report = self.dask_runner.train(self, corpus, settings, retained, saver, hooks,
                                            _resume)
        else:
            session = self._session()
            try:
                if locks is not None and not getattr(session, "locks", False):
                    raise OptionError(f"device {self.device!r} does not implement locked input "
                                      f"vectors (lockf other than 1): train on the CPU")
                report = train(session, self.vocab.keep_thresholds(self.sample), corpus,
                               self.vocab, retained, raw, settings, self.vocab.counts,
                               hooks=list(self.hooks) + list(hooks), checkpoint=saver,
                               start=_resume)
            finally:
                session.close()
        self._wv = None
        if report.raw_words == 0:
            hint = (" (it is a one-shot iterator: was it consumed already?)"
                    if is_one_shot(source) else "")
            raise SemhuffError(f"the corpus yielded no tokens during training{hint}")
        health.check_model(self, report)  # non-finite, or far worse than untrained: failed
        self.reports.append(report)
        self.train_calls += 1
        if self._scanned is not None and self._scanned[0] and self._scanned[0][0] == "object":
            self._scanned = None  # not pinning the caller's sentences in memory from now on
        if saver is not None:
            saver.finish(report)
        logger.info("%s", report.summary())
        return report

    def _lock_factors(self) -> Optional[np.ndarray]:
        """``lockf`` checked, as one float32 factor per word; None when nothing is locked
        (unset or all ones: then training runs the kernels without locks)."""
        if self.lockf is None:
            return None
        lockf = np.asarray(self.lockf)
        V = len(self.vocab)
        if lockf.ndim != 1 or len(lockf) not in (1, V) or not np.issubdtype(lockf.dtype,
                                                                              np.number):
            raise OptionError(f"lockf must be one number per word ({V}) or one for all, got "
                              f"an array of shape {lockf.shape}")
        lockf = lockf.astype(np.float32)  # a copy: what this call trains with
        if not np.isfinite(lockf).all():
            raise OptionError("lockf must be finite")
        if (lockf == 1.0).all():
            return None
        return np.full(V, lockf[0], np.float32) if len(lockf) == 1 < V else lockf

    def _epoch_words(self, corpus, words_per_epoch: Optional[int] = None) -> tuple:
        """(in-vocabulary, raw) words an epoch of ``corpus`` holds: the learning-rate schedule
        runs over epochs x the first, the progress bar over epochs x the second."""
        vocab = self.vocab
        if words_per_epoch is not None:  # raw words scaled by the vocabulary's corpus
            words = max(1, int(words_per_epoch))
            return words, max(1, int(words * vocab.total_tokens / max(1, vocab.retained_tokens)))
        scanned = self._scanned
        if scanned is not None and scanned[1] is vocab and _same_corpus(scanned[0], corpus):
            return vocab.retained_tokens, vocab.total_tokens
        if self.dask_runner is not None:  # on the cluster, shard by shard (every shard's rate)
            return self.dask_runner.count_words(self, corpus)
        if is_one_shot(corpus):
            logger.warning("train() on a one-shot iterator cannot count its words ahead: the "
                           "learning rate decays over the vocabulary's corpus length (%d words "
                           "an epoch); pass words_per_epoch if it is another corpus",
                           vocab.retained_tokens)
            return vocab.retained_tokens, vocab.total_tokens
        bar = _scan_bar(self.progress, "counting")
        try:
            kept, raw = count_words(corpus, vocab, self.chunk_words, bar.update)
        finally:
            bar.close()
        logger.info("this corpus: %d words an epoch, %d of them in the vocabulary (the "
                    "learning rate falls to min_alpha over these)", raw, kept)
        return max(1, kept), max(1, raw)

    @classmethod
    def resume(cls, checkpoint: str, sentences=None, **options) -> "Word2Vec":
        """Continue the killed ``train()`` call a checkpoint file holds (``semhuff.checkpoint.
        resume``: ``sentences`` defaults to the files it was training on)."""
        progress = options.pop("progress", True)
        model, state = checkpoint_file.load(checkpoint, cls, progress)
        return checkpoint_file.resume(checkpoint, sentences, model=model, state=state, **options)

    def score(self, sentences, workers: Optional[int] = None, clusters: bool = False) -> ScoreReport:
        """Mean negative log-likelihood per prediction and perplexity of held-out text (full
        window, no down-sampling; see ``semhuff.scoring``). Needs a layer with normalised
        probabilities (hierarchical softmax over any tree, the class softmax). ``clusters``:
        also the cluster and in-cluster perplexity (clustered layers, Shen et al. eqs. 5-6).
        Runs where the device scores (a GPU-trained model: on the CPU, on the weights in host
        memory)."""
        if self.vocab is None:
            raise SemhuffError("the model has no vocabulary yet: train it first")
        corpus = as_corpus(sentences, self.max_sentence_length)
        check_device_options(self.device, self.backend)
        session = self._session(workers, scoring_device(self.device))
        try:
            return score(session, corpus, self.vocab.index, bool(self.sg), self.window,
                         self.chunk_words, bool(self.cbow_mean), clusters)
        finally:
            session.close()

    # -- vectors ------------------------------------------------------------------------------------
    @property
    def wv(self):
        """The word vectors as a gensim ``KeyedVectors`` (a copy, refreshed after training)."""
        if self.vocab is None:
            raise SemhuffError("the model has no vectors yet: build_vocab() and train() first")
        if self._wv is None:
            self._wv = to_keyed_vectors(self.vocab.words, self.vocab.counts, self.syn0)
        return self._wv

    @property
    def dask(self):
        """Where training runs when not on this machine: a Dask scheduler's address, "local:N",
        a ``distributed.Client`` or a ``DaskTraining`` (None: here). Setting it sets
        ``dask_runner``, which holds that run's state."""
        return self.dask_runner.spec if self.dask_runner is not None else None

    @dask.setter
    def dask(self, spec) -> None:
        if self.dask_runner is not None:
            self.dask_runner.close()
        self.dask_runner = DaskRunner(spec) if spec is not None else None

    @property
    def tree(self) -> Optional[Tree]:
        return getattr(self.layer, "tree", None)

    def layer_setting(self, name: str):
        """The output layer's setting ``name`` as given, else as the layer declares it."""
        if name in self.layer_settings:
            return self.layer_settings[name]
        declared = {o.name: o.default for o in layer_class(self.loss).declared_options()}
        return declared.get(name)

    # gensim-style attributes over the layer's settings (setting one sets it for the next layer)
    negative = property(lambda self: self.layer_setting("negative"),
                        lambda self, v: self.layer_settings.__setitem__("negative", v))
    ns_exponent = property(lambda self: self.layer_setting("ns_exponent"),
                           lambda self, v: self.layer_settings.__setitem__("ns_exponent", v))
    hs_order = property(lambda self: self.layer_setting("hs_order"))
    similarity = property(lambda self: self.layer_setting("similarity"))
    tree_spec = property(lambda self: self.layer_setting("tree"),
                         lambda self, v: self.layer_settings.__setitem__("tree", v))

    # -- persistence --------------------------------------------------------------------------------
    def params(self) -> dict:
        """The settings that ``Word2Vec(**params)`` takes back (JSON-able ones)."""
        out = {k: getattr(self, k) for k in (
            "vector_size", "window", "min_count", "max_vocab_size", "max_final_vocab", "sample",
            "sg", "cbow_mean", "loss", "word_stats", "alpha", "min_alpha", "epochs", "workers",
            "device", "backend", "device_options", "seed", "max_sentence_length", "chunk_words",
            "shrink_windows")}
        out["layer_options"] = {k: v for k, v in self.layer_settings.items() if _jsonable(v)}
        return out

    def save(self, path: str, format: str = "npz") -> None:
        """The full model as one ``.npz`` file: settings, vocabulary, input vectors and the
        output layer's complete state (``layer.config()`` and ``layer.arrays()``), so
        ``Word2Vec.load`` gives the same layer with the same state and training continues.
        ``format="gensim"``: gensim's ``Word2Vec`` of this model instead (``to_gensim``), one
        pickle that ``gensim.models.Word2Vec.load`` reads (and ``Word2Vec.load`` here too)."""
        if format == "gensim":
            model = self.to_gensim()
            with atomic_path(path) as tmp:
                model.save(tmp, separately=[])  # one file: no arrays beside it under tmp's name
            return
        if format != "npz":
            raise OptionError(f"format must be 'npz' or 'gensim', got {format!r}")
        arrays = self._arrays()
        with atomic_output(path) as fh:
            np.savez(fh, **arrays)

    def to_gensim(self):
        """This model as gensim's ``Word2Vec`` (``semhuff.gensim_support.to_gensim``): its
        vectors, counts and hierarchical softmax (over this model's tree) or negative sampling,
        which gensim saves, loads and keeps training."""
        if self.layer is None:
            raise SemhuffError("the model has nothing to export yet: build_vocab() first")
        from .gensim_support import to_gensim
        return to_gensim(self)

    def _arrays(self) -> dict:
        """What ``save`` writes (a checkpoint adds its position)."""
        if self.layer is None:
            raise SemhuffError("the model has nothing to save yet: build_vocab() first")
        meta = {"format_version": MODEL_FORMAT_VERSION, "params": self.params(),
                "layer": {"name": self.layer.name, "config": self.layer.config()},
                "total_tokens": self.vocab.total_tokens,
                "train_calls": self.train_calls, "annotations": self.annotations}
        arrays = {"syn0": self.syn0, "vocab_counts": self.vocab.counts,
                  "vocab_words": pack_words(self.vocab.words),
                  "meta": np.array(json.dumps(meta))}
        arrays.update({_LAYER_PREFIX + k: v for k, v in self.layer.arrays().items()})
        if self.lockf is not None:
            arrays["lockf"] = np.asarray(self.lockf, dtype=np.float32)
        return arrays

    @classmethod
    def load(cls, path: str, progress: bool = True) -> "Word2Vec":
        try:
            with open_npz(path) as data:  # a non-model file: our one line, not numpy's
                arrays = {k: data[k] for k in data.files}
            if "meta" not in arrays:
                kind = " (a tree file: semhuff-tree reads it)" if "tree_parent" in arrays else ""
                raise ModelFileError(f"{path} is a .npz archive but not a semhuff model file{kind}")
            meta = json.loads(str(arrays["meta"]))
            params = dict(meta["params"])
            version = meta.get("format_version", 1)
            if version == 1:  # a plain HS / NS model: its tree and weights under fixed names
                name, config, layer_arrays = _v1_layer(params, arrays)
            else:
                name, config = meta["layer"]["name"], meta["layer"]["config"]
                layer_arrays = {k[len(_LAYER_PREFIX):]: v for k, v in arrays.items()
                                if k.startswith(_LAYER_PREFIX)}
            words = unpack_words(arrays["vocab_words"])
            vocab = Vocab(words, arrays["vocab_counts"], meta["total_tokens"], params["min_count"])
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise ModelFileError(f"not a semhuff model file: {path} ({exc})") from None
        layer = layer_from_state(name, config, layer_arrays)  # a clear error if not registered
        params["layer_options"] = _saved_layer_settings(params, type(layer))
        # where it was trained is restored but not probed: a GPU-trained model loads, exports
        # and scores anywhere; training it again checks the device then
        device = {k: params.pop(k, None) for k in ("device", "backend", "device_options")}
        model = cls(**params, progress=progress)
        model.device = device["device"] or "cpu"
        model.backend = device["backend"]
        model.device_options = dict(device["device_options"] or {})
        model.vocab = vocab
        model.layer = layer
        inputs, outputs = model._hot_room()
        model.syn0 = with_room(np.ascontiguousarray(arrays["syn0"], dtype=np.float32), inputs)
        model._give_room(outputs)
        model.train_calls = int(meta.get("train_calls", 0))
        model.annotations = dict(meta.get("annotations", {}))
        if "lockf" in arrays:
            model.lockf = np.array(arrays["lockf"], dtype=np.float32)
        return model

    def save_vectors(self, path: str, fmt: str = "auto") -> str:
        """Write the vectors: ``npz`` (this full model; ``model``, its former name, too), ``kv``
        (gensim KeyedVectors), ``gensim`` (gensim's whole ``Word2Vec``, ``to_gensim``), ``text``
        / ``binary`` (word2vec formats). ``auto`` picks by extension. Atomic."""
        fmt = resolve_format(path, fmt)
        if fmt == "npz":
            self.save(path)
        elif fmt == "gensim":
            self.save(path, format="gensim")
        elif fmt == "binary":
            save_word2vec_binary(self.vocab.words, self.syn0, path)
        else:
            save_keyed_vectors(self.wv, path, fmt)
        return fmt


def _v1_layer(params: dict, arrays: dict):
    """The layer of a format-1 model file (before layers saved their own state)."""
    weights = {"weights": arrays["output_weights"]}
    if params.get("loss") == "ns":
        from .kernels.ns import build_alias_table
        thr, alias = build_alias_table(np.asarray(arrays["vocab_counts"], np.float64)
                                       ** params["ns_exponent"])
        return "ns", {"negative": params["negative"], "exponent": params["ns_exponent"]}, \
            {**weights, "alias_thr": thr, "alias_idx": alias}
    tree = {k: arrays[k] for k in ("tree_parent", "tree_branch", "tree_kind")}
    return "hs", {"order": params.get("hs_order", "mixed")}, {**weights, **tree}


def _saved_layer_settings(params: dict, layer_cls) -> dict:
    """The layer settings a model file holds: ``layer_options`` since they are checked by the
    layer's declarations; files from before held every layer's settings side by side (negative
    beside hs_order), of which the layer's own are kept."""
    declared = {o.name for o in layer_cls.declared_options()}
    settings = {k: params.pop(k) for k in ("negative", "ns_exponent", "hs_order") if k in params}
    settings.update(params.get("layer_options") or {})
    return {k: v for k, v in settings.items() if k in declared}


def _check_lock_value(value, name: str) -> float:
    """A lock factor given as one number (finite)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or not np.isfinite(value):
        raise OptionError(f"{name} must be a finite number (0: frozen, 1: trained), got {value!r}")
    return float(value)


def _label(source) -> str:
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else type(source).__name__


def _pretrained_vectors(source, dim: int, fmt: str = "auto"):
    """``source``'s vectors as ``KeyedVectors`` (a ``VectorsError`` if unreadable), of
    dimension ``dim`` (else an ``OptionError``)."""
    from .vectors_io import read_vectors
    kv = read_vectors(source, fmt)[0]
    if kv.vector_size != dim:
        raise OptionError(f"init_vectors {_label(source)} holds {kv.vector_size}-dimensional "
                          f"vectors but the model's are {dim}-dimensional (vector_size / --dim "
                          f"{kv.vector_size}?)")
    return kv


def _jsonable(value) -> bool:
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def _scan_bar(enabled: bool, desc: str = "vocabulary"):
    from tqdm.auto import tqdm
    return tqdm(unit="w", unit_scale=True, desc=desc, disable=not enabled, leave=False)


def _corpus_key(corpus):
    """What identifies the corpus a vocabulary was scanned from: its files with their sizes and
    times (a file changed since is another corpus), any one-shot iterator (the documented
    ``build_vocab(generator); train(another generator of the same text)``), else the object."""
    if isinstance(corpus, Corpus):
        try:
            return ("files", tuple((os.path.abspath(f), os.stat(f).st_size, os.stat(f).st_mtime_ns)
                                   if not is_url(f) else (f,) for f in corpus.files))
        except OSError:
            return None
    if is_one_shot(corpus):
        return ("one-shot",)
    return ("object", corpus)


def _same_corpus(key, corpus) -> bool:
    if key is None:
        return False
    if key[0] == "object":
        return key[1] is corpus
    return key == _corpus_key(corpus)
