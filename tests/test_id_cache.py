"""The first epoch's id cache: in the folder asked for, without a name (nothing is left when
the process dies), refused up front when the folder cannot hold it, and dropped with a fallback
to re-reading the corpus when the disk fills while it is written (the same vectors either way)."""
import os
from collections import namedtuple

import numpy as np
import pytest

from semhuff import Word2Vec, id_cache
from semhuff.encode import EpochSource
from semhuff.errors import CacheSpaceError

SMALL = dict(vector_size=16, min_count=3, epochs=3, workers=1, seed=2, progress=False,
             chunk_words=5000)
Usage = namedtuple("Usage", "total used free")


def test_the_cache_has_no_name_and_reads_back(tmp_path):
    sentences = [["a", "b", "c"], ["b", "zz", "a"], ["c"]] * 50
    source = EpochSource(sentences, {"a": 0, "b": 1, "c": 2}, chunk_words=10,
                         cache_dir=str(tmp_path))
    first = list(source.epoch())
    assert os.listdir(tmp_path) == [] and source.cache_bytes > 0
    second = list(source.epoch())
    assert [c.ids.tolist() for c in first] == [c.ids.tolist() for c in second]
    source.close()


def test_without_o_tmpfile_the_name_goes_at_once_and_stale_ones_are_removed(tmp_path, monkeypatch):
    monkeypatch.delattr(os, "O_TMPFILE", raising=False)
    dead = subprocess_pid_that_exited()
    stale = tmp_path / f".ids.semhuff-{dead}-abc123.tmp"
    stale.write_bytes(b"x" * 100)
    alive = tmp_path / f".ids.semhuff-{os.getppid()}-abc123.tmp"
    alive.write_bytes(b"y")
    cache = id_cache.IdCache(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == [alive.name]  # ours has no name; the dead one's is gone
    cache.close()


def subprocess_pid_that_exited():
    import subprocess
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_too_little_space_is_refused_before_training(tmp_path, lee_path, monkeypatch):
    monkeypatch.setattr(id_cache.shutil, "disk_usage",
                        lambda path: Usage(1 << 30, 1 << 30, (64 << 20) + 100_000))
    model = Word2Vec(**SMALL, tmp_dir=str(tmp_path))
    model.build_vocab(lee_path)
    with pytest.raises(CacheSpaceError, match=r"needs about 0.2 MB in .*67.1 MB left free .* only 67.2 MB is free"):
        model.train(lee_path)
    model.epochs = 1  # one epoch never reads the cache: nothing is written, nothing checked
    assert model.train(lee_path).id_cache_bytes == 0
    with pytest.raises(CacheSpaceError, match="does not exist"):
        Word2Vec(lee_path, **SMALL, tmp_dir=str(tmp_path / "nope"))


def test_a_disk_that_fills_while_caching_falls_back_to_the_corpus(tmp_path, lee_path, monkeypatch,
                                                                  caplog):
    reference = Word2Vec(lee_path, **SMALL, tmp_dir=str(tmp_path))
    size = reference.reports[0].id_cache_bytes
    assert 4 * reference.vocab.retained_tokens < size <= id_cache.estimate_bytes(
        reference.vocab.retained_tokens, SMALL["chunk_words"])
    real = id_cache.IdCache.append

    def append(self, chunk):
        if self.chunks == 3:
            raise CacheSpaceError(self._full_message("No space left on device"))
        real(self, chunk)
    monkeypatch.setattr(id_cache.IdCache, "append", append)
    model = Word2Vec(lee_path, **SMALL, tmp_dir=str(tmp_path))
    assert "ran out of disk space" in caplog.text and "re-read" in caplog.text
    np.testing.assert_array_equal(model.syn0, reference.syn0)
    assert model.reports[0].raw_words == reference.reports[0].raw_words
    one_shot = (s for s in [["a", "b"] * 3000] * 10)
    model = Word2Vec(**{**SMALL, "min_count": 1}, tmp_dir=str(tmp_path))
    model.build_vocab([["a", "b"] * 3000] * 10)
    with pytest.raises(CacheSpaceError, match="one-shot"):
        model.train(one_shot)


def test_a_full_disk_while_writing_is_a_cache_space_error(tmp_path):
    cache = id_cache.IdCache(str(tmp_path))
    chunk = id_cache.Chunk(np.arange(10_000, dtype=np.int32), np.array([10_000]), 10_000)
    cache.append(chunk)
    cache._fh.close()
    cache._fh = os.fdopen(os.open("/dev/full", os.O_RDWR), "w+b")  # every write: ENOSPC
    with pytest.raises(CacheSpaceError, match=r"ran out of disk space after 0.0 MB \(No space"):
        cache.append(chunk)
    cache.close()
