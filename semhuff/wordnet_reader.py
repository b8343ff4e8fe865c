"""The one reader of Princeton WordNet's dict files (format: wndb(5WN)), with two views:

* ``read_graph`` — WordNet as integers for path similarity: synsets, the chosen links between
  them, every (part of speech, lemma)'s senses from ``index.*`` and the ``*.exc`` exception
  lists that ``base_forms`` (NLTK's ``morphy``, first step) needs;
* ``synset_lemmas`` — each synset's member lemmas as text, for thesaurus synonym pairs.

Parsing the files directly takes about 1 s, against several seconds for NLTK's reader, which also
needs a ``lexnames`` file the Debian package lacks. Missing files raise ``DatasetMissing``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np

from .data_paths import data_path, where_looked
from .errors import DatasetMissing

# Part-of-speech letters of the thesaurus view, and the data / index file each one names.
POS_TAGS = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
POS_FILES = tuple(POS_TAGS.values())
# A pointer's target part of speech: "s" (adjective satellite) lives in the adjective files.
_POINTER_FILE = {**POS_TAGS, "s": "adj"}
# Syntactic markers of adjectives in data.adj: "(a)" attributive, "(p)" predicative, "(ip)" postnominal.
_ADJ_MARKER = re.compile(r"\((a|p|ip)\)$")
# NLTK's morphy detachment rules (WordNet's morphological processing).
_MORPHY_RULES = {
    "noun": (("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"), ("ches", "ch"),
             ("shes", "sh"), ("men", "man"), ("ies", "y")),
    "verb": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
             ("ing", "e"), ("ing", "")),
    "adj": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "adv": (),
}


def default_wordnet_dirs() -> List[str]:
    """Where WordNet's dict files are looked for: ``$SEMHUFF_WORDNET``, the project's shared
    data (``<data root>/wordnet``, see ``semhuff.data_paths``), Debian's wordnet-base."""
    dirs = [os.environ.get("SEMHUFF_WORDNET", ""), str(data_path("wordnet")), "/usr/share/wordnet"]
    return [d for d in dirs if d]


def find_wordnet(wordnet_dir: Optional[str] = None) -> str:
    """``wordnet_dir``, or the first default folder, holding all four ``data.*`` files."""
    for folder in [wordnet_dir] if wordnet_dir else default_wordnet_dirs():
        if all(os.path.isfile(os.path.join(folder, f"data.{pos}")) for pos in POS_FILES):
            return folder
    if wordnet_dir:
        raise DatasetMissing(f"WordNet dict files (data.noun ...) not found in {wordnet_dir}")
    where = ", ".join(default_wordnet_dirs())
    raise DatasetMissing(f"WordNet dict files (data.noun ...) not found in {where} "
                         f"({where_looked()}; or give --wordnet-dir DIR, or set "
                         f"SEMHUFF_WORDNET, to a WordNet dict folder)")


# -- the file format -------------------------------------------------------------------------------

def _records(path: os.PathLike) -> Iterator[List[str]]:
    """The fields of every line up to its gloss (``|``); the licence header is indented."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.startswith(" "):
                yield line.split(" | ", 1)[0].split()


def _lemma_fields(fields: List[str]) -> List[str]:
    # data line: offset lex_filenum ss_type w_cnt (hex) word lex_id [word lex_id ...] p_cnt ...
    return fields[4:4 + 2 * int(fields[3], 16):2]


def _pointer_fields(fields: List[str]) -> Iterator[List[str]]:
    """``[symbol, target offset, target pos letter]`` of each pointer of a data line."""
    at = 4 + 2 * int(fields[3], 16)  # skip the (word, lex_id) pairs
    for i in range(int(fields[at])):
        yield fields[at + 1 + 4 * i: at + 4 + 4 * i]


# -- view 1: the synset graph ----------------------------------------------------------------------

@dataclass
class WordNetGraph:
    """WordNet as integers: synsets ``0 .. n_synsets-1``, the selected links between them, and
    for every (part of speech, lemma) its synsets in WordNet's sense order (most frequent first)."""

    n_synsets: int
    link_src: np.ndarray
    link_dst: np.ndarray
    senses: Dict[Tuple[str, str], List[int]]
    exceptions: Dict[str, Dict[str, List[str]]]


def read_graph(wordnet_dir: Optional[str], links: Iterable[str]) -> WordNetGraph:
    """Synsets of all four parts of speech, the pointers whose symbol is in ``links``, the senses
    of every lemma (``index.*``) and the morphological exceptions (``*.exc``)."""
    folder = find_wordnet(wordnet_dir)
    links = frozenset(links)
    synset_id: Dict[Tuple[str, str], int] = {}
    pointers: List[Tuple[int, str, str]] = []
    for pos in POS_FILES:
        for fields in _records(os.path.join(folder, f"data.{pos}")):
            sid = len(synset_id)
            synset_id[(pos, fields[0])] = sid
            for symbol, offset, target_pos in _pointer_fields(fields):
                if symbol in links:
                    pointers.append((sid, _POINTER_FILE[target_pos], offset))
    senses: Dict[Tuple[str, str], List[int]] = {}
    exceptions: Dict[str, Dict[str, List[str]]] = {}
    for pos in POS_FILES:
        index_path = os.path.join(folder, f"index.{pos}")
        if not os.path.isfile(index_path):
            raise DatasetMissing(f"WordNet file missing: {index_path}")
        for fields in _records(index_path):
            n_senses = int(fields[2])
            # the synset offsets end the line, most frequent sense first
            ids = [synset_id.get((pos, off), -1) for off in fields[len(fields) - n_senses:]]
            senses[(pos, fields[0])] = [s for s in ids if s >= 0]
        exc_path = os.path.join(folder, f"{pos}.exc")
        table: Dict[str, List[str]] = {}
        if os.path.isfile(exc_path):
            for parts in _records(exc_path):
                if len(parts) >= 2:
                    table[parts[0]] = parts[1:]
        exceptions[pos] = table
    src = np.array([p[0] for p in pointers], dtype=np.int64)
    dst = np.array([synset_id.get((p[1], p[2]), -1) for p in pointers], dtype=np.int64)
    ok = dst >= 0
    return WordNetGraph(len(synset_id), src[ok], dst[ok], senses, exceptions)


def base_forms(word: str, pos: str, graph: WordNetGraph) -> List[str]:
    """WordNet lemmas of ``word`` as part of speech ``pos`` (NLTK's morphy, first step)."""
    if word in graph.exceptions[pos]:
        forms = [word] + graph.exceptions[pos][word]
    else:
        forms = [word] + [word[: -len(old)] + new for old, new in _MORPHY_RULES[pos]
                          if word.endswith(old) and len(word) > len(old)]
    found: List[str] = []
    for form in forms:
        if (pos, form) in graph.senses and form not in found:
            found.append(form)
    return found


# -- view 2: member lemmas of each synset ----------------------------------------------------------

def synset_lemmas(folder: os.PathLike, pos: Iterable[str] = "nvar") -> Iterator[List[str]]:
    """Each synset's lemmas (``_`` turned into spaces, adjective markers dropped), in file order,
    for the parts of speech ``pos`` (letters of ``POS_TAGS``) in the order given."""
    for tag in pos:
        if tag not in POS_TAGS:
            raise ValueError(f"unknown WordNet part of speech {tag!r}; use some of {''.join(POS_TAGS)}")
        path = Path(folder) / f"data.{POS_TAGS[tag]}"
        if not path.is_file():
            raise DatasetMissing(f"WordNet data file not found: {path}")
        for fields in _records(path):
            yield [_ADJ_MARKER.sub("", w).replace("_", " ") for w in _lemma_fields(fields)]
