"""Options declared once: an output layer or a tree builder lists the settings it takes as
``Option`` values, and everything that handles settings reads those declarations:

* ``Word2Vec(...)`` and the gensim adapter check the given settings against the chosen layer's
  (``check_layer_settings``): an option the layer does not take is an error naming it, never
  silently unused;
* ``semhuff-train`` makes its ``--flag`` for every declared option (``add_option_flags``), a
  plugin's too (plugins are imported before the parser is built), and refuses a given flag the
  chosen ``--loss`` does not use; ``--layer-option NAME=VALUE`` reaches any declared option;
* ``--init-model`` / ``--resume`` refuse any given layer option that differs from the saved
  layer's (a layer's options are part of the model: they are saved with it).
"""
from __future__ import annotations

import argparse
import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from .errors import OptionError


@dataclass(frozen=True)
class Option:
    """One setting of a layer or tree builder: ``name`` is the Python keyword (``Word2Vec``,
    ``layer.create``), ``flag`` the command-line spelling (default ``--`` + name with dashes)."""

    name: str
    type: Callable[[str], Any]
    default: Any = None
    help: str = ""
    choices: Optional[Tuple[Any, ...]] = None
    flag: Optional[str] = None
    metavar: Optional[str] = None
    check: Optional[Callable[[Any], Optional[str]]] = None  # an error phrase, or None if fine
    cli: bool = True  # False: a Python object (a report to fill, a callback), no flag

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    def validate(self, value):
        """``value`` if it is acceptable, else an ``OptionError`` naming the option."""
        if value is None:
            return value
        if self.choices is not None and value not in self.choices:
            raise OptionError(f"{self.name} must be one of {', '.join(map(str, self.choices))}, "
                              f"got {value!r}")
        problem = self.check(value) if self.check is not None else None
        if problem:
            raise OptionError(f"{self.name} {problem}, got {value!r}")
        return value

    def parse(self, text: str):
        """A command-line value (``--layer-option name=TEXT``) of this option's type."""
        try:
            return self.validate(self.type(text))
        except (TypeError, ValueError):
            raise OptionError(f"{self.cli_flag}: cannot read {text!r} as "
                              f"{getattr(self.type, '__name__', 'a value')}") from None


# option types (``Option.type``): a command-line spelling -> the value; named for the help
def boolean(text) -> bool:
    """``true``/``false`` (also 1/0, yes/no, on/off) as a bool; Python bools pass through."""
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


boolean.__name__ = "true/false"


def int_list(text) -> List[int]:
    """``"200,1000"`` (or a sequence of ints) as a list of ints."""
    if isinstance(text, str):
        return [int(part) for part in text.replace(" ", "").split(",") if part]
    return [int(x) for x in text]


int_list.__name__ = "comma-separated integers"


# checks for ``Option.check``: an error phrase, or None when the value is fine
def is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def integer(value) -> Optional[str]:
    return None if is_integer(value) else "must be an integer"


def positive_int(value) -> Optional[str]:
    return None if is_integer(value) and value >= 1 else "must be an integer >= 1"


def _number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def positive_number(value) -> Optional[str]:
    return None if _number(value) and value > 0 else "must be > 0"


def non_negative(value) -> Optional[str]:
    return None if _number(value) and value >= 0 else "must be >= 0"


def at_least_one(value) -> Optional[str]:
    return None if _number(value) and value >= 1 else "must be >= 1"


def share(value) -> Optional[str]:
    return None if _number(value) and 0 < value <= 1 else "must be in (0, 1]"


def by_name(options: Iterable[Option]) -> Dict[str, Option]:
    out: Dict[str, Option] = {}
    for option in options:
        out.setdefault(option.name, option)
    return out


def declared_by_owner(registry: Dict[str, Any], options_of: Callable[[Any], Iterable[Option]]
                      ) -> Dict[str, Tuple[Option, List[str]]]:
    """Every option of a registry's entries (output layers, LM layers, LM networks) by name:
    its declaration and the names of the entries taking it (for the CLIs' flags and help)."""
    out: Dict[str, Tuple[Option, List[str]]] = {}
    for name, entry in sorted(registry.items()):
        for option in options_of(entry):
            out.setdefault(option.name, (option, []))[1].append(name)
    return out


def check_settings(owner: str, declared: Sequence[Option], settings: Dict[str, Any],
                   error=OptionError) -> Dict[str, Any]:
    """``settings`` validated against ``declared``: an unknown name is an ``error`` that names
    it and lists what ``owner`` takes."""
    table = by_name(declared)
    unknown = sorted(set(settings) - set(table))
    if unknown:
        takes = ", ".join(sorted(table)) or "no options"
        raise error(f"{owner} does not use {', '.join(unknown)} (it takes: {takes})")
    return {name: table[name].validate(value) for name, value in settings.items()}


def add_option_flags(group, options: Iterable[Option], used_by: Dict[str, str],
                     selector: str = "--loss") -> None:
    """One argparse flag per option (``dest`` = its name, absent unless given: the caller then
    knows exactly which were given). ``used_by`` says which layers take it, for the help, as
    values of ``selector`` (semhuff-train's ``--loss``, semhuff-lm's ``--output``)."""
    for option in options:
        if not option.cli:
            continue
        default = "" if option.default is None else f" (default {option.default})" \
            if isinstance(option.default, bool) else f" (default {option.default:,})" \
            if isinstance(option.default, int) else f" (default {option.default:g})" \
            if isinstance(option.default, float) else f" (default {option.default})"
        layers = used_by.get(option.name)
        kwargs = dict(dest=option.name, default=argparse.SUPPRESS, metavar=option.metavar,
                      help=option.help + default + (f" [{selector} {layers}]" if layers else ""))
        if option.choices is not None:
            kwargs["choices"] = option.choices
        if option.type is not str:
            kwargs["type"] = option.type
        group.add_argument(option.cli_flag, **kwargs)


def refuse_unused_flags(given: Iterable[str], table: Dict[str, Tuple[Option, List[str]]],
                        declared: Sequence[Option], owner: str) -> None:
    """The option flags a command line gave (``given``: names in ``table``, a
    ``declared_by_owner`` table) that ``owner`` (``--loss hs``, ``--output tree``) does not
    declare: one ``OptionError`` naming those flags and the ones it takes."""
    takes = {o.name for o in declared}
    unused = [table[name][0].cli_flag for name in given if name not in takes]
    if unused:
        accepted = ", ".join(sorted(o.cli_flag for o in declared if o.cli)) or "no options"
        raise OptionError(f"{', '.join(unused)}: not used by {owner} (it takes: {accepted})")


def parse_assignments(pairs: Sequence[str], declared: Sequence[Option], owner: str) -> Dict[str, Any]:
    """``NAME=VALUE`` strings (``--layer-option``) as settings of ``declared`` options."""
    table = by_name(declared)
    out = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise OptionError(f"--layer-option needs NAME=VALUE, got {pair!r}")
        if name not in table:
            takes = ", ".join(sorted(o.name for o in table.values() if o.cli)) or "no options"
            raise OptionError(f"{owner} does not use {name} (it takes: {takes})")
        out[name] = table[name].parse(text)
    return out
