"""A damaged .npz (model, checkpoint, tree file) is one line and exit 2 in every command that
reads one, never zipfile's traceback (issue 48: ``BadZipFile: Bad CRC-32 for file 'syn0.npy'``
under --resume, --init-model and semhuff-score). The damage is the issue's: 2 KB flipped in the
middle of the file, where an entry's data is (its CRC-32 then fails only when it is read)."""
import shutil

import numpy as np
import pytest

from semhuff import Word2Vec
from semhuff.cli import evaluate, query, score, train, tree as tree_cli
from semhuff.errors import ModelFileError, TreeError

TINY = dict(vector_size=16, min_count=3, epochs=1, workers=1, seed=1, progress=False)


def damage(path, out):
    data = bytearray(open(path, "rb").read())
    middle = len(data) // 2
    data[middle:middle + 2048] = bytes(b ^ 0xFF for b in data[middle:middle + 2048])
    open(out, "wb").write(bytes(data))
    return str(out)


@pytest.fixture(scope="module")
def files(tmp_path_factory, lee_path):
    folder = tmp_path_factory.mktemp("damaged")
    model = Word2Vec(**TINY)
    model.build_vocab(lee_path)
    model.train(lee_path, checkpoint=str(folder / "run.ckpt.npz"), checkpoint_every=0)
    model.save(str(folder / "m.npz"))
    model.tree.save(str(folder / "tree.npz"), model.vocab)
    return {"corpus": lee_path, "folder": folder,
            "model": damage(folder / "m.npz", folder / "bad-model.npz"),
            "checkpoint": damage(folder / "run.ckpt.npz", folder / "bad.ckpt.npz"),
            "tree": damage(folder / "tree.npz", folder / "bad-tree.npz")}


def one_line_exit_2(main, argv, capsys, outputs=()):
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1 and "damaged or incomplete" in lines[0], err
    assert "Traceback" not in err
    for path in outputs:
        assert not path.exists(), f"{path} was written"
    return lines[0]


FAST = ["--epochs", "1", "--dim", "16", "--min-count", "3", "--workers", "1", "--no-progress"]


def test_training_commands_refuse_a_damaged_model_or_checkpoint_in_one_line(files, capsys,
                                                                           tmp_path):
    out = tmp_path / "out.npz"
    line = one_line_exit_2(train.main, [files["corpus"], "-o", out, *FAST, "--resume",
                                        files["checkpoint"]], capsys, [out])
    assert files["checkpoint"] in line
    one_line_exit_2(train.main, [files["corpus"], "-o", out, "--epochs", "1", "--no-progress",
                                 "--init-model", files["model"]], capsys, [out])
    one_line_exit_2(train.main, [files["corpus"], "-o", out, *FAST, "--init-vectors",
                                 files["model"]], capsys, [out])
    one_line_exit_2(train.main, [files["corpus"], "-o", out, *FAST, "--tree", files["tree"]],
                    capsys, [out])


def test_reading_commands_refuse_a_damaged_model_in_one_line(files, capsys, tmp_path):
    one_line_exit_2(score.main, [files["model"], files["corpus"], "--workers", "1",
                                 "--json", tmp_path / "s.json"], capsys, [tmp_path / "s.json"])
    one_line_exit_2(query.main, [files["model"], "government"], capsys)
    one_line_exit_2(evaluate.main, [files["model"], "--tasks", "similarity", "-q"], capsys)
    one_line_exit_2(tree_cli.main, ["stats", files["model"]], capsys)
    one_line_exit_2(tree_cli.main, ["show", files["tree"], "government"], capsys)
    one_line_exit_2(tree_cli.main, ["clusters", files["model"]], capsys)


def test_the_python_api_raises_the_same_one_line_error(files):
    from semhuff.gensim import Word2Vec as GensimWord2Vec
    from semhuff.trees.base import load_tree_file
    for load in (lambda: Word2Vec.load(files["model"], progress=False),
                 lambda: Word2Vec.resume(files["checkpoint"], progress=False),
                 lambda: GensimWord2Vec.load(files["model"])):
        with pytest.raises(ModelFileError, match="damaged or incomplete"):
            load()
    with pytest.raises(TreeError, match="damaged or incomplete"):
        load_tree_file(files["tree"])  # (the damage is in its vocabulary, which this reads)


def test_an_undamaged_copy_still_loads(files):
    """The check reads what it always read: the intact files load to the same weights."""
    folder = files["folder"]
    model = Word2Vec.load(str(folder / "m.npz"), progress=False)
    copy = folder / "copy.npz"
    shutil.copy(folder / "m.npz", copy)
    assert np.array_equal(Word2Vec.load(str(copy), progress=False).syn0, model.syn0)
