import numpy as np
import pytest
import scipy.sparse as sp

from naive_matching import reference_approximate_matching
from semhuff.trees.matching import approximate_matching, exact_matching, matching_weight


def random_graph(rng, n, density):
    upper = sp.triu(sp.random(n, n, density=density, random_state=rng.integers(1 << 30)), 1)
    graph = (upper + upper.T).tocsr()
    graph.sort_indices()
    return graph.indptr, graph.indices, graph.data


def is_matching(indptr, indices, mate):
    for v, m in enumerate(mate):
        if m >= 0:
            assert mate[m] == v
            assert m in indices[indptr[v]:indptr[v + 1]]
    return True


@pytest.mark.parametrize("seed", range(4))
def test_kernel_equals_pure_python_reference(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        graph = random_graph(rng, int(rng.integers(2, 40)), rng.uniform(0.05, 0.7))
        fast = approximate_matching(*graph)
        slow = reference_approximate_matching(*graph)
        assert np.array_equal(fast, slow)


def test_approximation_is_at_least_half_of_exact():
    rng = np.random.default_rng(7)
    ratios = []
    for _ in range(150):
        graph = random_graph(rng, int(rng.integers(2, 30)), rng.uniform(0.05, 0.8))
        approx = approximate_matching(*graph)
        exact = exact_matching(*graph)
        assert is_matching(graph[0], graph[1], approx) and is_matching(graph[0], graph[1], exact)
        w_approx, w_exact = matching_weight(*graph, approx), matching_weight(*graph, exact)
        assert w_approx <= w_exact + 1e-9
        assert w_approx >= 0.5 * w_exact - 1e-12
        if w_exact > 0:
            ratios.append(w_approx / w_exact)
    assert np.mean(ratios) > 0.95  # far above the guarantee on average


def test_exact_matches_networkx():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(3)
    for _ in range(20):
        indptr, indices, weights = random_graph(rng, 25, 0.3)
        graph = nx.Graph()
        for u in range(len(indptr) - 1):
            for j in range(indptr[u], indptr[u + 1]):
                graph.add_edge(u, int(indices[j]), weight=float(weights[j]))
        expected = sum(graph[a][b]["weight"] for a, b in nx.max_weight_matching(graph))
        got = matching_weight(indptr, indices, weights, exact_matching(indptr, indices, weights))
        assert got == pytest.approx(expected, rel=1e-9)


def test_local_search_fixes_a_bad_greedy_choice():
    # Path a-b-c-d with the middle edge heaviest: greedy takes b-c (1.0), optimum a-b + c-d (1.8).
    graph = sp.csr_matrix(np.array([[0, .9, 0, 0], [.9, 0, 1, 0], [0, 1, 0, .9], [0, 0, .9, 0]]))
    mate = approximate_matching(graph.indptr, graph.indices, graph.data)
    assert list(mate) == [1, 0, 3, 2]


def test_unsorted_rows_and_empty_graphs():
    rows = np.array([0, 0, 1, 2]), np.array([2, 1, 0, 0])
    graph = sp.csr_matrix((np.array([0.5, 0.7, 0.7, 0.5]), rows), shape=(3, 3))
    graph.indices[:2] = graph.indices[:2][::-1].copy()  # unsorted row 0
    graph.data[:2] = graph.data[:2][::-1].copy()
    assert list(approximate_matching(graph.indptr, graph.indices, graph.data)) == [1, 0, -1]
    empty = (np.zeros(4, np.int64), np.zeros(0, np.int64), np.zeros(0))
    for match in (approximate_matching, exact_matching):
        assert list(match(*empty)) == [-1, -1, -1]


def test_polishing_a_given_matching_never_loses_weight():
    rng = np.random.default_rng(11)
    for _ in range(30):
        graph = random_graph(rng, 30, 0.3)
        optimum = exact_matching(*graph)
        polished = approximate_matching(*graph, initial=optimum)
        assert matching_weight(*graph, polished) == pytest.approx(matching_weight(*graph, optimum))
        greedy = approximate_matching(*graph)
        assert matching_weight(*graph, approximate_matching(*graph, initial=greedy)) >= \
            matching_weight(*graph, greedy) - 1e-12
