"""Independent references (stumpy's ``tests/naive.py`` pattern): the mathematics of every update,
written from the papers in plain float64 numpy with the exact sigmoid. Nothing here is shared
with the kernels: no sigmoid table, no random generator, no path arrays (paths are walked up
the tree's parent array here). Windows are explicit (the full window: every word within
``window`` positions) and the noise words of negative sampling are supplied by the caller.
``lockf`` (gensim's ``vectors_lockf``, one factor per word): every update of word i's input
vector times ``lockf[i]``; None: 1 for every word.
"""
from __future__ import annotations

import math
from typing import List, Sequence, Tuple

import numpy as np


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def log_sigmoid(x: float) -> float:
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))


def paths(parent: np.ndarray, branch: np.ndarray, n_words: int) -> List[List[Tuple[int, int]]]:
    """Per word, its (output row, code) pairs from the root down: inner node ``V + i`` is row
    ``i``; the code is the branch bit taken below that node."""
    out = []
    for w in range(n_words):
        steps, node = [], w
        while parent[node] >= 0:
            steps.append((int(parent[node]) - n_words, int(branch[node])))
            node = parent[node]
        out.append(steps[::-1])
    return out


def _lock(lockf, word) -> float:
    return 1.0 if lockf is None else float(lockf[word])


def contexts(n: int, pos: int, window: int) -> List[int]:
    return [c for c in range(max(0, pos - window), min(n, pos + window + 1)) if c != pos]


def _hs_step(h, row, code, alpha):
    """One path node: the gradient factor and -log P(branch); label = 1 - code."""
    s = float(h @ row)
    return (1 - code - sigmoid(s)) * alpha, -log_sigmoid(s if code == 0 else -s)


def sg_hs(sentence, syn0, syn1, word_paths, window, alpha, top=0, lockf=None):
    """Skip-gram HS over one sentence: each context word predicts the centre, context by
    context down the centre's path. The rows of the first ``top`` path nodes stay as they were
    at the centre's start while its contexts read them, and then receive the sum of every
    context's update; the remaining rows are updated after each node. A context vector receives
    its accumulated error after its whole path. Returns (syn0, syn1, loss)."""
    syn0, syn1 = syn0.astype(np.float64), syn1.astype(np.float64)
    loss = 0.0
    for pos, w in enumerate(sentence):
        ctx = [sentence[c] for c in contexts(len(sentence), pos, window)]
        path = word_paths[w]
        pending = {row_id: np.zeros(syn0.shape[1]) for row_id, _ in path[:top]}
        for r in ctx:
            err = np.zeros(syn0.shape[1])
            for level, (row_id, code) in enumerate(path):
                g, nll = _hs_step(syn0[r], syn1[row_id], code, alpha)
                loss += nll
                err += g * syn1[row_id]
                if level < top:
                    pending[row_id] += g * syn0[r]
                else:
                    syn1[row_id] += g * syn0[r]
            syn0[r] += _lock(lockf, r) * err
        for row_id, update in pending.items():
            syn1[row_id] += update
    return syn0, syn1, loss


def hs_predictor(word_paths, alpha):
    """HS: predict ``w`` from ``h`` node by node down w's path, each row updated after its node."""
    def predict(h, w, syn1):
        err, nll = np.zeros_like(h), 0.0
        for row_id, code in word_paths[w]:
            g, step_nll = _hs_step(h, syn1[row_id], code, alpha)
            nll += step_nll
            err += g * syn1[row_id]
            syn1[row_id] += g * h
        return err, nll
    return predict


def ns_predictor(noise: Sequence[int], alpha):
    """NS: the true word (label 1), then each noise word (label 0; one equal to ``w`` is
    skipped), each output row updated after its own step."""
    def predict(h, w, syn1neg):
        err, nll = np.zeros_like(h), 0.0
        for target, label in [(w, 1)] + [(z, 0) for z in noise if z != w]:
            s = float(h @ syn1neg[target])
            g = (label - sigmoid(s)) * alpha
            nll -= log_sigmoid(s if label else -s)
            err += g * syn1neg[target]
            syn1neg[target] += g * h
        return err, nll
    return predict


def skipgram(sentence, syn0, out, window, predict, lockf=None):
    """Each context word's vector predicts the centre; it receives its error right after."""
    syn0, out = syn0.astype(np.float64), out.astype(np.float64)
    loss = 0.0
    for pos, w in enumerate(sentence):
        for c in contexts(len(sentence), pos, window):
            err, nll = predict(syn0[sentence[c]], w, out)
            loss += nll
            syn0[sentence[c]] += _lock(lockf, sentence[c]) * err
    return syn0, out, loss


def cbow(sentence, syn0, out, window, predict, mean=True, lockf=None):
    """The mean of the context vectors predicts the centre and every context occurrence receives
    the whole error; or (``mean=False``, gensim's cbow_mean=0) their sum predicts it and each
    receives the error divided by their number."""
    syn0, out = syn0.astype(np.float64), out.astype(np.float64)
    loss = 0.0
    for pos, w in enumerate(sentence):
        ctx = [sentence[c] for c in contexts(len(sentence), pos, window)]
        if not ctx:
            continue
        h = np.sum([syn0[r] for r in ctx], axis=0)
        err, nll = predict(h / len(ctx) if mean else h, w, out)
        loss += nll
        for r in ctx:
            syn0[r] += _lock(lockf, r) * (err if mean else err / len(ctx))
    return syn0, out, loss


def skipgram_two_layers(sentence, syn0, outs, window, predictors, lockf=None):
    """Skip-gram with two output layers on the same input vectors (gensim's ``hs=1,
    negative>0``): at each centre, each layer in turn over all its contexts, every context
    vector receiving its error right after its own prediction."""
    syn0, outs = syn0.astype(np.float64), [o.astype(np.float64) for o in outs]
    loss = 0.0
    for pos, w in enumerate(sentence):
        for predict, out in zip(predictors, outs):
            for c in contexts(len(sentence), pos, window):
                err, nll = predict(syn0[sentence[c]], w, out)
                loss += nll
                syn0[sentence[c]] += _lock(lockf, sentence[c]) * err
    return syn0, outs, loss


def cbow_two_layers(sentence, syn0, outs, window, predictors, lockf=None):
    """CBOW with two output layers (word2vec.c's ``-hs 1 -negative N``): both predict from the
    same context mean; every context occurrence receives the sum of their errors."""
    syn0, outs = syn0.astype(np.float64), [o.astype(np.float64) for o in outs]
    loss = 0.0
    for pos, w in enumerate(sentence):
        ctx = [sentence[c] for c in contexts(len(sentence), pos, window)]
        if not ctx:
            continue
        h = np.mean([syn0[r] for r in ctx], axis=0)
        total = np.zeros_like(h)
        for predict, out in zip(predictors, outs):
            err, nll = predict(h, w, out)
            total += err
            loss += nll
        for r in ctx:
            syn0[r] += _lock(lockf, r) * total
    return syn0, outs, loss


def hs_log_prob(h, word_path, syn1) -> float:
    """log P(w | h) = sum over the path of log sigmoid(+-h . row), float64."""
    return sum(log_sigmoid(float(h @ syn1[row]) * (1 - 2 * code)) for row, code in word_path)


def score(sentences, index, syn0, syn1, word_paths, window, sg=True) -> Tuple[float, int]:
    """Held-out (summed nll, predictions): out-of-vocabulary words dropped, full window, no
    down-sampling; skip-gram: each context predicts the centre; CBOW: the context mean does."""
    syn0, syn1 = syn0.astype(np.float64), syn1.astype(np.float64)
    nll, n = 0.0, 0
    for tokens in sentences:
        sent = [index[t] for t in tokens if t in index]
        for pos, w in enumerate(sent):
            ctx = [sent[c] for c in contexts(len(sent), pos, window)]
            if sg:
                for r in ctx:
                    nll -= hs_log_prob(syn0[r], word_paths[w], syn1)
                    n += 1
            elif ctx:
                nll -= hs_log_prob(np.mean([syn0[r] for r in ctx], axis=0), word_paths[w], syn1)
                n += 1
    return nll, n


def _log_softmax(scores):
    scores = np.asarray(scores, np.float64)
    top = scores.max()
    return scores - (top + math.log(np.exp(scores - top).sum()))


def class_predictor(cluster_of, n_clusters, alpha, q=None, lam=None):
    """Two-level class softmax (Shen et al. eqs. 2-4): rows 0..C-1 of the output matrix are the
    cluster vectors, row C + v word v's vector. Each prediction also smooths q[w] towards
    log2 P(. | h) (eq. 9) when q is given."""
    members = [[v for v in range(len(cluster_of)) if cluster_of[v] == c] for c in range(n_clusters)]

    def predict(h, w, out):
        c = cluster_of[w]
        logp = _log_softmax([h @ out[j] for j in range(n_clusters)])
        words = members[c]
        logq = _log_softmax([h @ out[n_clusters + v] for v in words])
        nll = -logp[c] - logq[words.index(w)]
        if q is not None:
            q[w] = lam[w] * q[w] + (1 - lam[w]) * logp / math.log(2)
        err = np.zeros_like(h)
        for j in range(n_clusters):
            g = ((j == c) - math.exp(logp[j])) * alpha
            err += g * out[j]
            out[j] += g * h
        for m, v in enumerate(words):
            g = ((v == w) - math.exp(logq[m])) * alpha
            err += g * out[n_clusters + v]
            out[n_clusters + v] += g * h
        return err, nll
    return predict


def cluster_log2_probs(h, parent, branch, n_words, cluster_of, syn1):
    """log2 P(c | h) of every cluster of a tree whose cluster c is the subtree holding its words:
    P(c | h) is the probability of the path from the root to that subtree, i.e. of the steps
    (node and branch) all its words' paths share (one word: its whole path)."""
    word_paths = paths(parent, branch, n_words)
    out = {}
    for c in set(cluster_of.tolist()):
        words = [w for w in range(n_words) if cluster_of[w] == c]
        common = word_paths[words[0]]
        for w in words[1:]:
            k = 0
            while k < min(len(common), len(word_paths[w])) and common[k] == word_paths[w][k]:
                k += 1
            common = common[:k]
        out[c] = hs_log_prob(h, common, syn1) / math.log(2)
    return out


def greedy_assign(q, counts, n_clusters, max_words, budget):
    """Algorithm 1 written out: words by descending frequency (id order), clusters by descending
    q (ties: lower id); take the first with fewer than ``max_words`` words and a token share
    below ``budget``; if none, the cluster with room whose share is smallest."""
    total = float(np.sum(counts))
    size, share = [0] * n_clusters, [0.0] * n_clusters
    out = []
    for w in range(len(counts)):
        ranked = sorted(range(n_clusters), key=lambda c: (-float(q[w][c]), c))
        pick = next((c for c in ranked if size[c] < max_words and share[c] < budget), None)
        if pick is None:
            room = [c for c in range(n_clusters) if size[c] < max_words]
            pick = min(room, key=lambda c: (share[c], c))
        out.append(pick)
        size[pick] += 1
        share[pick] += counts[w] / total
    return out


def minibatch(syn0, out, pairs, outputs, mean=True, clip=False, damping=False):
    """One batch of the GPU's update (docs/gpu.md), float64: synchronous minibatch SGD.

    ``pairs``: (input ids, target, learning rate) per pair (skip-gram: one input; CBOW: the
    contexts); ``outputs(target, j)``: the (output row, label) entries of pair ``j``. Every score
    uses the weights as they were before the batch; each row then receives the sum of its
    updates. ``clip``: no update where ``|score| >= 6`` (word2vec's HS). CBOW: the inputs' mean
    (``mean``) or sum predicts; each context receives the error (``mean``) or its share.
    ``damping``: a row that ``n`` entries touched (output rows: (pair, entry); input rows:
    context occurrences) gets its sum times ``1 / (1 + C (n - 1) / n)``, ``C`` the summed
    curvature ``rate * s'(score) * |other vector|^2`` of those entries (s' = sigmoid's
    derivative; output row: |h|^2; input: over the pair's entries, |row|^2). Returns
    (syn0, out, loss)."""
    syn0, out = syn0.astype(np.float64), out.astype(np.float64)
    d_in, d_out = np.zeros_like(syn0), np.zeros_like(out)
    hits_in, hits_out = np.zeros(len(syn0)), np.zeros(len(out))
    curv_in, curv_out = np.zeros(len(syn0)), np.zeros(len(out))
    loss = 0.0
    for j, (inputs, target, rate) in enumerate(pairs):
        h = np.sum([syn0[r] for r in inputs], axis=0)
        if mean:
            h = h / len(inputs)
        err = np.zeros_like(h)
        curv_pair = 0.0
        for row, label in outputs(target, j):
            s = float(h @ out[row])
            g = 0.0 if clip and abs(s) >= 6 else (label - sigmoid(s)) * rate
            loss -= log_sigmoid(s if label else -s)
            err += g * out[row]
            d_out[row] += g * h
            hits_out[row] += 1
            slope = sigmoid(s) * (1 - sigmoid(s)) * rate
            curv_out[row] += slope * float(h @ h)
            curv_pair += slope * float(out[row] @ out[row])
        for r in inputs:
            d_in[r] += err if mean else err / len(inputs)
            hits_in[r] += 1
            curv_in[r] += curv_pair

    def scale(hits, curv):
        if not damping:
            return 1.0
        return (1.0 / (1.0 + curv * (hits - 1) / np.maximum(hits, 1)))[:, None]

    return (syn0 + d_in * scale(hits_in, curv_in), out + d_out * scale(hits_out, curv_out),
            loss)


def hs_outputs(word_paths):
    """HS entries for ``minibatch``: the target's path, label = 1 - code."""
    return lambda target, j: [(row, 1 - code) for row, code in word_paths[target]]


def ns_outputs(noise):
    """NS entries for ``minibatch``: the target (label 1), then pair ``j``'s noise words
    ``noise[j]`` (label 0), one equal to the target skipped."""
    return lambda target, j: [(target, 1)] + [(int(z), 0) for z in noise[j] if z != target]


def skipgram_ns_batched(sentence, syn0, syn1neg, window, noise: Sequence[int], alpha):
    """Negative sampling, ``ns_order="batched"`` (HogBatch, Ji et al. 2016): at each centre its
    contexts share one set of noise words; for each output row in turn (the centre's, then each
    noise word's; one equal to the centre skipped) all contexts are scored against the row as it
    stands, their errors take that row, and the row then takes the sum of their updates; the
    context vectors (as they were at the centre's start) receive their errors after the last
    row. Written as matrix products over the window."""
    syn0, out = syn0.astype(np.float64), syn1neg.astype(np.float64)
    loss = 0.0
    for pos, w in enumerate(sentence):
        ctx = [sentence[c] for c in contexts(len(sentence), pos, window)]
        if not ctx:
            continue
        inputs = syn0[ctx]  # k x dim, fixed for the whole centre
        err = np.zeros_like(inputs)
        for target, label in [(w, 1)] + [(z, 0) for z in noise if z != w]:
            scores = inputs @ out[target]
            g = (label - np.array([sigmoid(s) for s in scores])) * alpha
            loss -= sum(log_sigmoid(s if label else -s) for s in scores)
            err += np.outer(g, out[target])
            out[target] += g @ inputs
        for j, c in enumerate(ctx):
            syn0[c] += err[j]
    return syn0, out, loss
