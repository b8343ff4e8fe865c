"""The one WordNet reader on the real dict files: both views give what the two readers they
replace gave (the synset lemmas of the thesaurus, the synset graph of the similarity)."""
import hashlib
import json

import pytest

from semhuff import wordnet_reader as wordnet
from semhuff.data_paths import data_path, missing_message
from semhuff.eval import thesaurus
from semhuff.trees.similarity import WORDNET_LINKS

# Recorded from the thesaurus' own data.* reader before it moved to semhuff.wordnet_reader: synset
# count and SHA-256 of the JSON list of lemma lists, per part of speech.
SYNSETS = {
    "n": (82115, "abe64275143c05b4"),
    "v": (13767, "589f5bdaf0f44ceb"),
    "a": (18156, "29fdf4ac43cde13e"),
    "r": (3621, "8324b95798aa9789"),
}


@pytest.fixture(scope="module")
def folder():
    path = data_path("wordnet")
    if not (path / "data.noun").is_file():
        pytest.skip(missing_message(path, "WordNet data"))
    return path


@pytest.mark.parametrize("pos", "nvar")
def test_thesaurus_synsets_equal_the_old_reader(folder, pos):
    synsets = list(thesaurus.wordnet_synsets(folder, pos))
    digest = hashlib.sha256(json.dumps(synsets).encode()).hexdigest()
    assert (len(synsets), digest[:16]) == SYNSETS[pos]


def test_thesaurus_synsets_fixed_members(folder):
    synsets = list(thesaurus.wordnet_synsets(folder))
    assert synsets[0] == ["entity"]
    assert synsets[49000] == ["New York", "New York State", "Empire State", "NY"]  # "_" -> " "
    assert synsets[-1] == ["wrongfully"]
    adjectives = list(thesaurus.wordnet_synsets(folder, "a"))
    assert adjectives[62] == ["abounding", "galore"]       # galore(ip)
    assert adjectives[92] == ["handy", "ready to hand"]    # ready_to_hand(p)
    assert adjectives[94] == ["outback", "remote"]         # outback(a)


def test_graph_has_every_synset_of_the_thesaurus_view(folder):
    graph = wordnet.read_graph(str(folder), WORDNET_LINKS)
    assert graph.n_synsets == sum(count for count, _ in SYNSETS.values())
    # recorded from the similarity's own reader before it moved to semhuff.wordnet_reader
    assert (graph.link_src.size, len(graph.senses)) == (218468, 155287)
    assert wordnet.base_forms("geese", "noun", graph) == ["goose"]
    assert wordnet.base_forms("better", "adj", graph) == ["better", "good", "well"]
