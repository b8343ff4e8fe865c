"""Where data lives. One place answers it for the library, the CLIs, the tests and the benchmarks.

Data sets are never copied into the repository (its ``data/`` folder holds only the manifest and
the README that says all of this). The data root is found the same way for an editable install,
``pip install .`` or a checkout on ``PYTHONPATH`` (a non-editable install used to look in
``<venv>/lib/python3.X/shared/data``):

1. ``$SEMHUFF_DATA`` when set: the only place looked at, used even if it does not exist (an
   explicit choice is never second-guessed; the messages then say it is missing);
2. ``shared/data`` in the current directory or the nearest of its parents (the project's layout:
   a checkout beside ``shared/``, commands run from inside it);
3. ``<checkout>/../shared/data`` when semhuff itself runs from a checkout (not site-packages);
4. the user's data folder, ``$XDG_DATA_HOME/semhuff`` (default ``~/.local/share/semhuff``).

A folder counts only when it holds at least one of the manifest's folders (``wordsim/``,
``wordnet/`` ...), so an unrelated ``shared/data`` is passed over. When none does,
``data_root()`` is the user's data folder (where the README says to put or link the data), and
every "not found" message says where it looked and how to point semhuff at the data.

The manifest (``data/manifest.csv``: each file's path under the root, task, data set, size,
sha256, source, licence and download URL) ships inside the package as ``semhuff._data``;
``check_data`` verifies a data folder against it (``semhuff-eval --check-data``) and
``semhuff.data_fetch`` fills one from the URLs (``semhuff-data fetch``).
Small files that ship with gensim (``gensim/test/test_data``) are found by ``gensim_test_file``.
"""
from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import importlib.resources
import logging
import os
from pathlib import Path
from typing import Iterator, List, Optional, Tuple

ENV_VAR = "SEMHUFF_DATA"
_REPO = Path(__file__).resolve().parents[1]
_CHECKOUT_MANIFEST = _REPO / "data" / "manifest.csv"
logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class ManifestEntry:
    """One file of the data folder, as ``data/manifest.csv`` lists it."""

    path: str       # relative to the data root, '/'-separated
    task: str       # similarity, analogy, synonyms, pos, training
    dataset: str    # the name the evaluation uses (ws353, google, conll2000 ...)
    bytes: int
    sha256: str
    source: str
    licence: str
    # where ``semhuff-data fetch`` downloads it: URLs tried in turn (mirrors), each ``URL`` or
    # ``URL#MEMBER`` for a file inside an archive (a .deb, .zip, .tar.*); empty: no single file
    # to download (the training corpus, assembled from many sources)
    url: str = ""


def _manifest_file() -> Path:
    try:  # installed: the repository's data/ folder is the package semhuff._data
        return Path(str(importlib.resources.files(f"{__package__}._data") / "manifest.csv"))
    except ImportError:  # a checkout used in place (an editable install made before data/)
        return _CHECKOUT_MANIFEST


@functools.lru_cache(maxsize=1)
def manifest() -> Tuple[ManifestEntry, ...]:
    """Every file of the manifest (empty, with a warning, if the manifest cannot be read)."""
    path = _manifest_file()
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return tuple(ManifestEntry(**{**row, "bytes": int(row["bytes"])})
                         for row in csv.DictReader(fh))
    except (OSError, ValueError, TypeError) as exc:
        logger.warning("cannot read the data manifest %s: %s", path, exc)
        return ()


def manifest_entry(relative: str) -> Optional[ManifestEntry]:
    """The manifest's entry for a path under the data root (``wordsim/EN-RG-65.txt``)."""
    relative = relative.replace(os.sep, "/")
    return next((e for e in manifest() if e.path == relative), None)


def _top_folders() -> set:
    return {e.path.split("/", 1)[0] for e in manifest()} or {"wordsim", "wordnet", "corpus"}


def user_data_dir() -> Path:
    """``$XDG_DATA_HOME/semhuff``, default ``~/.local/share/semhuff``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "semhuff"


def _is_checkout(folder: Path) -> bool:
    return (folder / "setup.cfg").is_file() and (folder / "semhuff" / "data_paths.py").is_file()


def candidate_roots() -> List[Tuple[Path, str]]:
    """(folder, why it is looked at) in the order searched; ``$SEMHUFF_DATA`` alone when set."""
    env = os.environ.get(ENV_VAR)
    if env:
        return [(Path(env), f"${ENV_VAR}")]
    cwd = Path.cwd()
    found = [(folder / "shared" / "data", "the current directory or a parent")
             for folder in (cwd, *cwd.parents)]
    if _is_checkout(_REPO):
        found.append(((_REPO / ".." / "shared" / "data").resolve(), "beside the checkout"))
    found.append((user_data_dir(), "the user data folder"))
    seen, out = set(), []
    for folder, why in found:
        if folder not in seen:
            seen.add(folder)
            out.append((folder, why))
    return out


def holds_data(folder: Path) -> bool:
    """Whether ``folder`` holds at least one of the manifest's folders."""
    return folder.is_dir() and any((folder / name).exists() for name in _top_folders())


def find_data_root() -> Optional[Path]:
    """The data root the search order gives, or None when no folder holds data."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return next((folder for folder, _ in candidate_roots() if holds_data(folder)), None)


def data_root() -> Path:
    """The data root (see the module's docstring); the user data folder when none is found,
    which may not exist: every reader checks its own files."""
    return find_data_root() or user_data_dir()


def where_looked() -> str:
    """One sentence: which data root is used or where it was looked for, and how to point
    semhuff at the data (every "data not found" message ends with it)."""
    env = os.environ.get(ENV_VAR)
    folders = "/".join(sorted(_top_folders()))
    how = (f"set {ENV_VAR} (semhuff-eval: or --data-dir) to the folder holding {folders}; "
           f"see data/README.md")
    if env:
        state = "" if Path(env).is_dir() else ", which does not exist"
        return f"data folder from ${ENV_VAR}={env}{state}; {how}"
    root = find_data_root()
    if root is not None:
        return f"data folder {root} (found by the search); {how}"
    cwd = Path.cwd()
    places = [f"shared/data in {cwd} and its parents"]
    places += [str(folder) for folder, why in candidate_roots()
               if why != "the current directory or a parent"]
    return f"no data folder found (looked for {', '.join(places)}); {how}"


def data_path(*parts: str) -> Path:
    """A path under the data root (not checked for existence)."""
    return data_root().joinpath(*parts)


def shared_corpus() -> Path:
    """The project's default training corpus (``corpus/corpus.txt.gz`` under the data root)."""
    return data_path("corpus", "corpus.txt.gz")


def gensim_test_file(name: str) -> Optional[Path]:
    """A file of gensim's bundled test data (``lee_background.cor``, ``wordsim353.tsv`` ...)."""
    from gensim.test.utils import datapath
    path = Path(datapath(name))
    return path if path.is_file() else None


def missing_message(path: os.PathLike, what: str) -> str:
    """The one sentence every skip / error about absent data uses."""
    return f"{what} not found at {path} ({where_looked()})"


# -- checking a data folder against the manifest ---------------------------------------------------

@dataclasses.dataclass
class FileCheck:
    entry: ManifestEntry
    path: Path
    status: str  # ok, missing, size differs, sha256 differs

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def sha256_of(path: os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_data(root: Optional[Path] = None, checksums: bool = True) -> Iterator[FileCheck]:
    """Each manifest file under ``root`` (default: the data root): there, of the listed size,
    and (``checksums``) with the listed sha256. A differing file gives other numbers than the
    project's published ones."""
    root = data_root() if root is None else Path(root)
    for entry in manifest():
        yield check_entry(root, entry, checksums)


def check_entry(root: Path, entry: ManifestEntry, checksums: bool = True) -> FileCheck:
    """One manifest row (data/manifest.csv's, or a plugin task's ``DATA``) checked under ``root``."""
    path = Path(root) / entry.path
    if not path.is_file():
        status = "missing"
    elif path.stat().st_size != entry.bytes:
        status = "size differs"
    elif checksums and sha256_of(path) != entry.sha256:
        status = "sha256 differs"
    else:
        status = "ok"
    return FileCheck(entry, path, status)


def check_size(path: os.PathLike, root: Optional[Path] = None) -> Optional[str]:
    """A warning when ``path``, a manifest file under the data root, has another size than the
    manifest lists (a cheap check made on every read; the sha256 is ``check_data``'s)."""
    root = data_root() if root is None else Path(root)
    try:
        relative = Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None  # not under the data root: the user's own file
    entry = manifest_entry(relative)
    if entry is None or not Path(path).is_file() or Path(path).stat().st_size == entry.bytes:
        return None
    return (f"{path} is not the file the manifest lists ({Path(path).stat().st_size:,} bytes, "
            f"expected {entry.bytes:,}): scores are not comparable with the project's")
