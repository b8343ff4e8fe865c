"""WordNet path similarity ``1 / (1 + hops)`` between the senses of two words, searched
breadth-first over hypernym / hyponym (incl. instance), similar-to and verb-group links up to
``max_hops`` (default 2); a tier is only searched when the nearer ones gave fewer than ``top_k``
words, and ties inside the last tier prefer words linked by more sense pairs, then more frequent
words. Inflected vocabulary words reach their lemmas through WordNet's exception lists and
detachment rules (NLTK's ``morphy``). WordNet's files are read by ``semhuff.wordnet_reader``.
"""
from __future__ import annotations

import contextlib
from typing import List, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ... import wordnet_reader
from ...errors import DatasetMissing, SimilarityError
from ...numba_cache import numba
from ...wordnet_reader import POS_FILES, WordNetGraph, base_forms, default_wordnet_dirs
from .core import DEFAULT_TOP_K, SimilarityReport, _finish, _word_index, top_k_symmetric

DEFAULT_WORDNET_HOPS = 2
# Synset links that mean "is a kind of / is like": hypernym, instance hypernym, their inverses,
# similar-to (adjective clusters) and verb group. Antonyms, meronyms and derivations are left out.
WORDNET_LINKS = frozenset({"@", "@i", "~", "~i", "&", "$"})

__all__ = ["DEFAULT_WORDNET_HOPS", "WORDNET_LINKS", "WordNetGraph", "base_forms", "default_wordnet_dirs",
           "find_wordnet", "read_wordnet", "wordnet_similarity"]


@contextlib.contextmanager
def _as_similarity_error():
    # To a tree builder, missing WordNet files are a similarity source that cannot be read.
    try:
        yield
    except DatasetMissing as exc:
        raise SimilarityError(str(exc)) from None


def find_wordnet(wordnet_dir: Optional[str] = None) -> str:
    """``semhuff.wordnet_reader.find_wordnet``, raising ``SimilarityError``."""
    with _as_similarity_error():
        return wordnet_reader.find_wordnet(wordnet_dir)


def read_wordnet(wordnet_dir: Optional[str] = None, links=WORDNET_LINKS) -> WordNetGraph:
    """WordNet's synset graph over ``links`` (``semhuff.wordnet_reader.read_graph``), raising
    ``SimilarityError``."""
    with _as_similarity_error():
        return wordnet_reader.read_graph(wordnet_dir, links)


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
        for pos in POS_FILES:
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
