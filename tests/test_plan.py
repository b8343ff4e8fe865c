"""One shape for the learning rate and the training plan (issue 33).

The trainer, scoring and Dask's shards each hand their session a ``Plan`` made by
``Plan.from_settings`` (seen by wrapping it and the session's ``warm_up``), whose fields are the
ones expected from the model's settings and an independent count of the corpus; Dask's workers
are sent the ``TrainSettings`` dataclass (pickled, as Dask would), not a dict; an out-of-range
rate or setting is a one-line ``OptionError``.
"""
import math
import pickle
from collections import Counter

import numpy as np
import pytest

import semhuff.distributed as dist
from semhuff import Word2Vec
from semhuff.cpu_session import CpuSession, Plan
from semhuff.distributed.rounds import ShardSettings, ShardTrainer
from semhuff.errors import OptionError
from semhuff.schedule import Schedule
from semhuff.trainer import TrainSettings

MIN_COUNT, EPOCHS = 2, 2
SETTINGS = dict(vector_size=8, window=3, min_count=MIN_COUNT, sample=1e-3, alpha=0.04,
                min_alpha=0.001, epochs=EPOCHS, seed=5, workers=1, shrink_windows=False,
                chunk_words=500, progress=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(40)]
    p = 1.0 / np.arange(1, 41)
    lines = [" ".join(rng.choice(words, size=rng.integers(3, 12), p=p / p.sum()))
             for _ in range(300)]
    path = tmp_path_factory.mktemp("plan") / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path), lines


def _in_vocab_tokens(lines) -> int:
    """Independent count: the tokens of words seen at least min_count times."""
    counts = Counter(w for line in lines for w in line.split())
    return sum(c for c in counts.values() if c >= MIN_COUNT)


@pytest.fixture
def spy(monkeypatch):
    """(plans ``Plan.from_settings`` made, (plan, score) of every session warm-up)."""
    made, warmed = [], []
    original, warm_up = Plan.from_settings, CpuSession.warm_up

    def from_settings(cls, *args, **kwargs):
        made.append(original(*args, **kwargs))
        return made[-1]

    def watched_warm_up(self, plan, score=False):
        warmed.append((plan, score))
        return warm_up(self, plan, score)
    monkeypatch.setattr(Plan, "from_settings", classmethod(from_settings))
    monkeypatch.setattr(CpuSession, "warm_up", watched_warm_up)
    return made, warmed


def _same(a: Plan, b: Plan) -> None:
    """Field by field (arrays by value)."""
    for name in Plan.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            assert x is not None and y is not None and np.array_equal(x, y), name
        else:
            assert x == y, name


def _one_plan(spy, score: bool) -> Plan:
    made, warmed = spy
    plans = [plan for plan, s in warmed if s == score]
    assert len(plans) == 1
    assert any(plans[0] is p for p in made), "the session's plan was not made by from_settings"
    return plans[0]


def test_the_trainer_plans_through_from_settings(corpus, spy):
    path, lines = corpus
    model = Word2Vec(path, **SETTINGS)
    plan = _one_plan(spy, score=False)
    total = EPOCHS * _in_vocab_tokens(lines)
    assert plan.schedule == Schedule(0.04, 0.001, total)
    assert (plan.sg, plan.window, plan.reduce_window, plan.cbow_mean) == (True, 3, False, True)
    assert plan.lockf is None
    assert np.array_equal(plan.counts, [Counter(w for line in lines for w in line.split())[w]
                                        for w in model.vocab.words])
    _same(plan, Plan.from_settings(TrainSettings.from_model(model, EPOCHS),
                                   model.vocab.keep_thresholds(model.sample), total,
                                   model.vocab.counts))


def test_cbow_with_the_contexts_sum_trains_through_its_plan(corpus, spy):
    """gensim's cbow_mean=0 (the context vectors' sum predicts the centre) reaches the
    training plan, and so the kernels: sum and mean CBOW train other vectors."""
    path, _ = corpus
    vectors = {}
    for mean in (1, 0):
        spy[1].clear()
        model = Word2Vec(path, **{**SETTINGS, "sg": 0, "cbow_mean": mean})
        plan = _one_plan(spy, score=False)
        assert (plan.sg, plan.cbow_mean) == (False, bool(mean))
        vectors[mean] = model.syn0.copy()
    assert not np.allclose(vectors[0], vectors[1], rtol=0.01, atol=1e-4)


def test_scoring_plans_through_from_settings(corpus, spy):
    path, _ = corpus
    model = Word2Vec(path, **{**SETTINGS, "sg": 0, "cbow_mean": 0})
    spy[1].clear()
    model.score(path)
    plan = _one_plan(spy, score=True)
    # the full window, no down-sampling, no rate (the scoring kernels read none), no locks
    assert plan.schedule == Schedule(0.0, 0.0, 1)
    assert (plan.sg, plan.window, plan.reduce_window, plan.cbow_mean) == (False, 3, False, False)
    assert plan.keep_thr.dtype == np.uint32 and (plan.keep_thr == 0xFFFFFFFF).all()
    assert len(plan.keep_thr) == len(model.vocab)
    assert plan.counts is None and plan.lockf is None
    _same(plan, Plan.from_settings(TrainSettings(sg=False, window=3, cbow_mean=False),
                                   np.full(len(model.vocab), 0xFFFFFFFF, np.uint32), score=True))


class _Future:
    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value


class _Actor:
    def __init__(self, obj):
        self.obj = obj

    def __getattr__(self, name):
        method = getattr(self.obj, name)
        return lambda *args, **kwargs: _Future(method(*args, **kwargs))


class _Runtime:
    """One Dask worker, in this process: what is submitted is pickled, as for a real one."""

    def __init__(self):
        self.client, self.sent = self, []

    def submit(self, fn, *args, **kwargs):
        args = pickle.loads(pickle.dumps(args))
        self.sent.append((fn, args))
        return _Future(_Actor(fn(*args)))

    def workers(self):
        return [("in-process", 1)]


def test_dask_shards_plan_through_from_settings(corpus, spy):
    path, lines = corpus
    model = Word2Vec(**SETTINGS)
    model.build_vocab(path)
    settings = TrainSettings.from_model(model, EPOCHS)
    runtime = _Runtime()
    report = dist.train(model, [path], settings, runtime,
                        dist.DaskTraining("in-process", round_words=1_000))
    assert report.raw_words == EPOCHS * sum(len(line.split()) for line in lines)
    (fn, args), = runtime.sent
    assert fn is ShardTrainer
    sent = args[6]
    assert isinstance(sent, ShardSettings) and isinstance(sent.train, TrainSettings)
    assert sent.train == settings and sent.threads == 1
    total = EPOCHS * _in_vocab_tokens(lines)  # one worker: the whole corpus is its shard
    assert sent.total_words == total
    plan = _one_plan(spy, score=False)
    assert plan.schedule == Schedule(0.04, 0.001, total)
    assert (plan.sg, plan.window, plan.reduce_window) == (True, 3, False)
    assert plan.counts is None and plan.lockf is None  # as before: no hot rows on a shard
    _same(plan, Plan.from_settings(settings, model.vocab.keep_thresholds(model.sample), total))


@pytest.mark.parametrize("bad", [dict(alpha=-0.1), dict(alpha=math.nan), dict(alpha=math.inf),
                                 dict(min_alpha=0.05), dict(min_alpha=-1e-4),
                                 dict(min_alpha=math.nan), dict(window=0), dict(window=2.5),
                                 dict(window=True), dict(epochs=0), dict(chunk_words=0)])
def test_out_of_range_settings_are_one_line_option_errors(bad):
    with pytest.raises(OptionError) as err:
        TrainSettings(**bad)
    assert "\n" not in str(err.value)
    assert next(iter(bad)) in str(err.value)


@pytest.mark.parametrize("rate", [(0.01, 0.02, 10), (-1.0, -2.0, 10), (0.025, 0.0001, 0)])
def test_out_of_range_schedule_is_a_one_line_option_error(rate):
    with pytest.raises(OptionError) as err:
        Schedule(*rate)
    assert "\n" not in str(err.value)


def test_a_rate_set_out_of_range_after_construction_is_refused_before_training(corpus):
    path, _ = corpus
    model = Word2Vec(**SETTINGS)
    model.build_vocab(path)
    before = model.syn0.copy()
    model.min_alpha = 0.5  # above alpha: the rate would rise
    with pytest.raises(OptionError, match="min_alpha") as err:
        model.train(path)
    assert "\n" not in str(err.value)
    assert np.array_equal(model.syn0, before) and model.train_calls == 0
