"""Output files as users expect them (issue 12.4): the umask's permissions, an overwritten
file keeps its mode, symlinks and special files are written through, and no temp file outlives
its process (SIGTERM removes it, a SIGKILLed run's is removed by the next write)."""
import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading

import pytest

from semhuff.io_utils import atomic_output, remove_stale_temp_files

FAST = ["--epochs", "1", "--dim", "8", "--no-progress", "-q", "--workers", "1", "--min-count", "20"]


@pytest.fixture
def umask():
    old = os.umask(0o022)
    try:
        yield os.umask
    finally:
        os.umask(old)


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _write(path, data=b"new"):
    with atomic_output(str(path)) as fh:
        fh.write(data)


@pytest.mark.parametrize("mask,expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_file_gets_the_umask_permissions(tmp_path, umask, mask, expected):
    umask(mask)
    _write(tmp_path / "v.bin")
    assert _mode(tmp_path / "v.bin") == expected
    assert os.listdir(tmp_path) == ["v.bin"]


def test_overwritten_file_keeps_its_mode(tmp_path, umask):
    out = tmp_path / "v.bin"
    out.write_bytes(b"old")
    os.chmod(out, 0o640)
    umask(0o077)
    _write(out)
    assert out.read_bytes() == b"new" and _mode(out) == 0o640


def test_symlink_is_written_through(tmp_path, umask):
    real = tmp_path / "store" / "vectors.bin"
    real.parent.mkdir()
    real.write_bytes(b"old")
    os.chmod(real, 0o644)
    link = tmp_path / "v.bin"
    link.symlink_to(real)
    _write(link)
    assert link.is_symlink() and real.read_bytes() == b"new" and _mode(real) == 0o644
    dangling = tmp_path / "d.bin"
    dangling.symlink_to(tmp_path / "store" / "later.bin")
    _write(dangling)
    assert dangling.is_symlink() and (tmp_path / "store" / "later.bin").read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path / "store")) == ["later.bin", "vectors.bin"]


def test_fifo_is_written_directly(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    _write(fifo, b"through the pipe")
    reader.join(10)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and os.listdir(tmp_path) == ["pipe"]


def test_train_to_dev_stdout(tmp_path, lee_path):
    proc = subprocess.run([sys.executable, "-m", "semhuff.cli.train", lee_path, "-o", "/dev/stdout",
                           "--format", "text", *FAST],
                          capture_output=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.decode().splitlines()
    words, dim = map(int, lines[0].split())
    assert dim == 8 and len(lines) == words + 1  # only the vectors on stdout
    assert os.listdir(tmp_path) == []
    # stdout redirected to a file (appending): written through the stream, not replaced
    out = tmp_path / "log.txt"
    out.write_text("before\n")
    with open(out, "a") as fh:
        proc = subprocess.run([sys.executable, "-m", "semhuff.cli.train", lee_path, "-o",
                               "/dev/stdout", "--format", "text", *FAST], stdout=fh,
                              stderr=subprocess.PIPE, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().splitlines()[:2] == ["before", lines[0]]
    assert os.listdir(tmp_path) == ["log.txt"]


SLOW_WRITER = textwrap.dedent("""
    import sys, time
    from semhuff.cli.common import run_cli
    from semhuff.io_utils import atomic_output
    def body():
        with atomic_output(sys.argv[1]) as fh:
            fh.write(b"partial")
            fh.flush()
            print("writing", flush=True)
            time.sleep(60)
    sys.exit(run_cli("writer", body))
""")


def _start_writer(path):
    proc = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    return proc


def test_sigterm_removes_the_temp_file_and_keeps_the_old_file(tmp_path):
    out = tmp_path / "v.bin"
    out.write_bytes(b"old")
    proc = _start_writer(out)
    assert len(os.listdir(tmp_path)) == 2  # the old file and the temp file
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 143 and "terminated" in proc.stderr.read()
    assert os.listdir(tmp_path) == ["v.bin"] and out.read_bytes() == b"old"


def test_temp_file_of_a_killed_run_is_removed_by_the_next_write(tmp_path):
    out = tmp_path / "v.bin"
    proc = _start_writer(out)
    proc.kill()
    proc.wait(20)
    (stale,) = os.listdir(tmp_path)
    assert stale.startswith(".v.bin.semhuff-") and stale.endswith(".tmp")
    other = tmp_path / ".other.txt.semhuff-1-abc.tmp"  # pid 1 is alive: never touched
    other.write_bytes(b"")
    _write(tmp_path / "w.bin")
    assert sorted(os.listdir(tmp_path)) == [other.name, "w.bin"]
    assert remove_stale_temp_files(str(tmp_path)) == 0
