"""The whole-process benchmark (issue 10): fresh gensim and semhuff processes, from start to the
written .bin, timed for wall and CPU; a failing child stops it with one line."""
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from gensim.models import KeyedVectors


@pytest.fixture(scope="module")
def bench():
    # this checkout's eval/bench/train.py, whichever checkout an editable install maps semhuff.eval to
    path = Path(__file__).resolve().parents[1] / "eval" / "bench" / "train.py"
    spec = importlib.util.spec_from_file_location("bench_train_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_whole_process_times_both_and_writes_loadable_vectors(bench, lee_path, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "MIN_REPEATS", 2)  # test only: the CLI wants 3 for a median
    out, keep = tmp_path / "bench.json", tmp_path / "vectors"
    assert bench.main(["--corpus", lee_path, "--mode", "whole", "--repeats", "2", "--threads", "1",
                       "--loss", "hs", "--epochs", "1", "--keep-vectors", str(keep), "--json", str(out)]) == 0
    whole = json.loads(out.read_text())["whole"]
    assert whole["startup_s"]["semhuff"] > 0 and whole["startup_s"]["gensim"] > 0
    (cell,) = whole["rows"]
    for name in ("gensim", "semhuff"):
        for key in ("wall_s", "cpu_s"):
            stats = cell[name][key]
            assert 0 < stats["min"] <= stats["median"] <= stats["max"]
        assert len(cell[name]["runs"]) == 2
        for rep, run in enumerate(cell[name]["runs"], 1):
            kv = KeyedVectors.load_word2vec_format(str(keep / f"{name}-hs-t1-r{rep}.bin"), binary=True)
            assert len(kv) == run["vocab"] > 1000 and kv.vector_size == 100
    assert cell["ratio"]["wall_s"] > 0 and cell["ratio"]["cpu_s"] > 0


def test_a_failing_child_is_one_line(bench):
    with pytest.raises(SystemExit, match=r"^bench_train: x failed \(exit 1\): boom$"):
        bench.timed_child([sys.executable, "-c", "import sys; sys.exit('boom')"], "x", 30)
    with pytest.raises(SystemExit, match="ran past --timeout 0.5 s"):
        bench.timed_child([sys.executable, "-c", "import time; time.sleep(5)"], "x", 0.5)


def test_fewer_than_three_repeats_refused(bench, lee_path, capsys):
    with pytest.raises(SystemExit) as stop:
        bench.main(["--corpus", lee_path, "--mode", "whole", "--repeats", "2"])
    assert stop.value.code == 2 and "--repeats must be at least 3" in capsys.readouterr().err
