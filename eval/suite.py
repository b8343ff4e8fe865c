"""Run every requested task on every model: data sets are read once, a missing one is skipped
with a message (never an exception), and each model gets its list of :class:`Score` rows.

A skipped data set is listed in ``Report.skipped`` (``SKIPPED`` lines under the table, with
where the data folder was looked for, ``Report.data_hint``); one the caller asked for by name
(``SuiteConfig.requested``: ``"pos"`` or ``"pos/conll2000"``) is also in
``Report.skipped_requested``, and ``semhuff-eval`` exits 1 for it (issue 23.8).

A task that fails on a model (it raises, or yields a value its metric cannot take), and a model
whose vectors are not finite, are *failures*: listed in ``Report.failed``, their numbers left
out, and ``semhuff-eval`` exits non-zero."""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import time
from pathlib import Path
from typing import Callable, Optional

from threadpoolctl import threadpool_limits
from tqdm import tqdm

from ..errors import OptionError
from .datasets import DatasetMissing, data_hint, data_root
from .results import Score
from .tasks import EVALUATION_TASKS, declared_options, get_task, out_of_range, task_names
from .vectors import DEFAULT_RESTRICT_VOCAB, LoadedVectors, Lookup, non_finite_message

logger = logging.getLogger(__name__)


class SuiteConfig:
    """What to evaluate: the tasks (default: every registered one, in registration order), the
    data root, the vocabulary rules, and each task's settings as keywords (``pos_window=3``,
    ``similarity_files={...}``): the names the tasks declare (``EvaluationTask.OPTIONS``), read
    back as attributes (``config.pos_window``; a setting not given is its declared default).
    A name no registered task declares, or a value its declaration refuses, is an
    ``OptionError`` naming it."""

    def __init__(self, tasks: Optional[tuple] = None, data_dir: Optional[Path] = None,
                 restrict_vocab: Optional[int] = DEFAULT_RESTRICT_VOCAB, case_insensitive: bool = True,
                 requested: frozenset = frozenset(), **settings):
        self.tasks = task_names() if tasks is None else tuple(tasks)
        for name in self.tasks:
            get_task(name)  # an unknown one is an OptionError
        self.data_dir = data_dir
        self.restrict_vocab = restrict_vocab
        self.case_insensitive = case_insensitive
        #: what the caller asked for by name ("pos", "similarity/rg65"): skipping it is an error
        self.requested = requested
        declared = declared_options()
        unknown = sorted(set(settings) - set(declared))
        if unknown:
            raise OptionError(f"no evaluation task takes {', '.join(unknown)} (the tasks "
                              f"{', '.join(EVALUATION_TASKS)} take: {', '.join(declared) or 'nothing'})")
        #: the task settings given (the others are their declared defaults)
        self.given = {name: declared[name][0].validate(value) for name, value in settings.items()}

    def __getattr__(self, name):
        if name.startswith("_") or name == "given":
            raise AttributeError(name)
        declared = declared_options()
        if name not in declared:
            raise AttributeError(f"SuiteConfig has no setting {name!r}")
        return self.given[name] if name in self.given else copy.copy(declared[name][0].default)

    def task_settings(self, name: str) -> dict:
        """The value of each setting task ``name`` declares."""
        return {o.name: getattr(self, o.name) for o in get_task(name).OPTIONS}

    def settings(self) -> dict:
        """Every setting (the suite's and every registered task's), as the JSON report has them."""
        out = {"tasks": self.tasks, "data_dir": self.data_dir}
        out.update({name: getattr(self, name) for name in declared_options()})
        out.update(restrict_vocab=self.restrict_vocab, case_insensitive=self.case_insensitive,
                   requested=self.requested)
        return out

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self.given.items())
        return (f"SuiteConfig(tasks={self.tasks!r}, data_dir={self.data_dir!r}"
                f"{', ' + given if given else ''})")

    @property
    def root(self) -> Path:
        return self.data_dir if self.data_dir is not None else data_root()


@dataclasses.dataclass
class ModelResult:
    name: str
    source: str
    words: int
    dimensions: int
    load_problems: dict
    scores: list = dataclasses.field(default_factory=list)
    #: wall seconds per ``task/dataset``
    seconds: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Report:
    models: list
    skipped: list
    settings: dict
    seconds: float = 0.0
    #: tasks that failed on a model: "task/dataset failed for model: why"
    failed: list = dataclasses.field(default_factory=list)
    #: the skipped data sets that ``SuiteConfig.requested`` named ("task/dataset: why")
    skipped_requested: list = dataclasses.field(default_factory=list)
    #: where the data folder is or was looked for, and how to point to it (when data was missing)
    data_hint: str = ""


# A prepared data set: (task, data set name, evaluate(lookup) -> scores)
Job = tuple[str, str, Callable[[Lookup], list]]


def plan_jobs(config: SuiteConfig) -> list[tuple[str, str, Callable[[], Callable[[Lookup], list]]]]:
    """(task, data set, read) for every requested data set, the tasks in registration order;
    ``read()`` loads the data and returns the job's evaluate function. Nothing is read yet."""
    root, plan = config.root, []
    for task in EVALUATION_TASKS.values():
        if task.name in config.tasks:
            plan += [(task.name, name, read) for name, read in task.plan(config.task_settings(task.name), root)]
    return plan


def prepare_jobs(config: SuiteConfig, skipped: list, requested: Optional[list] = None,
                 bar=None) -> list[Job]:
    """Read every requested data set once; what is missing or unusable goes to ``skipped``
    (and to ``requested`` when ``config.requested`` names it); ``bar`` counts each read."""
    jobs: list[Job] = []
    for task, name, read in plan_jobs(config):
        if bar is not None:
            bar.set_postfix_str(f"reading {task}/{name}")
        try:
            jobs.append((task, name, read()))
        except (DatasetMissing, OSError, ValueError) as exc:
            message = f"{task}/{name}: {exc}"
            logger.warning("skipped %s", message)
            skipped.append(message)
            if requested is not None and ({task, f"{task}/{name}"} & set(config.requested)):
                requested.append(message)
        if bar is not None:
            bar.update()
    return jobs


def unique_names(names: list[str]) -> list[str]:
    """``names`` with repeats told apart (``a``, ``a#2``, ...), so each model gets its own column."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def run_suite(models: list[LoadedVectors], config: Optional[SuiteConfig] = None,
              progress=False, threads: Optional[int] = 1) -> Report:
    """Evaluate ``models`` on the tasks of ``config``; ``progress``: True shows a tqdm bar on a
    terminal, or a callable ``progress(total)`` makes the bar (tqdm's ``update``,
    ``set_postfix_str``, ``refresh``, ``close`` and a settable ``total``).

    ``threads`` caps the BLAS threads (None: the library's default). One thread is the default:
    OpenBLAS threads spin while waiting, and on a busy machine they made the POS classifier
    20 times slower than a single thread."""
    config = config or SuiteConfig()
    limit = threadpool_limits(limits=threads) if threads else contextlib.nullcontext()
    with limit:
        return _run_suite(models, config, progress)


def _run_suite(models: list[LoadedVectors], config: SuiteConfig, progress: bool) -> Report:
    started = time.perf_counter()
    skipped: list[str] = []
    failed: list[str] = []
    requested: list[str] = []
    planned = len(plan_jobs(config))
    # one step per data set read and per (model, data set): reading WordNet or a POS corpus
    # takes seconds, so the bar moves before the first score too
    total = planned * (1 + len(models))
    bar = progress(total) if callable(progress) else tqdm(
        total=total, desc="evaluating", unit="step", disable=None if progress else True)
    jobs = prepare_jobs(config, skipped, requested, bar)
    bar.total = len(jobs) * len(models) + planned
    bar.refresh()
    results = []
    for model, name in zip(models, unique_names([m.name for m in models])):
        report = model.report
        result = ModelResult(name, report.source, report.words, report.dimensions, {
            "malformed_lines": report.malformed_lines, "wrong_dimension_lines": report.wrong_dimension_lines,
            "duplicate_words": report.duplicate_words})
        results.append(result)
        problem = non_finite_message(model.vectors)
        if problem:
            _fail(failed, f"{name}: not evaluated: {problem}")
            bar.update(len(jobs))
            continue
        lookup = Lookup(model.vectors, config.restrict_vocab, config.case_insensitive)
        for task, dataset, evaluate in jobs:
            bar.set_postfix_str(f"{name} {task}/{dataset}")
            job_started = time.perf_counter()
            result.scores.extend(_run_one(evaluate, lookup, task, dataset, name, failed))
            result.seconds[f"{task}/{dataset}"] = round(time.perf_counter() - job_started, 3)
            bar.update()
    bar.close()
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in config.settings().items()}
    settings["data_dir"] = str(config.root)
    settings["requested"] = sorted(config.requested)
    hint = ""
    if skipped:  # where the data was looked for, and how to point to it
        hint = (f"data folder {config.data_dir} (given as data_dir / --data-dir)"
                if config.data_dir is not None else data_hint())
    return Report(results, skipped, settings, time.perf_counter() - started, failed, requested, hint)


def _fail(failed: list, message: str) -> None:
    logger.error(message)
    failed.append(message)


def _run_one(evaluate, lookup, task, name, model_name, failed) -> list[Score]:
    try:
        scores = evaluate(lookup)
    except (ValueError, MemoryError) as exc:  # e.g. a POS split whose train part has one tag only
        _fail(failed, f"{task}/{name} failed for {model_name}: {exc}")
        return []
    impossible = [why for why in map(out_of_range, scores) if why]
    if impossible:  # never report a number the metric cannot take
        _fail(failed, f"{task}/{name} failed for {model_name}: impossible value {impossible[0]}")
        return []
    return scores
