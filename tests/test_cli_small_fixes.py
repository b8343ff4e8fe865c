"""Issue 48's small silent results: nothing to score is an error, --cbow --sg is refused, and
semhuff-query's help example means what it says."""
import json
import re

import numpy as np
import pytest
from gensim.models import KeyedVectors

from semhuff import Word2Vec
from semhuff.cli import query, score, train


@pytest.fixture(scope="module")
def model_file(tmp_path_factory, lee_path):
    path = tmp_path_factory.mktemp("score") / "m.npz"
    model = Word2Vec(lee_path, vector_size=16, min_count=3, epochs=1, workers=1, seed=1,
                     progress=False)
    model.save(str(path))
    return str(path)


@pytest.mark.parametrize("text, why", [
    ("", "holds no words"),
    ("qqqzz xxyyq\nzzqq\n", "all 3 words of"),
    ("government\nfire\n", "no sentence of"),  # known words, but never two in a sentence
])
def test_nothing_to_score_is_an_error_not_a_perplexity_of_nan(model_file, tmp_path, capsys,
                                                               text, why):
    corpus = tmp_path / "held.txt"
    corpus.write_text(text)
    out = tmp_path / "s.json"
    code = score.main([model_file, str(corpus), "--workers", "1", "--json", str(out)])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "nothing to score" in lines[0] and why in lines[0], lines
    assert not out.exists()


def test_a_text_with_predictions_is_still_scored(model_file, tmp_path, capsys):
    corpus = tmp_path / "held.txt"
    corpus.write_text("the government said the fire was out\n")
    out = tmp_path / "s.json"
    assert score.main([model_file, str(corpus), "--workers", "1", "--json", str(out)]) == 0
    figures = json.loads(out.read_text())
    assert figures["predictions"] > 0 and np.isfinite(figures["perplexity"])


@pytest.mark.parametrize("flags", [["--cbow", "--sg"], ["--sg", "--cbow"], ["--model", "sg", "--cbow"]])
def test_conflicting_architecture_flags_are_refused(tmp_path, capsys, flags):
    out = tmp_path / "v.kv"
    with pytest.raises(SystemExit) as exit_:
        train.main(["lee", "-o", str(out), *flags])
    assert exit_.value.code == 2 and "not allowed with" in capsys.readouterr().err
    assert not out.exists()


def test_query_help_example_and_its_flag_form_give_the_same_answers(tmp_path, capsys):
    """The example is taken from the help as printed; the vectors make king - man + woman
    nearest to queen, and man - king + woman (the old example's meaning) to something else."""
    words = ["man", "king", "woman", "queen", "prince", "girl", "boy", "lady"]
    rng = np.random.default_rng(0)
    base = {w: rng.normal(size=12) for w in ("man", "woman", "prince", "girl", "boy", "lady")}
    royal = rng.normal(size=12)
    base["king"] = base["man"] + royal
    base["queen"] = base["woman"] + royal + 0.05 * rng.normal(size=12)
    kv = KeyedVectors(12)
    kv.add_vectors(words, np.array([base[w] for w in words], dtype=np.float32))
    path = str(tmp_path / "v.kv")
    kv.save(path)

    with pytest.raises(SystemExit):
        query.main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split()).split("examples:")[1]
    example = re.search(r"(\S+:\S+::\S+:\?)", help_text).group(1)
    flagged = re.search(r"--analogy (\S+) (\S+) (\S+)\)", help_text).groups()
    answers = []
    for argv in ([path, example, "--tsv", "--topn", "3"],
                 [path, "--analogy", *flagged, "--tsv", "--topn", "3"]):
        assert query.main(argv) == 0
        answers.append([line.split("\t")[1:] for line in capsys.readouterr().out.splitlines()])
    assert answers[0] == answers[1]
    assert answers[0][0][1] == "queen"  # king - man + woman, as the help says
