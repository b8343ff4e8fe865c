"""Word vectors in and out of files: one format detector, one loader, one writer.

Formats: ``npz`` (a semhuff model, ``Word2Vec.save``; written as ``model``), ``kv`` (a gensim
pickle: ``KeyedVectors`` or a whole gensim model), word2vec ``binary`` and ``text`` (with or
without the ``count dims`` header line, as GloVe writes it; ``.gz`` / ``.bz2`` compressed too).

Reading tells the format by content: a zip (npz) or pickle signature, else raw floats after the
word2vec header (binary) or text; the extension only decides what the content cannot (a word2vec
header with nothing after it). A text file with the ``count dim`` header line is read as
strictly as gensim reads it: a count that disagrees with the rows, or a row that is
not a word and ``dim`` numbers, is a ``VectorsError`` naming the line. A file without the header
(GloVe) is read tolerantly: malformed lines and lines of another dimension than the first row's
(GloVe's own releases have a few: words with spaces) are skipped, counted in a ``LoadReport`` and
warned about with the first such line. Repeated words keep their first vector, as in gensim.
Fields are split at ASCII whitespace only, so a word holding a no-break space (fastText) stays
one word. gensim is imported only when a file is read or written.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

import numpy as np

from .errors import OptionError, VectorsError
from .io_utils import atomic_output, atomic_path, open_npz, pack_words, unpack_words  # noqa: F401

if TYPE_CHECKING:
    from gensim.models import KeyedVectors

logger = logging.getLogger(__name__)

#: what ``save_keyed_vectors`` / ``Word2Vec.save_vectors`` write: ``npz`` semhuff's full model,
#: ``kv`` gensim's KeyedVectors, ``gensim`` gensim's whole Word2Vec (``Word2Vec.load`` reads it)
FORMATS = ("npz", "kv", "gensim", "text", "binary")
_EXTENSIONS = {".npz": "npz", ".kv": "kv", ".txt": "text", ".vec": "text", ".bin": "binary"}
#: what ``read_vectors`` reads (``auto``: ``detect_format``; ``gensim`` is read as ``kv``: the
#: loader takes a whole gensim model's vectors)
READ_FORMATS = ("auto", "text", "binary", "kv", "gensim", "npz")
#: former names of formats, still read: ``model`` was ``npz``'s name for writing
FORMAT_ALIASES = {"model": "npz"}
_COMPRESSED = (".gz", ".bz2")


@dataclasses.dataclass
class LoadReport:
    """What the loader had to skip; all zero for a clean file."""

    source: str
    words: int = 0
    dimensions: int = 0
    malformed_lines: int = 0
    wrong_dimension_lines: int = 0
    duplicate_words: int = 0
    #: the first malformed or wrong-dimension line (0: none), for the warning
    first_skipped_line: int = 0

    @property
    def problems(self) -> int:
        return self.malformed_lines + self.wrong_dimension_lines + self.duplicate_words


# -- which format ----------------------------------------------------------------------------------

def resolve_format(path: str, fmt: str = "auto") -> str:
    """The output format for ``path``: ``fmt``, or with ``auto`` the one its extension names
    (``.txt.gz`` / ``.bin.bz2`` are compressed word2vec files). An extension that names none
    (``v.w2v``, no extension) is an error rather than a guess: the caller gives the format."""
    name = os.fspath(path)
    compressed = strip_compression(name.lower()) != name.lower()
    if fmt == "auto" and name == "-":
        raise OptionError("'-' (standard output) has no extension to tell the format by: name it "
                          "(--format text / fmt=), as for /dev/stdout")
    fmt = FORMAT_ALIASES.get(fmt, fmt)
    if fmt == "auto":
        ext = os.path.splitext(strip_compression(name.lower()))[1]
        if ext not in _EXTENSIONS:
            known = ", ".join(f"{e} ({f})" for e, f in _EXTENSIONS.items())
            raise OptionError(f"cannot tell the output format of {name!r} from its extension: "
                              f"use {known}, or name the format (--format / fmt=)")
        fmt = _EXTENSIONS[ext]
    if fmt not in FORMATS:
        raise OptionError(f"unknown output format {fmt!r} (choose from {', '.join(FORMATS)})")
    if compressed and fmt not in ("text", "binary"):
        raise OptionError(f"{name!r}: only the word2vec text and binary formats are written "
                          f"compressed (.gz / .bz2), not {fmt}")
    return fmt


def detect_format(path: str) -> str:
    """``npz``, ``kv``, ``binary`` or ``text``, from the file's first bytes (decompressed when
    the name ends in .gz / .bz2)."""
    from gensim import utils

    with utils.open(path, "rb") as fh:
        head = fh.readline(1024)
        body = fh.read(4096)
    if head.startswith((b"PK\x03\x04", b"\x93NUMPY")):
        return "npz"
    if head.startswith(b"\x80"):  # a pickle: gensim's native save format
        return "kv"
    if not body.strip():  # only a header line: nothing to tell binary from text
        return "binary" if strip_compression(path.lower()).endswith(".bin") else "text"
    fields = head.split()
    if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit() and int(fields[1]) > 0:
        # a word2vec header: look at the first entry itself, whatever the first word's length
        with utils.open(path, "rb") as fh:
            fh.readline()
            is_text = _first_entry_is_text(fh, int(fields[1]))
        if is_text is not None:
            return "text" if is_text else "binary"
    return "binary" if _looks_binary(body) else "text"


def _first_entry_is_text(fh, dim: int) -> Optional[bool]:
    """Whether the first entry after a word2vec header is a text line (the word, then ``dim``
    numbers, then a newline) rather than the word and ``dim`` raw float32 values; None when the
    file ends before that can be told. The word is skipped however long it is (a corpus can
    hold a megabyte "token"), so its text is never mistaken for the format."""
    rest = b""
    while True:
        block = fh.read(1 << 16)
        if not block:
            return None
        space = block.find(b" ")
        if space >= 0:
            rest = block[space + 1:]
            break
    limit = 64 * dim + 64  # far more than dim numbers written as text
    while b"\n" not in rest and len(rest) < limit:
        block = fh.read(1 << 16)
        if not block:
            break
        rest += block
    line = rest.split(b"\n", 1)[0].rstrip(b"\r")
    numbers = line.split()
    printable = all(32 <= b < 127 or b == 9 for b in line[:4096])
    if not (len(numbers) == dim or (len(numbers) >= 2 and printable)):
        return False  # raw float32 bytes (they almost never pass as two or more numbers)
    try:
        [float(x) for x in numbers]
    except ValueError:
        return False
    # numbers as text, even of another count than the header's: a text file, whose reader
    # names the line that disagrees (calling it "binary" only hid the real problem)
    return True


def _looks_binary(sample: bytes) -> bool:
    """Raw float32 rows rather than text: a NUL byte, or bytes that are not UTF-8 before the
    sample's last few (a multi-byte character cut at the end is still text)."""
    if b"\x00" in sample:
        return True
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(sample) - 4
    return False


def strip_compression(name: str) -> str:
    """``name`` without a trailing ``.gz`` / ``.bz2``."""
    for ext in _COMPRESSED:
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


# -- reading ---------------------------------------------------------------------------------------

def read_vectors(source, fmt: str = "auto") -> Tuple["KeyedVectors", LoadReport]:
    """Word vectors from ``source``: a path (``fmt`` one of ``READ_FORMATS``) or an object that
    holds them (a gensim ``KeyedVectors``, or a model with a ``.wv``). Raises ``VectorsError``."""
    if not isinstance(source, (str, os.PathLike)):
        label = type(source).__name__
        kv = _as_keyed_vectors(source, label)
        return kv, LoadReport(label, len(kv), kv.vector_size)
    path = os.fspath(source)
    if not os.path.isfile(path):
        raise VectorsError(f"vectors file not found: {path}")
    if os.path.getsize(path) == 0:
        raise VectorsError(f"vectors file is empty: {path}")
    fmt = detect_format(path) if fmt == "auto" else FORMAT_ALIASES.get(fmt, fmt)
    report = LoadReport(path)
    try:
        kv = _read_format(path, fmt, report)
    except VectorsError:
        raise
    except Exception as exc:  # noqa: BLE001 - any user file: one clear error, never a traceback
        raise VectorsError(f"cannot read {fmt} vectors from {path}: {type(exc).__name__}: {exc}") from exc
    kv = _as_keyed_vectors(kv, path)
    report.words, report.dimensions = len(kv), kv.vector_size
    if report.problems:
        first = (f" (the first malformed or wrong-dimension one: line {report.first_skipped_line})"
                 if report.first_skipped_line else "")
        logger.warning(
            "%s: skipped %d malformed, %d wrong-dimension and %d duplicate lines%s; loaded %d words",
            path, report.malformed_lines, report.wrong_dimension_lines, report.duplicate_words,
            first, report.words,
        )
    return kv, report


def load_vectors(source, fmt: str = "auto") -> "KeyedVectors":
    """Any vectors file (semhuff model, gensim KeyedVectors, word2vec text or binary; told apart
    by content) -> gensim ``KeyedVectors``."""
    return read_vectors(source, fmt)[0]


def _model_file_vectors(path: str):
    """The vectors of a semhuff model file (``Word2Vec.save``) as ``KeyedVectors``."""
    # open_npz: a forced --format npz on another file says what it is, not numpy's pickle advice
    with open_npz(path, "semhuff model file", VectorsError) as data:
        words, counts, syn0 = unpack_words(data["vocab_words"]), data["vocab_counts"], data["syn0"]
    return to_keyed_vectors(words, counts, syn0)


def _read_format(path: str, fmt: str, report: LoadReport):
    from gensim.models import KeyedVectors

    if fmt == "npz":
        return _model_file_vectors(path)
    if fmt in ("kv", "gensim"):
        return KeyedVectors.load(path)  # a whole gensim model loads too; its .wv is taken
    if fmt == "binary":
        return KeyedVectors.load_word2vec_format(path, binary=True, unicode_errors="replace")
    if fmt == "text":
        return _read_text(path, report)
    raise VectorsError(f"unknown vectors format {fmt!r} (use auto, text, binary, kv or npz)")


def _read_text(path: str, report: LoadReport):
    """word2vec text format with or without the ``count dim`` header (GloVe files have none);
    with the header strict, without it tolerant (the module's docstring says why)."""
    from gensim import utils
    from gensim.models import KeyedVectors

    words: list[str] = []
    rows: list[np.ndarray] = []
    seen: set[str] = set()
    dim: Optional[int] = None
    count: Optional[int] = None  # the header's word count
    entries = 0  # non-blank lines after the header
    first_extra = first_skipped = None  # line numbers, for the messages
    line_no = 0
    with utils.open(path, "rb") as fh:
        for line_no, raw in enumerate(fh, 1):
            parts = raw.split()  # bytes: ASCII whitespace only (a no-break space stays in a word)
            if not parts:
                continue
            if line_no == 1 and len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                count, dim = int(parts[0]), int(parts[1])
                continue
            entries += 1
            if count is not None and entries == count + 1:
                first_extra = line_no
            problem = None
            try:
                row = np.asarray(parts[1:], dtype=np.float32) if len(parts) > 1 else None
            except ValueError:
                row = None
            if row is None:
                problem = "malformed_lines"
            elif dim is None:
                dim = len(row)
            if row is not None and len(row) != dim:
                problem = "wrong_dimension_lines"
            if problem and count is not None:  # the header declared the shape: as gensim
                what = ("is not a word and numbers" if row is None else
                        f"has {len(row)} values, but the header (line 1) says {dim} dimensions")
                raise VectorsError(f"{path}: line {line_no} {what}")
            if problem:
                setattr(report, problem, getattr(report, problem) + 1)
                first_skipped = first_skipped or line_no
                continue
            word = parts[0].decode("utf-8", errors="replace")
            if word in seen:
                report.duplicate_words += 1
                continue
            seen.add(word)
            words.append(word)
            rows.append(row)
    if not rows:
        raise VectorsError(f"no usable vectors in {path}"
                           + (f" (its header says {count:,} words)" if count else ""))
    if count is not None and entries != count:
        where = (f"the first beyond the count is line {first_extra}" if entries > count
                 else f"the file ends at line {line_no}")
        raise VectorsError(f"{path}: the header (line 1) says {count:,} words but the file has "
                           f"{entries:,} vector lines ({where}): truncated or damaged? Fix the "
                           f"count, or delete line 1 to read it without a header")
    report.first_skipped_line = first_skipped or 0
    kv = KeyedVectors(vector_size=dim, dtype=np.float32)
    kv.add_vectors(words, np.vstack(rows))
    return kv


def _as_keyed_vectors(obj, label: str):
    """``obj`` itself, or its ``.wv`` (a whole Word2Vec model), when it holds some vectors."""
    from gensim.models import KeyedVectors

    kv = getattr(obj, "wv", obj)
    if not isinstance(kv, KeyedVectors):
        raise VectorsError(f"not word vectors: {label} holds a {type(obj).__name__}")
    if len(kv) == 0 or kv.vector_size == 0:
        raise VectorsError(f"no vectors in {label}")
    return kv


# -- writing ---------------------------------------------------------------------------------------

def to_keyed_vectors(words: Sequence[str], counts, vectors: np.ndarray, copy: bool = True):
    """A gensim ``KeyedVectors`` of ``words`` (in this order) with their ``count`` attribute and
    a float32 copy of ``vectors`` (with ``copy=False``: ``vectors`` itself, a float32 array, so
    the ``KeyedVectors`` sees every later update, as a gensim model's ``.wv`` does)."""
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vectors.shape[1], count=len(words), dtype=np.float32)
    kv.index_to_key = list(words)
    kv.key_to_index = {w: i for i, w in enumerate(kv.index_to_key)}
    kv.vectors = np.array(vectors, dtype=np.float32, copy=True) if copy else vectors
    kv.allocate_vecattrs(["count"], [np.int64])
    kv.expandos["count"][:] = counts
    return kv


def save_word2vec_binary(words: Sequence[str], vectors: np.ndarray, path: str) -> None:
    """The word2vec binary format byte for byte as gensim's ``save_word2vec_format(binary=True)``
    writes it (header, then each word, a space and its float32 row), without importing gensim:
    its import is most of a short run's start-up. ``.gz`` / ``.bz2`` names are compressed."""
    import bz2
    import gzip
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    name = strip_compression(os.fspath(path).lower())
    opener = {".gz": gzip.open, ".bz2": bz2.open}.get(os.fspath(path).lower()[len(name):], open)
    with atomic_path(path) as tmp, opener(tmp, "wb") as fh:
        fh.write(f"{len(words)} {vectors.shape[1]}\n".encode("utf8"))
        for word, row in zip(words, vectors):
            fh.write(f"{word} ".encode("utf8") + row.tobytes())


def save_keyed_vectors(kv, path: str, fmt: str) -> None:
    """gensim formats (``kv``, ``text``, ``binary``), written to a temp file and renamed into
    place."""
    if fmt == "kv":
        with atomic_output(path) as fh:
            kv.save(fh, separately=[])
    else:  # gensim compresses by the name's extension: the temp file keeps it
        name = os.fspath(path).lower()
        with atomic_path(path, suffix=name[len(strip_compression(name)):]) as tmp:
            kv.save_word2vec_format(tmp, binary=(fmt == "binary"))
