"""Sparse word-similarity knowledge for SemHuff: each word keeps its ``top_k`` most similar words.

Three sources, all returning a symmetric ``scipy.sparse.csr_matrix`` of shape ``(V, V)`` over
vocabulary ids with non-negative weights and an empty diagonal:

* ``wordnet_similarity`` — WordNet path similarity ``1 / (1 + hops)`` between the senses of two
  words, searched breadth-first over hypernym / hyponym (incl. instance), similar-to and
  verb-group links up to ``max_hops`` (default 2); a tier is only searched when the nearer ones
  gave fewer than ``top_k`` words, and ties inside the last tier prefer words linked by more sense
  pairs, then more frequent words. Inflected vocabulary words reach their lemmas through WordNet's
  exception lists and detachment rules (NLTK's ``morphy``). The ``data.*`` files are parsed
  directly: about 1 s, against several seconds for NLTK's reader, which also needs a
  ``lexnames`` file the Debian package lacks.
* ``pairs_file_similarity`` — a user file; each line is either ``word word weight`` (a weighted
  pair: exactly three fields, the last a number) or a synonym set of two or more words (every pair
  gets weight 1). Fields are separated by white space or commas, ``#`` starts a comment.
* ``embedding_similarity`` — top-k cosine neighbours in an existing embedding (gensim
  ``KeyedVectors``, word2vec text or binary format, or an in-memory ``(words, vectors)`` pair);
  negative cosines are dropped. This is the bootstrapping route: train on Huffman, rebuild.

Every source keeps each word's top-k row first and then symmetrises with the element-wise maximum
(``S = max(T, T.T)``), so a word can end up with more than k neighbours but never loses one.
Bad input (unknown words, self-pairs, negative / NaN / infinite weights, malformed lines) is
counted in a ``SimilarityReport``, logged, and skipped; it never raises. Words without any edge
simply have an empty row; the tree builder still places them.
"""
from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numba
import numpy as np
import scipy.sparse as sp

from ..data import data_path
from ..errors import SimilarityError

logger = logging.getLogger(__name__)

DEFAULT_TOP_K = 30
DEFAULT_WORDNET_HOPS = 2
WORDNET_SOURCE = "wordnet"
# Synset links that mean "is a kind of / is like": hypernym, instance hypernym, their inverses,
# similar-to (adjective clusters) and verb group. Antonyms, meronyms and derivations are left out.
WORDNET_LINKS = frozenset({"@", "@i", "~", "~i", "&", "$"})
_WORDNET_POS = ("noun", "verb", "adj", "adv")
_POINTER_FILE = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}
# NLTK's morphy detachment rules (WordNet's morphological processing).
_MORPHY_RULES = {
    "noun": (("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"), ("ches", "ch"),
             ("shes", "sh"), ("men", "man"), ("ies", "y")),
    "verb": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
             ("ing", "e"), ("ing", "")),
    "adj": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "adv": (),
}
_VECTOR_SUFFIXES = (".kv", ".model", ".bin", ".vec", ".w2v")
_FIELD_SPLIT = re.compile(r"[\s,]+")
_EMBEDDING_BLOCK_ROWS = 1024


@dataclass
class SimilarityReport:
    """What loading a similarity source saw and skipped; filled in by the loaders."""

    source: str = ""
    n_words: int = 0
    items_read: int = 0          # pairs, synonym sets or neighbour lists looked at
    unknown_words: int = 0       # words not in the vocabulary (each occurrence)
    self_pairs: int = 0
    bad_weights: int = 0         # negative, NaN or infinite
    malformed_lines: int = 0
    examples: List[str] = field(default_factory=list)
    edges: int = 0               # undirected edges in the final matrix
    words_with_edges: int = 0

    def note(self, kind: str, text: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.examples) < 5:
            self.examples.append(text)

    def summary(self) -> str:
        skipped = (f"skipped: {self.unknown_words} unknown words, {self.self_pairs} self-pairs, "
                   f"{self.bad_weights} bad weights, {self.malformed_lines} malformed lines")
        covered = 100.0 * self.words_with_edges / max(self.n_words, 1)
        return (f"{self.source}: {self.edges} edges, {self.words_with_edges}/{self.n_words} words "
                f"({covered:.1f}%) have a neighbour; {self.items_read} items read; {skipped}")


def _word_index(vocab) -> Tuple[Sequence[str], Dict[str, int]]:
    """Words and word -> id of a ``Vocab`` or of a plain word list (ids = positions)."""
    if hasattr(vocab, "words"):
        return vocab.words, vocab.index
    words = list(vocab)
    return words, {w: i for i, w in enumerate(words)}


# -- shared: top-k per row, symmetrise -------------------------------------------------------------

@numba.njit(cache=True, nogil=True)
def _top_k_rows(indptr, indices, data, k):
    # Keep the k largest entries of every CSR row (ties: the lower column id, i.e. the more
    # frequent word); rows are independent, so one argsort per row.
    n = indptr.shape[0] - 1
    keep = np.zeros(data.shape[0], dtype=np.bool_)
    for r in range(n):
        lo, hi = indptr[r], indptr[r + 1]
        if hi - lo <= k:
            keep[lo:hi] = True
            continue
        cols = indices[lo:hi]
        # mergesort is stable, so sorting by column first makes ties prefer low ids
        by_col = np.argsort(cols, kind="mergesort")
        order = by_col[np.argsort(-data[lo:hi][by_col], kind="mergesort")]
        keep[lo + order[:k]] = True
    return keep


def top_k_symmetric(matrix, top_k: int) -> sp.csr_matrix:
    """Keep each row's ``top_k`` largest entries, then symmetrise with the element-wise maximum.
    Duplicate entries are merged by maximum first; the diagonal and zeros are dropped."""
    coo = sp.coo_matrix(matrix)
    n = coo.shape[0]
    off_diagonal = (coo.row != coo.col) & (coo.data > 0)
    rows, cols, vals = coo.row[off_diagonal], coo.col[off_diagonal], coo.data[off_diagonal]
    # Merge duplicates by maximum: sort by (row, col, -value) and keep the first of each run.
    order = np.lexsort((-vals, cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    first = np.ones(rows.shape[0], dtype=bool)
    first[1:] = (rows[1:] != rows[:-1]) | (cols[1:] != cols[:-1])
    csr = sp.csr_matrix((vals[first].astype(np.float64), (rows[first], cols[first])), shape=(n, n))
    csr.sort_indices()
    if top_k is not None and top_k > 0:
        keep = _top_k_rows(csr.indptr, csr.indices, csr.data, int(top_k))
        csr.data[~keep] = 0.0
        csr.eliminate_zeros()
    return csr.maximum(csr.T).tocsr()


def _finish(matrix: sp.csr_matrix, report: SimilarityReport) -> sp.csr_matrix:
    matrix.sort_indices()
    report.n_words = matrix.shape[0]
    report.edges = int(matrix.nnz // 2)
    report.words_with_edges = int(np.count_nonzero(np.diff(matrix.indptr)))
    bad = report.unknown_words + report.self_pairs + report.bad_weights + report.malformed_lines
    (logger.warning if bad else logger.info)("similarity %s", report.summary())
    if report.examples and bad:
        logger.warning("first skipped items: %s", "; ".join(report.examples))
    return matrix


def similarity_from_pairs(rows, cols, weights, n_words: int, top_k: int = DEFAULT_TOP_K,
                          report: Optional[SimilarityReport] = None) -> sp.csr_matrix:
    """Sparse similarity from undirected weighted pairs of vocabulary ids (duplicates: maximum).
    Self-pairs and negative / NaN / infinite weights are counted and dropped."""
    report = report if report is not None else SimilarityReport(source="pairs")
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    if rows.size and (min(rows.min(), cols.min()) < 0 or max(rows.max(), cols.max()) >= n_words):
        raise SimilarityError("similarity pair ids out of the vocabulary range")
    finite = np.isfinite(weights) & (weights >= 0)
    report.bad_weights += int(np.count_nonzero(~finite))
    self_pair = rows == cols
    report.self_pairs += int(np.count_nonzero(self_pair & finite))
    ok = finite & ~self_pair
    rows, cols, weights = rows[ok], cols[ok], weights[ok]
    both = sp.coo_matrix((np.concatenate([weights, weights]),
                          (np.concatenate([rows, cols]), np.concatenate([cols, rows]))),
                         shape=(n_words, n_words))
    return _finish(top_k_symmetric(both, top_k), report)


# -- (b) a user file of pairs or synonym sets ------------------------------------------------------

def _as_weight(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


def pairs_file_similarity(path: str, vocab, top_k: int = DEFAULT_TOP_K,
                          report: Optional[SimilarityReport] = None) -> sp.csr_matrix:
    """Similarity from a file of weighted pairs (``a b 0.7``) or synonym sets (``a b c``)."""
    words, index = _word_index(vocab)
    report = report if report is not None else SimilarityReport()
    report.source = f"pairs file {path}"
    rows: List[int] = []
    cols: List[int] = []
    weights: List[float] = []
    try:
        fh = open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SimilarityError(f"cannot read similarity file {path}: {exc.strerror or exc}") from None
    with fh:
        for line_no, line in enumerate(fh, 1):
            fields = [f for f in _FIELD_SPLIT.split(line.split("#", 1)[0].strip()) if f]
            if not fields:
                continue
            report.items_read += 1
            weight = _as_weight(fields[-1]) if len(fields) == 3 else None
            members = fields[:2] if weight is not None else fields
            if len(members) < 2 or any(_as_weight(f) is not None for f in members):
                report.note("malformed_lines", f"line {line_no}: {line.strip()[:60]!r}")
                continue
            if weight is None:
                weight = 1.0
            if not (math.isfinite(weight) and weight >= 0):
                report.note("bad_weights", f"line {line_no}: weight {fields[-1]}")
                continue
            ids = []
            for word in members:
                if word in index:
                    ids.append(index[word])
                else:
                    report.note("unknown_words", f"line {line_no}: {word!r} not in vocabulary")
            if len(members) == 2 and len(ids) == 2 and ids[0] == ids[1]:
                report.note("self_pairs", f"line {line_no}: {members[0]!r} paired with itself")
                continue
            for i, a in enumerate(ids):
                for b in ids[i + 1:]:
                    if a != b:
                        rows.append(a)
                        cols.append(b)
                        weights.append(weight)
    return similarity_from_pairs(rows, cols, weights, len(words), top_k, report)


# -- (c) an existing embedding ---------------------------------------------------------------------

@numba.njit(cache=True, nogil=True)
def _weakest(values):
    worst = 0
    for j in range(1, values.shape[0]):
        if values[j] < values[worst]:
            worst = j
    return worst


@numba.njit(cache=True, nogil=True)
def _block_top_k(scores, first_row, k, out_cols, out_vals):
    # Per row, the k largest scores without sorting the whole row: a running minimum threshold
    # over a small buffer (k << V), excluding the word itself.
    for r in range(scores.shape[0]):
        row = first_row + r
        buf_c = out_cols[row]
        buf_v = out_vals[row]
        filled = 0
        worst = 0
        for c in range(scores.shape[1]):
            s = scores[r, c]
            if c == row or not (s > 0):
                continue
            if filled < k:
                buf_c[filled] = c
                buf_v[filled] = s
                filled += 1
                if filled == k:
                    worst = _weakest(buf_v)
            elif s > buf_v[worst]:
                buf_c[worst] = c
                buf_v[worst] = s
                worst = _weakest(buf_v)


def cosine_top_k(vectors: np.ndarray, top_k: int = DEFAULT_TOP_K) -> Tuple[np.ndarray, np.ndarray]:
    """For every row of ``vectors``, the ids and cosines of its ``top_k`` most similar other
    rows (positive cosines only; missing slots have id -1). Blocked so memory stays
    ``block x n``."""
    unit = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(unit, axis=1, keepdims=True)
    unit = unit / np.where(norms > 0, norms, 1.0)
    n = unit.shape[0]
    cols = np.full((n, top_k), -1, dtype=np.int64)
    vals = np.zeros((n, top_k), dtype=np.float32)
    for start in range(0, n, _EMBEDDING_BLOCK_ROWS):
        block = unit[start:start + _EMBEDDING_BLOCK_ROWS] @ unit.T
        _block_top_k(block, start, top_k, cols, vals)
    return cols, vals


def _read_vectors(source) -> Tuple[List[str], np.ndarray]:
    if isinstance(source, tuple):
        words, vectors = source
        return list(words), np.asarray(vectors)
    if hasattr(source, "index_to_key"):
        return list(source.index_to_key), source.vectors
    path = os.fspath(source)
    if not os.path.exists(path):
        raise SimilarityError(f"vectors not found: {path}")
    from gensim.models import KeyedVectors
    try:
        if path.endswith((".kv", ".model")):
            from gensim.utils import SaveLoad
            loaded = SaveLoad.load(path)  # KeyedVectors, or a whole Word2Vec model
            kv = getattr(loaded, "wv", loaded)
        else:
            kv = KeyedVectors.load_word2vec_format(path, binary=_looks_binary(path))
    except Exception as exc:  # gensim raises anything from ValueError to UnpicklingError
        raise SimilarityError(f"cannot read vectors {path}: {exc}") from None
    return list(kv.index_to_key), kv.vectors


def _looks_binary(path: str) -> bool:
    if path.endswith(".bin"):
        return True
    with open(path, "rb") as fh:
        head = fh.read(4096)
    body = head.split(b"\n", 1)[1] if b"\n" in head else b""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(body) - 4  # a cut multi-byte char at the end is still text
    return False


def embedding_similarity(vectors, vocab, top_k: int = DEFAULT_TOP_K,
                         report: Optional[SimilarityReport] = None) -> sp.csr_matrix:
    """Top-k cosine neighbours among the vocabulary words present in ``vectors`` (a path, a
    gensim ``KeyedVectors`` or a ``(words, matrix)`` pair)."""
    words, index = _word_index(vocab)
    report = report if report is not None else SimilarityReport()
    report.source = f"embedding {vectors if isinstance(vectors, (str, os.PathLike)) else type(vectors).__name__}"
    emb_words, matrix = _read_vectors(vectors)
    if matrix.ndim != 2 or matrix.shape[0] != len(emb_words):
        raise SimilarityError("vectors must be a (words x dims) matrix")
    vocab_ids = np.array([index.get(w, -1) for w in emb_words], dtype=np.int64)
    present = vocab_ids >= 0
    report.items_read = len(emb_words)
    report.unknown_words = int(np.count_nonzero(~present))
    finite_rows = np.isfinite(matrix).all(axis=1)
    report.bad_weights = int(np.count_nonzero(present & ~finite_rows))
    use = present & finite_rows
    ids = vocab_ids[use]
    neighbour_pos, cosines = cosine_top_k(matrix[use], top_k)
    has = neighbour_pos >= 0
    rows = np.repeat(ids, top_k)[has.ravel()]
    cols = ids[neighbour_pos[has]]
    n = len(words)
    directed = sp.coo_matrix((cosines[has].astype(np.float64), (rows, cols)), shape=(n, n))
    logger.info("embedding: %d of %d vocabulary words have vectors", len(ids), n)
    return _finish(top_k_symmetric(directed, None), report)


# -- (a) WordNet -----------------------------------------------------------------------------------

def default_wordnet_dirs() -> List[str]:
    """Where WordNet's dict files are looked for: ``$SEMHUFF_WORDNET``, the project's shared
    data (``$SEMHUFF_DATA/wordnet``, default ``<repo>/../shared/data``), Debian's wordnet-base."""
    dirs = [os.environ.get("SEMHUFF_WORDNET", ""), str(data_path("wordnet")), "/usr/share/wordnet"]
    return [d for d in dirs if d]


def find_wordnet(wordnet_dir: Optional[str] = None) -> str:
    for folder in [wordnet_dir] if wordnet_dir else default_wordnet_dirs():
        if all(os.path.isfile(os.path.join(folder, f"data.{pos}")) for pos in _WORDNET_POS):
            return folder
    where = wordnet_dir or ", ".join(default_wordnet_dirs())
    raise SimilarityError(f"WordNet dict files (data.noun ...) not found in {where}")


@dataclass
class WordNetGraph:
    """WordNet as integers: synsets ``0 .. n_synsets-1``, the selected links between them, and
    for every (part of speech, lemma) its synsets in WordNet's sense order (most frequent first)."""

    n_synsets: int
    link_src: np.ndarray
    link_dst: np.ndarray
    senses: Dict[Tuple[str, str], List[int]]
    exceptions: Dict[str, Dict[str, List[str]]]


def _read_lines(path: str) -> Iterable[List[str]]:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if not line.startswith(" "):  # the licence header is indented
                yield line.split(" | ", 1)[0].split()


def read_wordnet(wordnet_dir: Optional[str] = None, links=WORDNET_LINKS) -> WordNetGraph:
    """Parse WordNet's ``data.*``, ``index.*`` and ``*.exc`` files directly (format: wndb(5WN))."""
    folder = find_wordnet(wordnet_dir)
    synset_id: Dict[Tuple[str, str], int] = {}
    pointers: List[Tuple[int, str, str]] = []
    for pos in _WORDNET_POS:
        for fields in _read_lines(os.path.join(folder, f"data.{pos}")):
            sid = len(synset_id)
            synset_id[(pos, fields[0])] = sid
            at = 4 + 2 * int(fields[3], 16)  # skip the (word, lex_id) pairs
            for i in range(int(fields[at])):
                symbol, offset, target_pos = fields[at + 1 + 4 * i: at + 4 + 4 * i]
                if symbol in links:
                    pointers.append((sid, _POINTER_FILE[target_pos], offset))
    senses: Dict[Tuple[str, str], List[int]] = {}
    exceptions: Dict[str, Dict[str, List[str]]] = {}
    for pos in _WORDNET_POS:
        index_path = os.path.join(folder, f"index.{pos}")
        if not os.path.isfile(index_path):
            raise SimilarityError(f"WordNet file missing: {index_path}")
        for fields in _read_lines(index_path):
            n_senses = int(fields[2])
            # the synset offsets end the line, most frequent sense first
            ids = [synset_id.get((pos, off), -1) for off in fields[len(fields) - n_senses:]]
            senses[(pos, fields[0])] = [s for s in ids if s >= 0]
        exc_path = os.path.join(folder, f"{pos}.exc")
        table: Dict[str, List[str]] = {}
        if os.path.isfile(exc_path):
            for parts in _read_lines(exc_path):
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


@numba.njit(cache=True, nogil=True)
def _wordnet_top_k(word_ptr, word_syn, word_rank, syn_ptr, syn_words, syn_rank, adj_ptr, adj,
                   n_words, k, max_hops):
    # For word u: score(v) = max over sense pairs of 1/(1+hops) / (rank_u * rank_v), one
    # breadth-first search (up to max_hops) per sense of u.
    n_syn = syn_ptr.shape[0] - 1
    seen_syn = np.full(n_syn, -1, dtype=np.int64)
    seen_word = np.full(n_words, -1, dtype=np.int64)
    score = np.zeros(n_words, dtype=np.float64)
    found = np.empty(n_words, dtype=np.int64)
    frontier = np.empty(n_syn, dtype=np.int64)
    next_frontier = np.empty(n_syn, dtype=np.int64)
    out_rows = np.empty(n_words * k, dtype=np.int64)
    out_cols = np.empty(n_words * k, dtype=np.int64)
    out_vals = np.empty(n_words * k, dtype=np.float64)
    n_out = 0
    stamp = 0
    for u in range(n_words):
        n_found = 0
        seen_word[u] = u
        for i in range(word_ptr[u], word_ptr[u + 1]):
            stamp += 1
            frontier[0] = word_syn[i]
            seen_syn[word_syn[i]] = stamp
            n_front = 1
            for hop in range(max_hops + 1):
                path = 1.0 / ((1.0 + hop) * word_rank[i])
                for f in range(n_front):
                    s = frontier[f]
                    for j in range(syn_ptr[s], syn_ptr[s + 1]):
                        v = syn_words[j]
                        if v == u:
                            continue
                        value = path / syn_rank[j]
                        if seen_word[v] != u:
                            seen_word[v] = u
                            score[v] = value
                            found[n_found] = v
                            n_found += 1
                        elif value > score[v]:
                            score[v] = value
                if hop == max_hops:
                    break
                n_next = 0
                for f in range(n_front):
                    s = frontier[f]
                    for j in range(adj_ptr[s], adj_ptr[s + 1]):
                        t = adj[j]
                        if seen_syn[t] != stamp:
                            seen_syn[t] = stamp
                            next_frontier[n_next] = t
                            n_next += 1
                frontier, next_frontier = next_frontier, frontier
                n_front = n_next
        candidates = found[:n_found]
        if n_found > k:
            # highest score first; ties go to the more frequent (lower id) word
            candidates = np.sort(candidates)
            candidates = candidates[np.argsort(-score[candidates], kind="mergesort")[:k]]
        for v in candidates:
            out_rows[n_out] = u
            out_cols[n_out] = v
            out_vals[n_out] = score[v]
            n_out += 1
    return out_rows[:n_out], out_cols[:n_out], out_vals[:n_out]


def _csr_lists(n_rows: int, rows: np.ndarray, *columns: np.ndarray) -> Tuple[np.ndarray, ...]:
    order = np.argsort(rows, kind="stable")
    ptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_rows), out=ptr[1:])
    return (ptr,) + tuple(np.ascontiguousarray(c[order]) for c in columns)


def wordnet_similarity(vocab, top_k: int = DEFAULT_TOP_K, wordnet_dir: Optional[str] = None,
                       max_hops: int = DEFAULT_WORDNET_HOPS, graph: Optional[WordNetGraph] = None,
                       report: Optional[SimilarityReport] = None) -> sp.csr_matrix:
    """WordNet path similarity ``1 / (1 + hops)`` discounted by sense rank (the k-th listed sense
    of a word counts 1/k), each word's ``top_k`` best words."""
    words, _ = _word_index(vocab)
    report = report if report is not None else SimilarityReport()
    report.source = "wordnet"
    graph = graph if graph is not None else read_wordnet(wordnet_dir)
    member_word: List[int] = []
    member_syn: List[int] = []
    member_rank: List[int] = []
    # A string loop over the vocabulary (about 0.2 s for 56k words): morphology is not numeric.
    for wid, word in enumerate(words):
        for pos in _WORDNET_POS:
            for lemma in base_forms(word, pos, graph):
                synsets = graph.senses[(pos, lemma)]
                member_word.extend([wid] * len(synsets))
                member_syn.extend(synsets)
                member_rank.extend(range(1, len(synsets) + 1))
    word_of = np.array(member_word, dtype=np.int64)
    syn_of = np.array(member_syn, dtype=np.int64)
    rank_of = np.array(member_rank, dtype=np.float64)
    n = len(words)
    word_ptr, word_syn, word_rank = _csr_lists(n, word_of, syn_of, rank_of)
    syn_ptr, syn_words, syn_rank = _csr_lists(graph.n_synsets, syn_of, word_of, rank_of)
    adj_ptr, adj = _csr_lists(graph.n_synsets, np.concatenate([graph.link_src, graph.link_dst]),
                              np.concatenate([graph.link_dst, graph.link_src]))
    report.items_read = graph.n_synsets
    rows, cols, vals = _wordnet_top_k(word_ptr, word_syn, word_rank, syn_ptr, syn_words, syn_rank,
                                      adj_ptr, adj, n, int(top_k), int(max_hops))
    directed = sp.coo_matrix((vals, (rows, cols)), shape=(n, n))
    return _finish(top_k_symmetric(directed, None), report)


# -- dispatch --------------------------------------------------------------------------------------

def looks_like_vectors(path: str) -> bool:
    """A word2vec / gensim vectors file rather than a pairs file: by suffix, or a first line
    ``<count> <dims>`` (the word2vec header)."""
    if path.endswith(_VECTOR_SUFFIXES):
        return True
    try:
        with open(path, "rb") as fh:
            first = fh.readline(256).split()
    except OSError:
        return False
    return len(first) == 2 and all(f.isdigit() for f in first)


def load_similarity(source, vocab, top_k: int = DEFAULT_TOP_K, wordnet_dir: Optional[str] = None,
                    report: Optional[SimilarityReport] = None) -> sp.csr_matrix:
    """Similarity knowledge from ``source``: ``"wordnet"``, a pairs / synonym-set file, a vectors
    file (word2vec text or binary, gensim ``.kv`` / ``.model``), a gensim ``KeyedVectors`` or a
    ready sparse matrix (re-cut to ``top_k`` and symmetrised)."""
    if top_k < 1:
        raise SimilarityError("top_k must be >= 1")
    report = report if report is not None else SimilarityReport()
    words, _ = _word_index(vocab)
    if sp.issparse(source):
        if source.shape != (len(words), len(words)):
            raise SimilarityError(f"similarity matrix shape {source.shape} does not match "
                                  f"the vocabulary ({len(words)} words)")
        coo = sp.coo_matrix(source)
        report.source = "matrix"
        return similarity_from_pairs(coo.row, coo.col, coo.data, len(words), top_k, report)
    if hasattr(source, "index_to_key") or isinstance(source, tuple):
        return embedding_similarity(source, vocab, top_k, report)
    source = os.fspath(source)
    if source == WORDNET_SOURCE:
        return wordnet_similarity(vocab, top_k, wordnet_dir, report=report)
    if not os.path.isfile(source):
        raise SimilarityError(f"similarity source not found: {source!r} "
                              f"(expected 'wordnet', a pairs file or a vectors file)")
    if looks_like_vectors(source):
        return embedding_similarity(source, vocab, top_k, report)
    return pairs_file_similarity(source, vocab, top_k, report)
