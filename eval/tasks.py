"""Evaluation tasks as registered objects: one class per task says everything the suite, the
results' range checks, the report, the plot and ``semhuff-eval`` need to know about it.

A task is a subclass of :class:`EvaluationTask` registered under its name::

    @register_task("mytask")
    class MyTask(EvaluationTask):
        title = "my task"                                  # help group of its flags
        OPTIONS = (Option("mytask_file", Path, flag="--mytask-file", help="..."),)
        METRICS = {"accuracy": (0.0, 1.0)}                 # the values each metric can take
        PANELS = (Panel("My task accuracy", lambda s: s.dataset),)

        def plan(self, settings, root):                    # settings: its OPTIONS' values
            return [("mine", partial(read_and_score, settings["mytask_file"]))]

``plan`` names each data set and gives a ``read()`` that loads it and returns
``evaluate(lookup) -> [Score]`` (nothing is read while planning). ``semhuff-eval --tasks`` lists
every registered task; each task's command-line declarations become flags
(``semhuff.options.add_option_flags``), and a flag of a task that is not run is refused;
``SuiteConfig(**settings)`` refuses a setting no task declares. Built in: ``similarity``,
``analogy``, ``synonyms``, ``pos`` (each registered in its own module); a plugin registers its
own from one file imported with ``semhuff-eval --plugin MODULE`` (docs/evaluation.md).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from ..data_paths import ManifestEntry
from ..errors import OptionError
from ..options import Option, add_option_flags
from .results import Score

__all__ = ["EVALUATION_TASKS", "EvaluationTask", "Panel", "Repeated", "add_task_flags", "all_among",
           "choice_list", "declared_options", "get_task", "named_value", "non_negative_int", "out_of_range",
           "register_task", "task_names", "unused_flags"]

#: name -> the registered task (an instance), in registration order: the order of the report's
#: rows, of the JSON settings and of the default ``--tasks``
EVALUATION_TASKS: Dict[str, "EvaluationTask"] = {}

# settings of the suite itself (not of a task): no task may declare these names
SUITE_SETTINGS = ("tasks", "data_dir", "restrict_vocab", "case_insensitive", "requested")


@dataclasses.dataclass(frozen=True)
class Panel:
    """One panel of the plot: ``label(score)`` is the line a score is drawn on, or None when the
    panel does not draw it. Panels are placed by ``order`` (the built-in ones 10-50), a score is
    drawn in the first of its task's panels that takes it."""

    title: str
    label: Callable[[Score], Optional[str]]
    order: float = 100.0
    log_scale: bool = False


class Repeated:
    """The ``type`` of a flag that may be given several times (``--pairs A=x --pairs B=y``):
    each value is read by ``parse``, the flag's value is the list of them."""

    def __init__(self, parse: Callable[[str], object]):
        self.parse = parse
        self.__name__ = getattr(parse, "__name__", "value")

    def __call__(self, text: str):
        return self.parse(text)


class EvaluationTask:
    """A kind of evaluation. Subclasses set the class attributes and ``plan``; see the module."""

    #: set by ``register_task``
    name: str = ""
    #: a few words, for the help group of its flags
    title: str = ""
    #: its settings (``SuiteConfig`` keywords, the JSON report's ``settings``); those with
    #: ``cli=True`` are also its command-line flags unless ``FLAGS`` says otherwise
    OPTIONS: Tuple[Option, ...] = ()
    #: its command-line declarations when they differ from the settings (a flag given several
    #: times, two flags for one setting): ``settings_from_flags`` turns them into settings
    FLAGS: Optional[Tuple[Option, ...]] = None
    #: metric -> (lowest, highest) value it can take; key None: every other metric of the task.
    #: A value outside is a failure, never a number in the report; NaN is always allowed.
    METRICS: Dict[Optional[str], Tuple[float, float]] = {}
    #: how its scores are drawn in the plot
    PANELS: Tuple[Panel, ...] = ()
    #: its files under the data root, as ``data/manifest.csv`` rows (a task in the package lists
    #: them in that file; a plugin here): ``semhuff-eval --check-data`` checks them too
    DATA: Tuple[ManifestEntry, ...] = ()

    def plan(self, settings: dict, root: Path) -> List[Tuple[str, Callable[[], Callable]]]:
        """(data set name, read) for each data set to evaluate; ``settings`` holds the value of
        each of ``OPTIONS`` (its default when not given), ``root`` is the data root."""
        raise NotImplementedError

    def flags(self) -> Tuple[Option, ...]:
        return self.FLAGS if self.FLAGS is not None else tuple(o for o in self.OPTIONS if o.cli)

    def settings_from_flags(self, given: dict) -> dict:
        """The settings the given flags (name -> value) stand for (by default the same)."""
        return dict(given)

    def requested(self, given: dict) -> set:
        """The data sets the given flags ask for by name: skipping one is an error (exit 1)."""
        return set()

    def notes(self, scores: List[Score]) -> List[str]:
        """Lines for the notes under the table, from this task's scores of every model."""
        return []

    def metric_range(self, metric: str) -> Optional[Tuple[float, float]]:
        return self.METRICS.get(metric, self.METRICS.get(None))


_SLACK = 1e-9  # float rounding of correlations


def out_of_range(score: Score) -> Optional[str]:
    """Why ``score`` is impossible for its metric (outside the range its task declares in
    ``METRICS``), or None when it is a possible value. NaN ("nothing to score") is allowed
    everywhere; anything else outside is a bug or bad input."""
    task = EVALUATION_TASKS.get(score.task)
    bounds = task.metric_range(score.metric) if task is not None else None
    value = score.value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if not math.isfinite(value):
        return f"{score.metric} = {value}"
    if bounds is not None and not bounds[0] - _SLACK <= value <= bounds[1] + _SLACK:
        return f"{score.metric} = {value:.6g} outside [{bounds[0]:g}, {bounds[1]:g}]"
    return None


def register_task(name: str):
    """Class decorator: make an :class:`EvaluationTask` subclass the task ``name``
    (``--tasks name``, ``SuiteConfig(tasks=(name,))``)."""
    def register(cls):
        if not (isinstance(cls, type) and issubclass(cls, EvaluationTask)):
            raise TypeError(f"register_task({name!r}) takes an EvaluationTask subclass, got {cls!r}")
        old = EVALUATION_TASKS.get(name)
        if old is not None and _origin(type(old)) != _origin(cls):  # the same module again: fine
            raise ValueError(f"evaluation task name {name!r} is taken by {_origin(type(old))}")
        task = cls()
        task.name = name
        taken = {o.name: other for other in EVALUATION_TASKS.values() if other.name != name
                 for o in (*other.OPTIONS, *other.flags())}
        for option in (*task.OPTIONS, *task.flags()):
            if option.name in SUITE_SETTINGS:
                raise ValueError(f"evaluation task {name!r}: option name {option.name!r} is the suite's")
            if option.name in taken:
                raise ValueError(f"evaluation task {name!r}: option {option.name!r} is declared by "
                                 f"the {taken[option.name].name} task")
        EVALUATION_TASKS[name] = task
        return cls
    return register


def _origin(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def task_names() -> Tuple[str, ...]:
    return tuple(EVALUATION_TASKS)


def get_task(name: str) -> "EvaluationTask":
    try:
        return EVALUATION_TASKS[name]
    except KeyError:
        raise OptionError(f"unknown evaluation task {name!r} (registered: "
                          f"{', '.join(EVALUATION_TASKS) or 'none'})") from None


def declared_options() -> Dict[str, Tuple[Option, "EvaluationTask"]]:
    """Every registered task's settings: name -> (declaration, task)."""
    return {o.name: (o, task) for task in EVALUATION_TASKS.values() for o in task.OPTIONS}


def unused_flags(given: Iterable[str], chosen: Sequence[str]) -> Optional[str]:
    """The one-line refusal of given flags (their option names) that no chosen task declares,
    each named with the task that takes it; None when every one is used."""
    owner = {o.name: (o, task) for task in EVALUATION_TASKS.values() for o in task.flags()}
    mine = {o.name for name in chosen for o in get_task(name).flags()}
    unused = [name for name in given if name not in mine]
    if not unused:
        return None
    where = [f"{owner[n][0].cli_flag} (the {owner[n][1].name} task's)" if n in owner else n for n in unused]
    takes = ", ".join(sorted(o.cli_flag for name in chosen for o in get_task(name).flags()))
    return (f"{', '.join(where)}: not used by --tasks {','.join(chosen) or 'none'} "
            f"(they take: {takes or 'no options'})")


def add_task_flags(group, task: "EvaluationTask") -> None:
    """``task``'s command-line flags, in the order declared: ``add_option_flags`` for each, a
    ``Repeated`` one as an appending flag."""
    for option in task.flags():
        if isinstance(option.type, Repeated):
            group.add_argument(option.cli_flag, dest=option.name, type=option.type.parse, action="append",
                               default=argparse.SUPPRESS, metavar=option.metavar, help=option.help)
        else:
            if isinstance(option.default, (tuple, list)):  # the help shows "a,b", not a tuple
                option = dataclasses.replace(option, default=",".join(map(str, option.default)) or None)
            add_option_flags(group, [option], {})


# ---------------------------------------------------------------- readers for flag values

def choice_list(allowed: Iterable[str]) -> Callable[[str], tuple]:
    """A comma-separated choice of ``allowed`` names, ``all`` or ``none``."""
    allowed = tuple(allowed)

    def parse(text: str) -> tuple:
        items = tuple(x.strip() for x in text.split(",") if x.strip())
        if items == ("all",):
            return allowed
        if items == ("none",):
            return ()
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{','.join(bad) or text!r} not among: {', '.join(allowed)}")
        return items
    parse.__name__ = "names"
    return parse


def non_negative_int(text: str) -> Optional[int]:
    """A count where 0 means "no limit" (None)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value or None


def named_value(text: str) -> Tuple[str, str]:
    """``NAME=VALUE``."""
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"expected NAME=PATH, got {text!r}")
    return name, value


def all_among(allowed) -> Callable[[Sequence[str]], Optional[str]]:
    """An ``Option.check``: every name in the value is one of ``allowed``."""
    def check(value) -> Optional[str]:
        bad = [x for x in value if x not in allowed]
        return f"has {', '.join(map(str, bad))}, not one of {', '.join(allowed)}" if bad else None
    return check
