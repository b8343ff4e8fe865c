"""semhuff-train --report: settings, timings, words/s and the loss per chunk and per epoch as
JSON, and a PNG of the curve beside it."""
import json

import numpy as np
import pytest

from semhuff import Corpus, Word2Vec
from semhuff.encode import encode_chunks
from semhuff.cli.train import main as train_main
from semhuff.training_report import plot_path, write_training_report


def test_cli_report_json_and_png(tmp_path, capsys):
    out, report = tmp_path / "v.bin", tmp_path / "run.json"
    code = train_main(["lee", "-o", str(out), "--epochs", "2", "--dim", "12", "--no-progress", "-q",
                       "--workers", "1", "--report", str(report)])
    assert code == 0, capsys.readouterr().err
    doc = json.loads(report.read_text())
    assert doc["settings"]["vector_size"] == 12 and doc["settings"]["epochs"] == 2
    assert "hierarchical softmax" in doc["settings"]["output_layer"]
    assert doc["output"] == str(out) and doc["corpus"][0].endswith("lee_background.cor")
    assert [e["epoch"] for e in doc["epochs"]] == [1, 2]
    tokens = doc["settings"]["corpus_tokens"]
    assert all(e["raw_words"] == tokens for e in doc["epochs"])
    speed, timings = doc["speed"], doc["timings"]
    assert speed["raw_words"] == 2 * tokens
    assert speed["words_per_second"] == pytest.approx(2 * tokens / timings["training_seconds"])
    assert timings["total_seconds"] >= timings["training_seconds"] > 0
    for epoch in doc["epochs"]:
        chunks = [c for c in doc["chunks"] if c["epoch"] == epoch["epoch"]]
        assert sum(c["raw_words"] for c in chunks) == epoch["raw_words"]
        assert sum(c["loss"] for c in chunks) == pytest.approx(epoch["loss"])
        assert epoch["loss_per_prediction"] == pytest.approx(epoch["loss"] / epoch["predictions"])
    assert doc["epochs"][1]["loss_per_prediction"] < doc["epochs"][0]["loss_per_prediction"]
    assert (tmp_path / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_has_one_record_per_chunk(tmp_path, lee_path):
    model = Word2Vec(lee_path, vector_size=8, min_count=3, epochs=2, workers=2, chunk_words=10_000,
                     progress=False)
    run = model.reports[-1]
    per_epoch = len(list(encode_chunks(Corpus(lee_path), model.vocab.index, 10_000)))
    assert per_epoch >= 5 and len(run.chunks) == 2 * per_epoch
    by_epoch = {0: 0.0, 1: 0.0}
    for chunk in run.chunks:
        by_epoch[chunk.epoch] += chunk.loss
    assert by_epoch[0] == pytest.approx(run.epochs[0].loss) and by_epoch[1] == pytest.approx(run.epochs[1].loss)
    png = write_training_report(str(tmp_path / "r"), model, run)
    assert png == plot_path(str(tmp_path / "r")) == str(tmp_path / "r.png")
    assert len(json.loads((tmp_path / "r").read_text())["chunks"]) == len(run.chunks)


def test_unwritable_report_fails_before_training(tmp_path, capsys):
    code = train_main(["lee", "-o", str(tmp_path / "v.bin"), "--report", str(tmp_path / "no" / "r.json")])
    assert code == 2 and "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "v.bin").exists()


def test_chunk_records_stay_bounded_and_keep_the_sums():
    """A billion-token run has ~20,000 chunks: past the limit neighbours of one epoch merge, so
    the records (and the report) stay bounded, and every sum and epoch boundary survives."""
    from semhuff.trainer import ChunkStats, record_chunk
    records, limit = [], 64
    rng = np.random.default_rng(0)
    added = [ChunkStats(e, n, int(rng.integers(1, 1000)), 0, int(rng.integers(1, 50)),
                        float(rng.random()), float(e * 1000 + n), 1)
             for e in range(3) for n in range(500)]
    for r in added:
        record_chunk(records, r, limit)
        assert len(records) <= limit
    for e in range(3):
        mine = [r for r in records if r.epoch == e]
        theirs = [r for r in added if r.epoch == e]
        assert sum(r.raw_words for r in mine) == sum(r.raw_words for r in theirs)
        assert sum(r.pairs for r in mine) == sum(r.pairs for r in theirs)
        assert sum(r.loss for r in mine) == pytest.approx(sum(r.loss for r in theirs))
        assert sum(r.count for r in mine) == 500
        assert mine[-1].at_seconds == theirs[-1].at_seconds
    starts = [r.epoch * 1000 + r.number for r in records]
    assert starts == sorted(starts)
