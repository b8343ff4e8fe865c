"""Compiled tokenising for corpus files: the vocabulary scan and the first epoch's ids without a
Python loop over tokens ("no Python on the data path").

It reads the same files as ``corpus.Corpus`` (plain, gzip, bz2, xz: Python's decompressors, in C)
in blocks and splits the bytes in Numba with exactly ``str.split()``'s whitespace: ASCII
whitespace, the separators 0x1C-0x1F, and the multi-byte Unicode spaces (U+0085, U+00A0, U+1680,
U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), lines ending at ``\\n`` only, a line
longer than ``max_sentence_length`` tokens cut into pieces as ``Corpus`` cuts it. Tokens are
counted / mapped to ids in an open-addressing hash table over their bytes, so the vocabulary,
its order (first seen first among equal counts), word2vec.c's ``max_vocab_size`` pruning (checked
after every piece, as ``vocab.scan_counts`` does) and the chunks of ids (same sentence pieces,
same chunk boundaries) are identical to the Python path's: training on either is bit-identical.

Only valid UTF-8 takes this path. Each block is validated first (a compiled state machine); a
file with an invalid byte is read by the Python path instead, which replaces and counts invalid
sequences (``Corpus``) — a byte-level table cannot merge differently broken tokens that decode
to the same replacement string. So does a token of more than ``corpus._MAX_TOKEN_CHARS`` bytes
(megabytes without whitespace, which ``Corpus`` cuts at block boundaries).
"""
from __future__ import annotations

import functools
import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, List, Optional, Tuple

import numpy as np

from .corpus import (BLOCK_BYTES, _MAX_TOKEN_CHARS, Corpus, _reject_binary, compression, is_url,
                     open_binary)
from .id_cache import Chunk
from .numba_cache import numba

logger = logging.getLogger(__name__)

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)


class NeedsPython(Exception):
    """This file must be read by the Python path (invalid UTF-8, or a giant token)."""

    def __init__(self, path: str, reason: str):
        super().__init__(f"{path}: {reason}")
        self.path = path


# -- bytes ---------------------------------------------------------------------------------------

@numba.njit(inline="always", nogil=True)
def _space_len(buf, i, n):
    """Bytes of the whitespace character at buf[i] (0: not whitespace): str.split()'s set.
    Printable ASCII returns first, in int64 (comparing uint8 with literals is 15x slower)."""
    b = np.int64(buf[i])
    if 32 < b < 0x80:
        return 0
    if b == 32 or 9 <= b <= 13 or 28 <= b <= 31:
        return 1
    if b < 0xC2:
        return 0
    if b == 0xC2:
        if i + 1 < n:
            b1 = np.int64(buf[i + 1])
            if b1 == 0x85 or b1 == 0xA0:
                return 2
        return 0
    if b < 0xE1 or b > 0xE3 or i + 2 >= n:
        return 0
    b1, b2 = np.int64(buf[i + 1]), np.int64(buf[i + 2])
    if b == 0xE1:
        return 3 if b1 == 0x9A and b2 == 0x80 else 0
    if b == 0xE3:
        return 3 if b1 == 0x80 and b2 == 0x80 else 0
    if b1 == 0x80 and (0x80 <= b2 <= 0x8A or b2 == 0xA8 or b2 == 0xA9 or b2 == 0xAF):
        return 3
    return 3 if b1 == 0x81 and b2 == 0x9F else 0


_HIGH_BITS = np.uint64(0x8080808080808080)


@numba.njit(cache=True, nogil=True)
def valid_utf8(buf, n):
    """Whether buf[:n] is valid UTF-8 (RFC 3629: no overlongs, no surrogates, <= U+10FFFF);
    a sequence cut by the end of the buffer counts as valid (the next block completes it).
    ASCII goes 8 bytes at a time (byte by byte the check took 0.07 s of the full corpus's 0.96 s
    scan; now 0.02 s)."""
    words = buf[:n - n % 8].view(np.uint64)
    i = 0
    while i < n:
        if i % 8 == 0:
            j = i // 8
            while j < words.shape[0] and words[j] & _HIGH_BITS == 0:
                j += 1
            if j * 8 > i:
                i = j * 8
                continue
        b = buf[i]
        if b < 0x80:
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            need, lo, hi = 1, 0x80, 0xBF
        elif b == 0xE0:
            need, lo, hi = 2, 0xA0, 0xBF
        elif 0xE1 <= b <= 0xEC or b == 0xEE or b == 0xEF:
            need, lo, hi = 2, 0x80, 0xBF
        elif b == 0xED:
            need, lo, hi = 2, 0x80, 0x9F
        elif b == 0xF0:
            need, lo, hi = 3, 0x90, 0xBF
        elif 0xF1 <= b <= 0xF3:
            need, lo, hi = 3, 0x80, 0xBF
        elif b == 0xF4:
            need, lo, hi = 3, 0x80, 0x8F
        else:
            return False
        for k in range(1, need + 1):
            if i + k >= n:
                return True
            c = buf[i + k]
            if k == 1:
                if c < lo or c > hi:
                    return False
            elif c < 0x80 or c > 0xBF:
                return False
        i += need + 1
    return True


# -- the hash table ------------------------------------------------------------------------------

@numba.njit(inline="always", nogil=True)
def _hash(buf, a, b):
    h = FNV_OFFSET
    for i in range(a, b):
        h = (h ^ np.uint64(buf[i])) * FNV_PRIME
    return h


@numba.njit(inline="always", nogil=True)
def _find(buf, a, b, h, slots, key_start, key_len, hashes, arena):
    """(slot, entry) for the token buf[a:b]; entry -1 when absent (slot: where it would go)."""
    mask = slots.shape[0] - 1
    s = np.int64(h & np.uint64(mask))
    length = b - a
    while True:
        e = slots[s]
        if e < 0:
            return s, -1
        if hashes[e] == h and key_len[e] == length:
            same = True
            k = key_start[e]
            for j in range(length):
                if arena[k + j] != buf[a + j]:
                    same = False
                    break
            if same:
                return s, e
        s = (s + 1) & mask


@numba.njit(inline="always", nogil=True)
def _insert(src, a, b, h, s, value, slots, key_start, key_len, hashes, values, arena, n, used):
    """Make src[a:b] (hash ``h``, free slot ``s`` from ``_find``) entry ``n`` with ``value``.
    (entries, arena bytes used) after it."""
    slots[s] = n
    key_start[n] = used
    key_len[n] = b - a
    hashes[n] = h
    values[n] = value
    arena[used:used + b - a] = src[a:b]
    return n + 1, used + b - a


class Table:
    """Token bytes -> entry (count or id), growing as needed; entries in first-seen order."""

    def __init__(self, capacity: int = 1 << 16):
        self.slots = np.full(capacity, -1, np.int64)
        self.key_start = np.zeros(capacity // 2, np.int64)
        self.key_len = np.zeros(capacity // 2, np.int32)
        self.hashes = np.zeros(capacity // 2, np.uint64)
        self.values = np.zeros(capacity // 2, np.int64)
        self.arena = np.zeros(capacity * 8, np.uint8)
        self.n = 0
        self.arena_used = 0

    def arrays(self):
        return (self.slots, self.key_start, self.key_len, self.hashes, self.values, self.arena)

    def grow(self, need_arena: int = 0) -> None:
        """Double the entries (and slots) if they are half full; make the arena hold
        ``need_arena`` more bytes."""
        if self.n >= self.key_start.shape[0] - 1:
            self._resize(self.key_start.shape[0] * 2)
        self._reserve_arena(need_arena)

    def reserve(self, entries: int, arena_bytes: int) -> None:
        """Room for ``entries`` more entries and ``arena_bytes`` more key bytes."""
        size = self.key_start.shape[0]
        while self.n + entries >= size - 1:
            size *= 2
        if size != self.key_start.shape[0]:
            self._resize(size)
        self._reserve_arena(arena_bytes)

    def _resize(self, size: int) -> None:
        for name in ("key_start", "key_len", "hashes", "values"):
            old = getattr(self, name)
            grown = np.zeros(size, old.dtype)
            grown[:self.n] = old[:self.n]
            setattr(self, name, grown)
        self.slots = _rehash(self.hashes, self.n, size * 2)

    def _reserve_arena(self, need: int) -> None:
        if self.arena_used + need > self.arena.shape[0]:
            grown = np.zeros(max(2 * self.arena.shape[0], self.arena_used + need), np.uint8)
            grown[:self.arena_used] = self.arena[:self.arena_used]
            self.arena = grown

    def merge(self, other: "Table") -> np.ndarray:
        """Add ``other``'s counts; its new words follow in its order. Returns the map from
        ``other``'s entries to this table's."""
        self.reserve(other.n, other.arena_used)
        remap, self.n, self.arena_used = _merge_into(
            *self.arrays(), self.n, self.arena_used, other.key_start, other.key_len,
            other.hashes, other.values, other.arena, other.n)
        return remap

    def keys(self) -> List[bytes]:
        raw = self.arena[:self.arena_used].tobytes()
        return [raw[s:s + n] for s, n in zip(self.key_start[:self.n].tolist(), self.key_len[:self.n].tolist())]

    @classmethod
    def of_words(cls, words) -> "Table":
        """A table whose value for word i (its UTF-8 bytes) is i."""
        table = cls(max(1 << 16, 1 << int(np.ceil(np.log2(4 * max(len(words), 1))))))
        encoded = [w.encode("utf-8") for w in words]
        table.grow(sum(map(len, encoded)))
        blob = np.frombuffer(b"".join(encoded), np.uint8)
        lengths = np.array([len(e) for e in encoded], np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        table.n, table.arena_used = _insert_all(blob, starts, lengths, *table.arrays())
        return table


@numba.njit(cache=True, nogil=True)
def _rehash(hashes, n, size):
    slots = np.full(size, -1, np.int64)
    mask = size - 1
    for e in range(n):
        s = np.int64(hashes[e] & np.uint64(mask))
        while slots[s] >= 0:
            s = (s + 1) & mask
        slots[s] = e
    return slots


@numba.njit(cache=True, nogil=True)
def _insert_all(blob, starts, lengths, slots, key_start, key_len, hashes, values, arena):
    n = 0
    used = 0
    for i in range(starts.shape[0]):
        a, b = starts[i], starts[i] + lengths[i]
        h = _hash(blob, a, b)
        s, e = _find(blob, a, b, h, slots, key_start, key_len, hashes, arena)
        if e >= 0:
            continue  # a duplicate word: the first id stands
        n, used = _insert(blob, a, b, h, s, i, slots, key_start, key_len, hashes, values, arena,
                          n, used)
    return n, used


@numba.njit(cache=True, nogil=True)
def _merge_into(slots, key_start, key_len, hashes, values, arena, n, used, start1, len1, hashes1,
                values1, arena1, n1):
    remap = np.empty(n1, np.int32)
    for e1 in range(n1):
        a, b, h = start1[e1], start1[e1] + len1[e1], hashes1[e1]
        s, e = _find(arena1, a, b, h, slots, key_start, key_len, hashes, arena)
        if e < 0:
            e = n
            n, used = _insert(arena1, a, b, h, s, 0, slots, key_start, key_len, hashes, values,
                              arena, n, used)
        values[e] += values1[e1]
        remap[e1] = e
    return remap, n, used


# -- the scanner -----------------------------------------------------------------------------------

COUNT, ENCODE, RECORD = 0, 1, 2
DONE, GROW, PRUNE, CHUNK, FULL = 0, 1, 2, 3, 4
GO = -1  # a piece ended and scanning goes on
PIECE_END = np.int32(-(1 << 31))  # RECORD: the sign bit marks the last token of a piece


@numba.njit(inline="always", nogil=True)
def _end_piece(mode, prune_at, n_entries, ids, bounds, nb, k, raw, chunk_words):
    """A piece ends: COUNT stops for pruning past ``prune_at`` entries; RECORD marks the piece's
    last token; ENCODE closes the piece in the chunk and stops when the chunk holds
    ``chunk_words`` raw tokens. (nb, status)"""
    if mode == COUNT:
        return nb, (PRUNE if prune_at > 0 and n_entries > prune_at else GO)
    if mode == RECORD:
        ids[k - 1] |= PIECE_END
        return nb, GO
    bounds[nb] = k
    return nb + 1, (CHUNK if raw >= chunk_words else GO)


@functools.lru_cache(maxsize=None)
def _scanner(mode: int):
    """One pass over buf[pos:n]: split into tokens (hashing each as it is read), end a piece at
    a newline or after ``limit`` tokens of a line, and per token either count it (``COUNT``,
    inserting new words; GROW when the table is full, PRUNE when a piece ends with more than
    ``prune_at`` entries), count it and record its entry in ``ids`` (``RECORD``, no pruning;
    FULL when ``ids`` is) or map it to its id (``ENCODE``: out-of-vocabulary tokens dropped,
    CHUNK when a piece ends with ``chunk_words`` raw tokens in the chunk: encode_chunks's rule).
    Returns (pos, pending, n_entries, arena_used, k, nb, raw, status); call again from pos."""
    MODE = int(mode)

    def scan(buf, pos, n, final, limit, pending, prune_at, chunk_words, slots, key_start,
             key_len, hashes, values, arena, n_entries, used, ids, bounds, k, nb, raw):
        i = pos
        while i < n:
            b = np.int64(buf[i])
            step = 0 if 32 < b < 0x80 else _space_len(buf, i, n)
            if step == 0:  # a token starts here
                if MODE == RECORD and k == ids.shape[0]:
                    return i, pending, n_entries, used, k, nb, raw, FULL
                a = i
                h = FNV_OFFSET
                while i < n:
                    c = np.int64(buf[i])
                    if not (32 < c < 0x80) and _space_len(buf, i, n):
                        break
                    h = (h ^ np.uint64(c)) * FNV_PRIME
                    i += 1
                s, e = _find(buf, a, i, h, slots, key_start, key_len, hashes, arena)
                if MODE != ENCODE:
                    if e < 0:
                        if n_entries >= key_start.shape[0] - 1 or used + (i - a) > arena.shape[0]:
                            return a, pending, n_entries, used, k, nb, raw, GROW
                        e = n_entries
                        n_entries, used = _insert(buf, a, i, h, s, 0, slots, key_start, key_len,
                                                  hashes, values, arena, n_entries, used)
                    values[e] += 1
                    if MODE == RECORD:
                        ids[k] = e
                        k += 1
                else:
                    if e >= 0:
                        ids[k] = values[e]
                        k += 1
                    raw += 1
                pending += 1
                if pending == limit:  # a piece cut from a long line
                    pending = 0
                    nb, status = _end_piece(MODE, prune_at, n_entries, ids, bounds, nb, k, raw,
                                            chunk_words)
                    if status != GO:
                        return i, pending, n_entries, used, k, nb, raw, status
                continue
            i += step
            if b == 10 and pending > 0:  # a line (piece) ends
                pending = 0
                nb, status = _end_piece(MODE, prune_at, n_entries, ids, bounds, nb, k, raw,
                                        chunk_words)
                if status != GO:
                    return i, pending, n_entries, used, k, nb, raw, status
        if final and pending > 0:  # the file's end ends its last line
            pending = 0
            nb, status = _end_piece(MODE, prune_at, n_entries, ids, bounds, nb, k, raw,
                                    chunk_words)
            if status != GO:
                return n, pending, n_entries, used, k, nb, raw, status
        return n, pending, n_entries, used, k, nb, raw, DONE

    return numba.njit(cache=True, nogil=True)(scan)


_NO_IDS = np.zeros(1, np.int32)
_NO_BOUNDS = np.zeros(1, np.int64)


def _blocks(path: str, block_bytes: int, span: Optional[Tuple[int, int]] = None
            ) -> Iterator[Tuple[np.ndarray, int, bool]]:
    """(buffer, bytes to tokenise, file ended) per block: whole tokens only, the tail carried
    into the next block; raises NeedsPython for invalid UTF-8 or a giant token. ``span``:
    only the bytes [start, end) of a plain file (both just after whitespace: whole tokens);
    its last block says "file ended" only at the file's end (else a line goes on)."""
    carry = b""
    first = span is None or span[0] == 0
    file_end = span is None or span[1] >= os.path.getsize(path)
    with open_binary(path) as fh:
        left = None
        if span is not None:
            fh.seek(span[0])
            left = span[1] - span[0]
        while True:
            raw = fh.read(block_bytes if left is None else min(block_bytes, left))
            if left is not None:
                left -= len(raw)
            if first:
                _reject_binary(path, raw)
                first = False
            final = not raw
            data = carry + raw
            buf = np.frombuffer(data, np.uint8)
            if not valid_utf8(buf, len(buf)) or (final and not _complete_utf8(data)):
                raise NeedsPython(path, "invalid UTF-8")
            if final:
                yield buf, len(buf), file_end
                return
            cut = max(data.rfind(b" "), data.rfind(b"\n"), data.rfind(b"\t"), data.rfind(b"\r"))
            carry = data[cut + 1:]
            if len(carry) > _MAX_TOKEN_CHARS:
                raise NeedsPython(path, f"a token of more than {_MAX_TOKEN_CHARS:,} bytes")
            yield buf, cut + 1, False


def _complete_utf8(data: bytes) -> bool:
    try:
        data[-4:].decode("utf-8") if len(data) >= 4 else data.decode("utf-8")
        return True
    except UnicodeDecodeError as exc:
        return exc.reason != "unexpected end of data"


class Recording:
    """Every token's table entry, kept by the vocabulary scan (``RECORD``) so that the first
    epoch maps entries to ids (``recorded_chunks``) instead of tokenising the text a second
    time: on two cores that second pass ran beside the training threads and made the first
    epoch about 13% slower than the later ones (3M-token prefix). 4 bytes a token (the sign
    bit marks a piece's last token), within ``limit`` tokens; past it recording stops (the
    first epoch then tokenises again, as before).

    Memory holds ``FIRST`` entries at most: a full buffer is appended to an unnamed temporary
    file (``id_cache``'s kind, in TMPDIR; gone with the process however it ends), read back in
    blocks by the first epoch. Kept in memory, the recording was 74 MB of a run's peak on the
    shared corpus (18.5M tokens), alive beside the weights until the first epoch ended (issue
    23). A file that cannot be written stops the recording."""

    FIRST = 1 << 20  # entries held in memory (4 MiB); the rest goes to the file

    def __init__(self, limit: int, most: Optional[int] = None):
        """``most``: an upper bound of the tokens, if known (a smaller buffer for less)."""
        self.limit = int(limit)
        self.ids = np.empty(max(1, min(self.limit, most or self.FIRST, self.FIRST)), np.int32)
        self.k = 0          # entries in the buffer
        self.spilled = 0    # entries in the file before them
        self._fh = None

    @property
    def active(self) -> bool:
        return self.ids is not None

    def __len__(self) -> int:
        return self.spilled + self.k

    def grow(self) -> None:
        """The buffer is full (``FULL``): empty it into the file, or stop past ``limit``."""
        if len(self) >= self.limit:
            logger.info("more than %d tokens: the first epoch tokenises the corpus again",
                        self.limit)
            self.stop()
            return
        self._spill()

    def _spill(self) -> None:
        from .id_cache import _open_unnamed, cache_dir
        try:
            if self._fh is None:
                self._fh = os.fdopen(_open_unnamed(cache_dir(None)), "w+b")
            self._fh.write(memoryview(self.ids[:self.k]).cast("B"))
            self._fh.flush()
        except OSError as exc:
            logger.info("the scan's recording cannot be written (%s): the first epoch "
                        "tokenises the corpus again", exc)
            self.stop()
            return
        self.spilled += self.k
        self.k = 0

    def stop(self) -> None:
        self.ids = None
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def finish(self) -> Optional["RecordedPart"]:
        """The recorded entries (None if recording stopped): in memory when they fit the
        buffer, else in the file."""
        if not self.active:
            return None
        if self._fh is None:
            return RecordedPart(self.ids[:self.k].copy(), None, self.k)
        if self.k:
            self._spill()
            if not self.active:
                return None
        part = RecordedPart(None, self._fh, self.spilled)
        self._fh, self.ids = None, None
        return part


class RecordedPart:
    """One part's recorded entries, in memory (``entries``) or in a file (``fh``), read in
    blocks by ``blocks``; ``cut`` (tokens of a line's rest, tokens carried into it, the piece
    length) and ``renumber`` (its table's entries -> the merged table's) are applied as they
    are read (``_scan_parts``), so any number of passes read the same."""

    # entries read at a time: 128k (0.5 MiB a block and its renumbered copy) rather than 1M,
    # which held 8 MiB more at the peak of a 146k-word run with no speed to show for it
    BLOCK = 1 << 17

    def __init__(self, entries: Optional[np.ndarray], fh, n: int):
        self.entries, self.fh, self.n = entries, fh, int(n)
        self.cut: Optional[Tuple[int, int, int]] = None
        self.renumber: Optional[np.ndarray] = None

    def __len__(self) -> int:
        return self.n

    def blocks(self) -> Iterator[np.ndarray]:
        """The entries in order, in blocks (the cuts marked; the table's own numbering)."""
        buf = None
        for start in range(0, self.n, self.BLOCK):
            size = min(self.BLOCK, self.n - start)
            if self.entries is not None:
                block = self.entries[start:start + size]
            else:
                if buf is None:
                    buf = np.empty(min(self.BLOCK, self.n), np.int32)
                block = buf[:size]
                got = os.preadv(self.fh.fileno(), [memoryview(block).cast("B")], 4 * start)
                if got != 4 * size:
                    raise OSError(f"the scan's recording file ended early ({got} bytes)")
            if self.cut is not None and start < self.cut[0]:  # idempotent: only sets bits
                n, carried, limit = self.cut
                _cut_line_rest(block, min(n - start, size), carried + start, limit)
            yield block


def count_file(path: str, table: Table, max_sentence_length: int, prune_at: int, state: dict,
               block_bytes: int = BLOCK_BYTES, progress=None,
               record: Optional[Recording] = None, span: Optional[Tuple[int, int]] = None) -> int:
    """Add ``path``'s token counts to ``table``; returns (its tokens, the tokens of the piece
    still open at its end: only a ``span`` that ends inside a line leaves one). ``state``
    carries the pruning threshold (``min_reduce``) across files, as ``vocab.scan_counts`` does;
    ``progress(tokens)`` is called after every block; ``record`` (no pruning) keeps every
    token's entry while it is active; ``span``: only these bytes of a plain file."""
    before = int(table.values[:table.n].sum())
    reported = before
    pending = 0
    for buf, n, final in _blocks(path, block_bytes, span):
        pos = 0
        while True:
            recording = record is not None and record.active
            ids, k = (record.ids, record.k) if recording else (_NO_IDS, 0)
            pos, pending, table.n, table.arena_used, k, _, _, status = _scanner(
                RECORD if recording else COUNT)(
                buf, pos, n, final, max_sentence_length, pending, prune_at, 0, *table.arrays(),
                table.n, table.arena_used, ids, _NO_BOUNDS, k, 0, 0)
            if recording:
                record.k = k
            if status == GROW:
                table.grow(n - pos)
            elif status == FULL:
                record.grow()
            elif status == PRUNE:
                dropped = _prune(table, state)
                before -= dropped
                reported -= dropped
            else:
                break
        if progress is not None:
            now = int(table.values[:table.n].sum())
            progress(now - reported)
            reported = now
    return int(table.values[:table.n].sum()) - before, pending


def _prune(table: Table, state: dict) -> int:
    """word2vec.c's ReduceVocab: drop the words seen <= min_reduce times (survivors keep their
    order), then raise min_reduce. Returns the tokens whose counts were dropped."""
    keep = table.values[:table.n] > state["min_reduce"]
    dropped = int(table.values[:table.n][~keep].sum())
    keys = [k for k, kept in zip(table.keys(), keep) if kept]
    counts = table.values[:table.n][keep].copy()
    logger.info("pruned vocabulary to %d words (counts <= %d dropped)", len(keys), state["min_reduce"])
    state["min_reduce"] += 1
    fresh = Table.of_words([k.decode("utf-8") for k in keys])
    fresh.values[:len(keys)] = counts
    table.__dict__.update(fresh.__dict__)
    return dropped


def scan(corpus: Corpus, max_vocab_size: Optional[int] = None, progress=None, workers: int = 1):
    """The vocabulary scan of a ``Corpus`` in compiled code: ``(Counter-like dict word ->
    count in first-seen order, total tokens, min_reduce)`` as ``vocab.scan_counts`` returns,
    or None when a file needs the Python path. ``workers`` >= 2: plain files split into that
    many parts (``_parts``), scanned in parallel and merged in order (the same result)."""
    if not _local_files(corpus):
        return None
    _RECORDED.clear()
    parts = None if max_vocab_size else _parts(corpus, workers)
    try:
        if parts is None:
            table, total, min_reduce, entries = _scan_in_order(corpus, max_vocab_size, progress)
        else:
            table, total, entries = _scan_parts(corpus, parts, progress)
            min_reduce = 1
    except NeedsPython as exc:
        logger.info("%s: read by the Python path", exc)
        _ELIGIBLE[_file_key(exc.path)] = False
        return None
    for path in corpus.files:
        _ELIGIBLE[_file_key(path)] = True
    counts = dict(zip((k.decode("utf-8") for k in table.keys()), table.values[:table.n].tolist()))
    if entries is not None:
        _RECORDED[_corpus_key(corpus)] = (entries, list(counts))
    return counts, total, min_reduce


def _scan_in_order(corpus: Corpus, max_vocab_size: Optional[int], progress):
    """One thread, file after file (word2vec.c's pruning needs the order). (table, tokens,
    min_reduce, recorded entries or None)"""
    table = Table()
    state = {"min_reduce": 1}
    # pruning renumbers the entries: nothing to record
    record = None if max_vocab_size else Recording(RECORD_TOKENS, _most_tokens(corpus))
    total = sum(count_file(path, table, corpus.max_sentence_length, max_vocab_size or 0, state,
                           corpus.block_bytes, progress, record)[0] for path in corpus.files)
    part = record.finish() if record is not None else None
    return table, total, state["min_reduce"], None if part is None else [part]


PARALLEL_MIN_BYTES = 4 << 20  # smaller corpora are scanned in one thread


def _parts(corpus: Corpus, workers: int):
    """``workers`` runs of (path, start, end) spans, in corpus order, of about equal bytes,
    split just after a whitespace byte (a line may go on into the next part: a corpus can be
    one long line); None when the corpus is not worth it or not splittable (compressed)."""
    files = list(corpus.files)
    if workers < 2 or any(compression(p) is not None for p in files):
        return None
    sizes = [os.path.getsize(p) for p in files]
    total = sum(sizes)
    if total < PARALLEL_MIN_BYTES:
        return None
    cuts = [(0, 0)]
    for i in range(1, workers):
        at, f = total * i // workers, 0
        while at >= sizes[f]:
            at -= sizes[f]
            f += 1
        cuts.append(max(cuts[-1], (f, _next_token_start(files[f], at, sizes[f]))))
    cuts.append((len(files) - 1, sizes[-1]))
    parts = []
    for (f0, o0), (f1, o1) in zip(cuts, cuts[1:]):
        spans = [(files[f], o0 if f == f0 else 0, o1 if f == f1 else sizes[f])
                 for f in range(f0, f1 + 1)]
        parts.append([s for s in spans if s[2] > s[1]])
    return [p for p in parts if p]


_CUT_AFTER = re.compile(rb"[ \t\r\n]")  # whitespace that ``_blocks`` also cuts blocks at
_NEWLINE = re.compile(rb"\n")


def _just_after(path: str, start: int, end: int, pattern) -> Optional[int]:
    """The position just after the first byte in [start, end) that ``pattern`` matches, or
    None."""
    with open(path, "rb") as fh:
        fh.seek(start)
        pos = start
        while pos < end:
            block = fh.read(min(1 << 16, end - pos))
            found = pattern.search(block)
            if found:
                return pos + found.start() + 1
            pos += len(block)
    return None


def _next_token_start(path: str, at: int, size: int) -> int:
    """The first position at or after byte ``at`` just after a whitespace byte (``size`` if
    none): a token starts there or later, and UTF-8 characters are whole on both sides."""
    if at == 0:
        return 0
    found = _just_after(path, at - 1, size, _CUT_AFTER)
    return size if found is None else found


def _line_goes_on(path: str, at: int) -> bool:
    """Whether byte ``at`` is inside a line (a part starting there begins with its rest)."""
    if at == 0:
        return False
    with open(path, "rb") as fh:
        fh.seek(at - 1)
        return fh.read(1) != b"\n"


NO_LIMIT = 1 << 62  # a line's rest scanned without cutting it: the cuts depend on what came before


def _scan_parts(corpus: Corpus, parts, progress):
    """Scan the parts in threads (the scanner releases the GIL), then merge their tables and
    recordings in corpus order. (table, tokens, recorded entries or None)

    A part that starts inside a line scans the line's rest (up to its first newline) without
    cutting it into ``max_sentence_length`` pieces: where those cuts fall depends on the tokens
    of the line in the parts before. Once the parts are scanned, in order, the open piece at
    each part's end is known and the rest's cuts are marked (``_cut_line_rest``)."""
    lock = threading.Lock()
    limit = corpus.max_sentence_length

    def report(tokens):
        with lock:
            progress(tokens)

    def count(path, span, table, record, piece_limit):
        return count_file(path, table, piece_limit, 0, {"min_reduce": 1}, corpus.block_bytes,
                          report if progress else None, record, span)

    def scan_part(spans):
        table = Table()
        record = Recording(RECORD_TOKENS // len(parts),
                           sum(_token_bound(b - a) for _, a, b in spans))
        tokens = 0
        rest = (0, False)  # (tokens of the line's rest, whether the line goes on past the part)
        open_piece = 0
        for i, (path, a, b) in enumerate(spans):
            if i == 0 and _line_goes_on(path, a):
                stop = _just_after(path, a, b, _NEWLINE)
                n, open_piece = count(path, (a, stop or b), table, record, NO_LIMIT)
                tokens += n
                rest = (n, stop is None and b < os.path.getsize(path))  # the line goes on
                a = stop or b
                if a >= b:
                    continue
            n, open_piece = count(path, (a, b), table, record, limit)
            tokens += n
        return table, tokens, record, rest, open_piece

    with ThreadPoolExecutor(len(parts), thread_name_prefix="semhuff-scan") as pool:
        results = list(pool.map(scan_part, parts))
    entries = [r[2].finish() for r in results]
    if any(part is None for part in entries):
        entries = None  # one part stopped recording: the first epoch tokenises
    carried = 0  # tokens of the piece open at the end of the parts so far
    for i, (_, _, _, (n, goes_on), open_piece) in enumerate(results):
        if entries is not None:
            entries[i].cut = (n, carried, limit)
        carried = (carried + n) % limit if goes_on else open_piece
    table, total, _, _, _ = results[0]
    for i, (other, tokens, _, _, _) in enumerate(results[1:], 1):
        remap = table.merge(other)
        total += tokens
        if entries is not None:
            entries[i].renumber = remap
    return table, total, entries


@numba.njit(cache=True, nogil=True)
def _cut_line_rest(entries, n, carried, limit):
    """Mark the ``max_sentence_length`` cuts in a line's first ``n`` tokens, ``carried``
    tokens of its current piece having come before them."""
    for j in range(n):
        if (carried + j + 1) % limit == 0:
            entries[j] |= PIECE_END


# -- ids (the first epoch) -------------------------------------------------------------------------

# The last scan's ``Recording`` (its entries, the scan's words in entry order), by corpus; the
# first epoch over the same, unchanged files takes it (once) instead of tokenising again.
_RECORDED = {}
RECORD_TOKENS = 1 << 26  # at most 256 MB of entries (in the temporary file): 67M tokens


def _token_bound(plain_bytes: int) -> int:
    """At most this many tokens in so many bytes of plain text: every token but the last ends
    at a whitespace byte."""
    return plain_bytes // 2 + 1


def _most_tokens(corpus: Corpus) -> Optional[int]:
    """At most this many tokens in ``corpus`` (None for compressed files: unknown)."""
    if any(compression(p) is not None for p in corpus.files):
        return None
    return sum(_token_bound(os.path.getsize(p)) for p in corpus.files)


def _corpus_key(corpus: Corpus):
    return tuple(_file_key(p) for p in corpus.files), corpus.max_sentence_length


def encode_chunks(corpus: Corpus, words: List[str], chunk_words: int,
                  take: bool = True) -> Iterator[Chunk]:
    """The chunks ``encode.encode_chunks(corpus, index, chunk_words)`` yields, in compiled
    code: from the vocabulary scan's recording of this corpus when there is one, else by
    tokenising. Every file must be ``eligible`` (valid UTF-8, no giant token). ``take=False``
    (a count before training) leaves the recording for the first epoch."""
    if not take:
        recorded = _RECORDED.get(_corpus_key(corpus))
    else:
        recorded = _RECORDED.pop(_corpus_key(corpus), None)
        _RECORDED.clear()  # one for other (or changed) files: never of use now
    if recorded is not None:
        return recorded_chunks(*recorded, words, chunk_words, corpus.max_sentence_length)
    return _tokenised_chunks(corpus, words, chunk_words)


def recorded_chunks(parts: List["RecordedPart"], scanned: List[str], words: List[str],
                    chunk_words: int, max_sentence_length: int) -> Iterator[Chunk]:
    """``encode_chunks``'s chunks from a scan's recorded entries (``parts``, in corpus order;
    its words ``scanned`` in entry order): each entry mapped to its word's id in ``words``, or
    dropped."""
    index = {w: i for i, w in enumerate(words)}
    remap = np.fromiter((index.get(w, -1) for w in scanned), np.int32, len(scanned))
    del index, scanned, words  # held by this generator until the epoch ends otherwise
    cap = chunk_words + max_sentence_length + 1
    ids, bounds = np.empty(cap, np.int32), np.empty(cap, np.int64)
    k = nb = raw = 0
    for part in parts:
        # a part's own entries -> the merged table's -> ids: one map
        part_remap = remap if part.renumber is None else remap[part.renumber]
        for entries in part.blocks():
            pos = 0
            while pos < entries.shape[0]:
                pos, k, nb, raw, full = _chunk_of_entries(entries, pos, part_remap, chunk_words,
                                                          ids, bounds, k, nb, raw)
                if full:
                    yield Chunk(ids[:k].copy(), bounds[:nb].copy(), raw)
                    k = nb = raw = 0
    if raw:
        yield Chunk(ids[:k].copy(), bounds[:nb].copy(), raw)


@numba.njit(cache=True, nogil=True)
def _chunk_of_entries(entries, pos, remap, chunk_words, ids, bounds, k, nb, raw):
    """From ``pos``, add pieces to the chunk (k ids, nb bounds, raw tokens so far) until a
    piece ends with ``chunk_words`` raw tokens in it (ENCODE's rule: then ``full``) or the
    entries end (a part may end inside a piece). (pos, k, nb, raw, full)"""
    while pos < entries.shape[0]:
        x = entries[pos]
        pos += 1
        raw += 1
        w = remap[x & 0x7FFFFFFF]
        if w >= 0:
            ids[k] = w
            k += 1
        if x < 0:
            bounds[nb] = k
            nb += 1
            if raw >= chunk_words:
                return pos, k, nb, raw, True
    return pos, k, nb, raw, False


def _tokenised_chunks(corpus: Corpus, words: List[str], chunk_words: int) -> Iterator[Chunk]:
    scan = _scanner(ENCODE)
    table = Table.of_words(words)
    cap = chunk_words + corpus.max_sentence_length + 1
    ids, bounds = np.empty(cap, np.int32), np.empty(cap, np.int64)
    k = nb = raw = 0
    for path in corpus.files:
        pending = 0
        for buf, n, final in _blocks(path, corpus.block_bytes):
            pos = 0
            while True:
                pos, pending, _, _, k, nb, raw, status = scan(
                    buf, pos, n, final, corpus.max_sentence_length, pending, 0, chunk_words,
                    *table.arrays(), table.n, table.arena_used, ids, bounds, k, nb, raw)
                if status != CHUNK:
                    break
                yield Chunk(ids[:k].copy(), bounds[:nb].copy(), raw)
                k = nb = raw = 0
    if raw:
        yield Chunk(ids[:k].copy(), bounds[:nb].copy(), raw)


# -- which files take this path --------------------------------------------------------------------

_ELIGIBLE = {}  # (path, size, mtime) -> bool


def _file_key(path: str):
    st = os.stat(path)
    return (os.path.abspath(path), st.st_size, st.st_mtime_ns)


def _local_files(corpus: Corpus) -> bool:
    """A plain ``Corpus`` of local files: subclasses (byte-range splits) and URLs read their
    own way, by the Python path."""
    return type(corpus) is Corpus and all(
        isinstance(p, (str, os.PathLike)) and not is_url(str(p)) for p in corpus.files)


def eligible(corpus: Corpus) -> bool:
    """Whether every file of ``corpus`` can be read here: known from an earlier scan, or checked
    now by one pass of UTF-8 validation (at decompression speed)."""
    if not _local_files(corpus):
        return False
    for path in corpus.files:
        key = _file_key(path)
        if key not in _ELIGIBLE:
            try:
                for _ in _blocks(path, corpus.block_bytes):
                    pass
                _ELIGIBLE[key] = True
            except NeedsPython as exc:
                logger.info("%s: read by the Python path", exc)
                _ELIGIBLE[key] = False
        if not _ELIGIBLE[key]:
            return False
    return True
