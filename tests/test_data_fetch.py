"""semhuff-data fetch (issue 48: nothing downloaded the data or said where from), against a local
HTTP server (no network): files and archive members (a Debian package, a zip) checked against
the manifest, a partial download resumed with a range request, a wrong file refused, the
licence shown, what is there skipped; and the real manifest says where every file comes from."""
import csv
import hashlib
import io
import re
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from semhuff import data_fetch
from semhuff.cli import data as data_cli
from semhuff.data_paths import ManifestEntry, gensim_test_file

ROOT = Path(__file__).resolve().parents[1]


class Server:
    """Serves ``files`` (path -> bytes) with HTTP range requests; ``cut[path] = n`` ends that
    file's next response after n bytes (a dropped connection); ``requests`` logs (path, Range)."""

    def __init__(self):
        self.files, self.cut, self.requests = {}, {}, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                body = server.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                start = 0
                match = re.match(r"bytes=(\d+)-$", self.headers.get("Range") or "")
                if match:
                    start = int(match.group(1))
                    if start >= len(body):
                        self.send_error(416)
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body) - start))
                self.end_headers()
                end = len(body)
                if self.path in server.cut:
                    end = start + server.cut.pop(self.path)
                    self.close_connection = True
                self.wfile.write(body[start:end])

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def tar_xz(members):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:xz") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return out.getvalue()


def deb(members):
    """A Debian package: an ar archive of debian-binary, control.tar.xz and data.tar.xz."""
    out = io.BytesIO()
    out.write(b"!<arch>\n")
    for name, body in (("debian-binary", b"2.0\n"), ("control.tar.xz", tar_xz({})),
                       ("data.tar.xz", tar_xz(members))):
        out.write(f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n".encode())
        out.write(body + (b"\n" if len(body) % 2 else b""))
    return out.getvalue()


def entry(path, body, dataset, url, licence="licence-" , source="somewhere"):
    return ManifestEntry(path, "similarity", dataset, len(body),
                         hashlib.sha256(body).hexdigest(), source, licence + dataset, url)


@pytest.fixture
def site(monkeypatch):
    """A manifest of three data sets served locally: two plain files, two files of a .deb, one
    of a zip (the first URL of its mirrors missing), and a corpus with no download."""
    server = Server()
    big = bytes(range(256)) * 4096  # 1 MiB: big enough to be cut halfway
    a, b = b"king\tqueen\t8\n" * 50, big
    wn1, wn2, th = b"data of wordnet\n" * 100, b"index of wordnet\n" * 70, b"thesaurus\n" * 30
    server.files = {"/sim/a.txt": a, "/sim/b.txt": b,
                    "/pool/wordnet.deb": deb({"./usr/share/wordnet/data.x": wn1,
                                              "./usr/share/wordnet/index.x": wn2}),
                    "/th.zip": zip_of({"th/th.dat": th})}
    entries = [entry("wordsim/a.txt", a, "pairs", f"{server.url}/sim/a.txt"),
               entry("wordsim/b.txt", b, "pairs", f"{server.url}/sim/b.txt"),
               entry("wordnet/data.x", wn1, "wn", f"{server.url}/pool/wordnet.deb#usr/share/wordnet/data.x"),
               entry("wordnet/index.x", wn2, "wn", f"{server.url}/pool/wordnet.deb#usr/share/wordnet/index.x"),
               entry("thesaurus/th.dat", th, "th",
                     f"{server.url}/gone.zip#th/th.dat {server.url}/th.zip#th/th.dat"),
               entry("corpus/c.txt.gz", b"x", "corpus", "")]
    monkeypatch.setattr(data_fetch, "manifest", lambda: tuple(entries))
    yield server, entries
    server.close()


def zip_of(members):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, body in members.items():
            archive.writestr(name, body)
    return out.getvalue()


def run(capsys, *argv):
    code = data_cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_fetch_gets_every_file_checked_shows_licences_and_skips_what_is_there(site, tmp_path,
                                                                              capsys):
    server, entries = site
    code, out, err = run(capsys, "fetch", "--data-dir", tmp_path)
    assert code == 0, err
    for e in entries[:-1]:
        assert hashlib.sha256((tmp_path / e.path).read_bytes()).hexdigest() == e.sha256
    for name in ("pairs", "wn", "th"):  # each data set's licence, before its files
        assert f"  licence: licence-{name}" in out
    assert "corpus: not downloaded: assembled from several public sources" in out
    assert "5 file(s) fetched" in out
    assert [p for p, _ in server.requests].count("/pool/wordnet.deb") == 1  # once for both
    assert not (tmp_path / data_fetch.DOWNLOADS).exists()  # nothing left behind
    assert not list(tmp_path.rglob("*.tmp"))
    before = len(server.requests)
    code, out, _ = run(capsys, "fetch", "--data-dir", tmp_path)
    assert code == 0 and "0 file(s) fetched" in out and "5 already there" in out
    assert len(server.requests) == before
    code, out, _ = run(capsys, "check", "--data-dir", tmp_path)  # the corpus is the one missing
    assert code == 1 and "5 of 6 files as the manifest lists them" in out


def test_an_interrupted_download_resumes_where_it_stopped(site, tmp_path, capsys):
    server, entries = site
    size = entries[1].bytes
    server.cut["/sim/b.txt"] = size // 2 + 123
    code, out, err = run(capsys, "fetch", "pairs", "--data-dir", tmp_path)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "stopped at" in err and "the same command" in err
    parts = list((tmp_path / data_fetch.DOWNLOADS).glob("*.part"))
    assert [p.stat().st_size for p in parts] == [size // 2 + 123]
    assert not (tmp_path / "wordsim" / "b.txt").exists()
    code, out, err = run(capsys, "fetch", "pairs", "--data-dir", tmp_path)
    assert code == 0, err
    assert server.requests[-1] == ("/sim/b.txt", f"bytes={size // 2 + 123}-")
    assert (tmp_path / "wordsim" / "b.txt").read_bytes() == server.files["/sim/b.txt"]


def test_a_file_that_is_not_the_manifests_is_never_put_in_place(site, tmp_path, capsys):
    server, _ = site
    server.files["/sim/a.txt"] = b"something else\n"
    code, out, err = run(capsys, "fetch", "pairs", "--data-dir", tmp_path)
    assert code == 2 and "not the manifest's file" in out and "could not be fetched" in err
    assert not (tmp_path / "wordsim" / "a.txt").exists()
    assert (tmp_path / "wordsim" / "b.txt").exists()  # the other file of the set still came
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_differing_file_there_is_kept_unless_replace(site, tmp_path, capsys):
    target = tmp_path / "wordsim" / "a.txt"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"my own edit\n")
    code, _, err = run(capsys, "fetch", "pairs", "--data-dir", tmp_path)
    assert code == 0 and "differs from the manifest: kept" in err
    assert target.read_bytes() == b"my own edit\n"
    assert run(capsys, "fetch", "pairs", "--replace", "--data-dir", tmp_path)[0] == 0
    assert target.read_bytes() == site[0].files["/sim/a.txt"]


def test_names_choose_data_sets_and_an_unknown_one_is_an_error(site, tmp_path, capsys):
    code, out, _ = run(capsys, "fetch", "wordnet", "--data-dir", tmp_path)  # a folder's name
    assert code == 0 and (tmp_path / "wordnet" / "index.x").exists()
    assert not (tmp_path / "wordsim").exists()
    code, _, err = run(capsys, "fetch", "nosuch", "--data-dir", tmp_path)
    assert code == 2 and "no data set nosuch" in err and "pairs, wn, th, corpus" in err
    code, _, err = run(capsys, "fetch", "corpus", "--data-dir", tmp_path)
    assert code == 2 and "no single file to download" in err
    code, out, _ = run(capsys, "list", "--data-dir", tmp_path)
    assert code == 0 and re.search(r"wn +similarity +there", out)
    assert re.search(r"pairs +similarity +missing", out)


def test_gensims_bundled_copy_is_taken_without_a_download(monkeypatch, tmp_path, capsys):
    local = gensim_test_file("wordsim353.tsv")
    body = local.read_bytes()
    row = ManifestEntry("wordsim/wordsim353.tsv", "similarity", "ws353", len(body),
                        hashlib.sha256(body).hexdigest(),
                        "PyPI gensim wheel, gensim/test/test_data/wordsim353.tsv", "LGPL",
                        "http://127.0.0.1:9/never")  # nothing listens there
    monkeypatch.setattr(data_fetch, "manifest", lambda: (row,))
    code, out, err = run(capsys, "fetch", "--data-dir", tmp_path)
    assert code == 0, err
    assert (tmp_path / "wordsim" / "wordsim353.tsv").read_bytes() == body


def test_the_manifest_says_where_every_file_comes_from():
    rows = list(csv.DictReader(open(ROOT / "data" / "manifest.csv", encoding="utf-8")))
    pinned = re.compile(r"https://raw\.githubusercontent\.com/[\w.-]+/[\w.-]+/"
                        r"([0-9a-f]{40}|\d+\.\d+\.\d+)/\S+$|"
                        r"https://(deb|snapshot)\.debian\.org/\S+_all\.deb#\S+$")
    for row in rows:
        if row["dataset"] == "corpus":  # assembled from sources: its provenance says how
            assert row["url"] == ""
            continue
        urls = row["url"].split()
        assert urls and all(pinned.match(u) for u in urls), row["path"]
    for folder in {row["path"].split("/")[0] for row in rows}:  # provenance in the repository
        text = (ROOT / "data" / "provenance" / f"{folder}.md").read_text()
        assert re.search(r"GitHub|Debian|PyPI|npm", text) and re.search(r"[Ll]icen[cs]e", text), \
            folder
    assert set(data_fetch.datasets()) == {row["dataset"] for row in rows}
