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
import dataclasses
import logging
import time
from functools import partial
from pathlib import Path
from typing import Callable, Optional

from threadpoolctl import threadpool_limits
from tqdm import tqdm

from . import analogy, pos, similarity, synonyms, thesaurus
from .datasets import (DatasetMissing, Parsed, data_hint, data_root, default_analogy_path,
                       default_similarity_path, default_wordnet_dir, SIMILARITY_FILES)
from .results import Score, out_of_range
from .vectors import DEFAULT_RESTRICT_VOCAB, LoadedVectors, Lookup, non_finite_message

logger = logging.getLogger(__name__)

TASKS = ("similarity", "analogy", "synonyms", "pos")


@dataclasses.dataclass
class SuiteConfig:
    tasks: tuple = TASKS
    data_dir: Optional[Path] = None
    #: name -> file (None: the built-in set's default place); None means all of ``SIMILARITY_FILES``
    similarity_files: Optional[dict] = None
    analogy_file: Optional[Path] = None
    analogy_methods: tuple = analogy.METHODS
    #: a ``word<TAB>word`` file; None means pairs built on the fly from WordNet (``wordnet_dir``)
    synonym_file: Optional[Path] = None
    wordnet_dir: Optional[Path] = None
    synonym_direction: str = "both"
    pos_corpora: tuple = pos.DEFAULT_POS_CORPORA
    #: extra POS corpora: name -> (train file, test file)
    pos_files: dict = dataclasses.field(default_factory=dict)
    pos_window: int = pos.DEFAULT_WINDOW
    pos_max_train_tokens: Optional[int] = pos.DEFAULT_MAX_TRAIN_TOKENS
    restrict_vocab: Optional[int] = DEFAULT_RESTRICT_VOCAB
    case_insensitive: bool = True
    #: what the caller asked for by name ("pos", "similarity/rg65"): skipping it is an error
    requested: frozenset = frozenset()

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
    """(task, data set, read) for every requested data set; ``read()`` loads the data and returns
    the job's evaluate function. Nothing is read yet."""
    root, plan = config.root, []
    if "similarity" in config.tasks:
        files = config.similarity_files if config.similarity_files is not None else dict.fromkeys(SIMILARITY_FILES)
        for name, path in files.items():
            if path is None and name in SIMILARITY_FILES:
                path = default_similarity_path(name, root)
            plan.append(("similarity", name, partial(_similarity_job, path, name)))
    if "analogy" in config.tasks:
        path = config.analogy_file or default_analogy_path(root)
        plan.append(("analogy", "google", partial(_analogy_job, path, config.analogy_methods)))
    if "synonyms" in config.tasks:
        source = config.synonym_file or config.wordnet_dir or default_wordnet_dir(root)
        name = Path(config.synonym_file).stem if config.synonym_file else "wordnet"
        plan.append(("synonyms", name, partial(_synonyms_job, source, config.synonym_file is not None, name,
                                               config.synonym_direction)))
    if "pos" in config.tasks:
        corpora = [(n, partial(pos.load_pos_corpus, n, root)) for n in config.pos_corpora]
        corpora += [(n, partial(pos.load_pos_files, n, *files)) for n, files in config.pos_files.items()]
        for name, load in corpora:
            plan.append(("pos", name, partial(_pos_job, load, config.pos_window, config.pos_max_train_tokens)))
    return plan


def _similarity_job(path, name):
    return partial(similarity.evaluate_word_pairs, pairs=similarity.read_word_pairs(path), name=name)


def _analogy_job(path, methods):
    return partial(analogy.evaluate_analogies, data=analogy.read_analogies(path), name="google", methods=methods)


def _synonyms_job(source, is_pairs_file: bool, name: str, direction: str):
    if is_pairs_file:
        pairs = synonyms.read_synonym_pairs(source)
    else:  # a WordNet folder: pairs made on the fly (about a second)
        pairs = Parsed(str(source), thesaurus.synonym_pairs(thesaurus.wordnet_synsets(source)))
    return partial(synonyms.evaluate_synonyms, pairs=pairs, name=name, direction=direction)


def _pos_job(load, window, max_train_tokens):
    return partial(pos.evaluate_pos, corpus=load(), window=window, max_train_tokens=max_train_tokens)


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
              progress: bool = False, threads: Optional[int] = 1) -> Report:
    """Evaluate ``models`` on the tasks of ``config``; ``progress`` shows a tqdm bar on a terminal.

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
    bar = tqdm(total=planned * (1 + len(models)), desc="evaluating", unit="step",
               disable=None if progress else True)
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
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(config).items()}
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
