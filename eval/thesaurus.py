"""Synonym sets from a thesaurus, turned into the plain pairs list that :mod:`.synonyms` reads.

The SemHuff paper (§4.1) took its pairs from the synonym sets of a thesaurus whose size is at most
10 ("large synonym sets tend to be inconsistent"). Here a set's size is its full number of members
(multi-word members included); the pairs are all unordered pairs of its single-word members,
lowercased, each pair listed once however many sets it comes from.

Readers: Princeton WordNet ``data.{noun,verb,adj,adv}`` files (one set per synset, read by
``semhuff.wordnet_reader``) and MyThes ``th_*.dat`` files (one set per meaning line: the headword and its
plain synonyms; entries tagged ``(generic term)``, ``(related term)``, ``(similar term)`` or
``(antonym)`` are not synonyms).
"""
from __future__ import annotations

import itertools
import logging
import os
import re
from pathlib import Path
from typing import Iterable, Iterator, Optional

from ..wordnet_reader import synset_lemmas
from .datasets import require

logger = logging.getLogger(__name__)

DEFAULT_MAX_SET_SIZE = 10
_MYTHES_TAG = re.compile(r"\s*\((generic|related|similar) term\)$|\s*\(antonym\)$")


def wordnet_synsets(wordnet_dir: os.PathLike, pos: Iterable[str] = "nvar") -> Iterator[list[str]]:
    """Each synset's lemmas (``_`` turned into spaces, adjective markers dropped), in file order."""
    yield from synset_lemmas(require(wordnet_dir, "WordNet folder"), pos)


def mythes_synsets(dat_path: os.PathLike) -> Iterator[list[str]]:
    """Each MyThes meaning line as ``[headword, synonym, ...]``."""
    path = require(dat_path, "MyThes .dat file")
    with open(path, encoding="utf-8", errors="replace") as fh:
        fh.readline()  # encoding line
        for line in fh:
            head, _, count = line.rstrip("\n").rpartition("|")
            if not count.isdigit():
                continue
            for _ in range(int(count)):
                members = fh.readline().rstrip("\n").split("|")[1:]
                yield [head] + [m for m in members if m and not _MYTHES_TAG.search(m)]


def synonym_pairs(synsets: Iterable[list[str]], max_set_size: Optional[int] = DEFAULT_MAX_SET_SIZE
                  ) -> list[tuple[str, str]]:
    """Unordered pairs of single-word members of the sets of size <= ``max_set_size``."""
    seen: set[tuple[str, str]] = set()
    pairs = []
    for members in synsets:
        if max_set_size is not None and len(members) > max_set_size:
            continue
        words = list(dict.fromkeys(m.lower() for m in members if m and " " not in m))
        for a, b in itertools.combinations(words, 2):
            key = (a, b) if a < b else (b, a)
            if key not in seen:
                seen.add(key)
                pairs.append((a, b))
    return pairs


def write_pairs(handle, pairs: Iterable[tuple[str, str]], header: Iterable[str] = ()) -> int:
    """Write ``# header`` lines and ``a<TAB>b`` lines to a text handle; returns the pair count."""
    for line in header:
        handle.write(f"# {line}\n")
    n = 0
    for a, b in pairs:
        handle.write(f"{a}\t{b}\n")
        n += 1
    return n
