"""Where the evaluation data sets live, and the small line readers they share.

Data is never copied into the repository; ``semhuff.data_paths`` says where the data root is (its
``data_root`` and ``gensim_test_file`` are re-exported here). Copies that ship with gensim
(``gensim/test/test_data``) are preferred where they exist, so the core benchmarks work with no
data folder at all.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Callable, Iterator, Optional, TypeVar

from ..data_paths import ENV_VAR, check_size, data_root, gensim_test_file, where_looked
from ..errors import DatasetMissing

logger = logging.getLogger(__name__)

T = TypeVar("T")


def first_existing(*candidates: Optional[Path]) -> Optional[Path]:
    for path in candidates:
        if path is not None and path.exists():
            return path
    return None


def require(path: Optional[os.PathLike], what: str) -> Path:
    """``path`` as a Path, or :class:`DatasetMissing` naming ``what`` and where it was looked for.
    A manifest file of another size than listed is read, with a warning."""
    if path is None:
        raise DatasetMissing(f"{what}: no file given and no default found (set {ENV_VAR} or pass a path)")
    path = Path(path)
    if not path.exists():
        raise DatasetMissing(f"{what}: not found at {path}")
    warning = check_size(path)
    if warning:
        logger.warning(warning)
    return path


def data_hint() -> str:
    """Where the data folder was looked for and how to point to it (after a skipped data set)."""
    return where_looked()


# Word-pair similarity sets: name -> (gensim copy, file under <data>/wordsim)
SIMILARITY_FILES = {
    "ws353": ("wordsim353.tsv", "EN-WS-353-ALL.txt"),
    "ws353-sim": (None, "EN-WS-353-SIM.txt"),
    "ws353-rel": (None, "EN-WS-353-REL.txt"),
    "simlex999": ("simlex999.txt", "EN-SIMLEX-999.txt"),
    "rg65": (None, "EN-RG-65.txt"),
    "mc30": (None, "EN-MC-30.txt"),
    "mturk287": (None, "EN-MTurk-287.txt"),
}


def default_similarity_path(name: str, root: Optional[Path] = None) -> Optional[Path]:
    """gensim's copy when it ships one, else the file under the data root (which may be
    missing: the message then names the file it expected)."""
    gensim_name, shared_name = SIMILARITY_FILES[name]
    root = data_root() if root is None else root
    shared = root / "wordsim" / shared_name
    return first_existing(gensim_test_file(gensim_name) if gensim_name else None, shared) or shared


def default_analogy_path(root: Optional[Path] = None) -> Optional[Path]:
    root = data_root() if root is None else root
    shared = root / "analogy_google" / "questions-words.txt"
    return first_existing(gensim_test_file("questions-words.txt"), shared) or shared


def default_wordnet_dir(root: Optional[Path] = None) -> Path:
    return (data_root() if root is None else root) / "wordnet"


@dataclasses.dataclass
class Parsed:
    """Records parsed from a text file, with the count of lines that could not be parsed."""

    path: str
    records: list
    malformed_lines: int = 0


def parse_lines(path: os.PathLike, parse: Callable[[str], Optional[T]], what: str) -> Parsed:
    """Apply ``parse`` to each non-blank, non-``#`` line; ``parse`` returns None or raises
    ValueError for a malformed line, which is counted and skipped."""
    path = require(path, what)
    parsed = Parsed(str(path), [])
    for line_no, line in numbered_lines(path):
        try:
            record = parse(line)
        except ValueError:
            record = None
        if record is None:
            parsed.malformed_lines += 1
            logger.debug("%s:%d: malformed line skipped: %r", path, line_no, line)
        else:
            parsed.records.append(record)
    if parsed.malformed_lines:
        logger.warning("%s: %d malformed lines skipped", path, parsed.malformed_lines)
    if not parsed.records:
        raise DatasetMissing(f"{what}: no usable lines in {path}")
    return parsed


def numbered_lines(path: Path) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line_no, line in enumerate(fh, 1):
            line = line.strip()
            if line and not line.startswith("#"):
                yield line_no, line


def split_fields(line: str) -> list[str]:
    """Tab-separated fields when the line has tabs, else whitespace-separated."""
    return [f.strip() for f in line.split("\t")] if "\t" in line else line.split()
