"""POS tagging task: corpus readers, window features, and the tagger against baselines on real data."""
import numpy as np
import pytest
from gensim.models import KeyedVectors

from semhuff.eval import pos
from semhuff.data_paths import data_root, missing_message
from semhuff.eval.vectors import Lookup


@pytest.fixture(autouse=True)
def one_blas_thread():
    """OpenBLAS threads spin on a busy 2-core CI box; one thread is 10-20x faster there."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield

CONLLU = """# sent_id = 1
# text = Don't stop.
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tstop\tstop\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t_\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_
"""


def test_conllu_reader_skips_ranges_and_empty_nodes(tmp_path):
    path = tmp_path / "x.conllu"
    path.write_text(CONLLU)
    assert pos.read_conllu(path) == [[("Do", "AUX"), ("n't", "PART"), ("stop", "VERB"), (".", "PUNCT")],
                                     [("Hi", "INTJ")]]
    assert pos.read_conllu(path, "xpos")[0][0] == ("Do", "VBP")


def test_slash_and_column_readers():
    ptb = "[ Pierre/NNP Vinken/NNP ]\n,/, *-1/-NONE- 1\\/2/CD rose/VBD|VBN ./. \n\n[ He/PRP ]\nwon/VBD\n"
    assert pos.read_slash_tagged(ptb, sentence_per_line=False) == [
        [("Pierre", "NNP"), ("Vinken", "NNP"), (",", ","), ("1/2", "CD"), ("rose", "VBD"), (".", ".")],
        [("He", "PRP"), ("won", "VBD")]]
    brown = "\n\tThe/at jury/nn ./.\n\n\tIt/pps ran/vbd\n"
    assert pos.read_slash_tagged(brown, sentence_per_line=True) == [
        [("The", "at"), ("jury", "nn"), (".", ".")], [("It", "pps"), ("ran", "vbd")]]
    assert pos.read_columns("He PRP B-NP\nran VBD B-VP\n\nGo VB B-VP\n") == [
        [("He", "PRP"), ("ran", "VBD")], [("Go", "VB")]]


def test_window_features_match_a_naive_construction():
    unit = np.arange(12, dtype=np.float32).reshape(4, 3)
    sentences = [np.array([0, pos.UNKNOWN, 2]), np.array([3])]
    window = 1
    features = pos.window_features(unit, sentences, window)
    expected = []
    for ids in sentences:
        for t in range(len(ids)):
            row = []
            for j in range(t - window, t + window + 1):
                i = ids[j] if 0 <= j < len(ids) else pos.PADDING
                row += list(unit[i]) if i >= 0 else [0.0] * 3
                row += [float(i == pos.UNKNOWN), float(i == pos.PADDING)]
            expected.append(row)
    np.testing.assert_array_equal(features, np.array(expected, dtype=np.float32))


def test_baselines_on_a_toy_split():
    train = [[("the", "DT"), ("dog", "NN"), ("runs", "VBZ")], [("the", "DT"), ("run", "NN")]]
    test = [[("the", "DT"), ("run", "NN"), ("cat", "NN")]]
    result = pos.baselines(train, test)
    assert result["majority_tag"] in {"DT", "NN"}
    assert result["word_most_frequent_tag_accuracy"] == pytest.approx(1.0 if result["majority_tag"] == "NN" else 2 / 3)


def neighbour_vectors(sentences, contexts=40):
    """Distributional vectors made in a blink: log counts of the most frequent words seen just
    left and just right of each word (plenty for parts of speech)."""
    words = [w.lower() for s in sentences for w, _ in s]
    vocab, counts = np.unique(words, return_counts=True)
    vocab = vocab[np.argsort(-counts, kind="stable")]
    index = {w: i for i, w in enumerate(vocab)}
    table = np.zeros((len(vocab), 2 * contexts), dtype=np.float32)
    for sentence in sentences:
        ids = [index[w.lower()] for w, _ in sentence]
        for left, right in zip(ids, ids[1:]):
            if right < contexts:
                table[left, contexts + right] += 1
            if left < contexts:
                table[right, left] += 1
    kv = KeyedVectors(vector_size=2 * contexts)
    kv.add_vectors(list(vocab), np.log1p(table) + 1e-3)
    return kv


@pytest.fixture(scope="module")
def conll2000():
    root = data_root()
    conll = root / "nltk_data" / "corpora" / "conll2000.zip"
    if not conll.is_file():
        pytest.skip(missing_message(conll, "CoNLL-2000"))
    corpus = pos.load_pos_corpus("conll2000", root)
    corpus.test = corpus.test[:400]
    return corpus, neighbour_vectors(corpus.train)


def test_tagger_beats_the_most_frequent_tag_baseline_on_conll2000(conll2000):
    corpus, kv = conll2000
    scores = {s.metric: s for s in pos.evaluate_pos(Lookup(kv), corpus, window=1, max_train_tokens=12_000)}
    accuracy, details = scores["accuracy"].value, scores["accuracy"].details
    assert details["train_tokens"] >= 12_000 and details["tags"] > 30
    assert accuracy > details["majority_tag_accuracy"] + 0.5
    assert 0 < scores["accuracy-oov"].covered < details["test_tokens"]


def test_random_vectors_tag_worse_than_distributional_ones(conll2000):
    """The task measures the vectors: noise must score well below vectors learnt from text."""
    corpus, kv = conll2000
    noise = KeyedVectors(vector_size=kv.vector_size)
    noise.add_vectors(kv.index_to_key, np.random.default_rng(0).normal(size=kv.vectors.shape))

    def accuracy(vectors):
        return pos.evaluate_pos(Lookup(vectors), corpus, window=1, max_train_tokens=6_000)[0].value

    assert accuracy(kv) > accuracy(noise) + 0.05
