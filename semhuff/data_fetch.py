"""Getting the data folder: every file of the manifest from its public source, checked.

``semhuff-data fetch [NAME ...]`` (evaluation sets beyond gensim's copies, WordNet, the
POS corpora were found through ``$SEMHUFF_DATA`` / ``shared/data``, but nothing downloaded them or
said where from). Each manifest row (``data/manifest.csv``) names its file's URLs: a file itself
(GitHub raw at a pinned commit) or ``URL#MEMBER``, a member of an archive (WordNet and the
thesaurus are files of Debian packages). A fetch

* skips a file that is there with the manifest's size and sha256, and takes gensim's bundled
  copy (``gensim/test/test_data``) when it is the manifest's file, without a download;
* downloads into ``<root>/.downloads/`` as ``NAME.part`` and resumes a partial one with an HTTP
  range request (a server that ignores it sends the whole file again, which is then taken);
* checks every file's size and sha256 before it is moved into place (atomically): a file that
  differs is an error, and nothing of it is kept; an archive is downloaded once for all the
  files it holds and removed when they are all out;
* never replaces a file that is there but differs unless asked (``replace=True``).

The licence of each data set is the caller's to show (``DatasetPlan.licence``) before its files
are fetched. Tests run against a local HTTP server (``tests/test_data_fetch.py``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import logging
import os
import re
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence

from .data_paths import ManifestEntry, gensim_test_file, manifest, sha256_of
from .errors import SemhuffError

logger = logging.getLogger(__name__)

DOWNLOADS = ".downloads"   # under the data root: partial and whole archives, until used
BLOCK = 1 << 20
TIMEOUT = 60.0


class FetchError(SemhuffError):
    """A file could not be fetched (no source reachable, or not the manifest's file)."""


@dataclasses.dataclass(frozen=True)
class Source:
    url: str
    member: Optional[str] = None  # a file inside the archive at ``url``

    @classmethod
    def parse(cls, text: str) -> "Source":
        url, _, member = text.partition("#")
        return cls(url, member or None)


def _origin(source: str) -> str:
    """``GitHub owner/repo@commit`` / ``PyPI gensim 4.4.0 wheel`` / ``Debian pkg version
    (suite)`` of a manifest row's source, without the file's path."""
    match = re.match(r"(GitHub \S+|PyPI [^,]+|Debian [^)]+\))", source)
    return match.group(1) if match else source


def sources(entry: ManifestEntry) -> List[Source]:
    """The places ``entry`` can be downloaded from, in the order tried."""
    return [Source.parse(item) for item in entry.url.split()]


@dataclasses.dataclass
class DatasetPlan:
    """One data set of the manifest (its rows share ``dataset``) and what a fetch does for it."""

    name: str
    task: str
    entries: List[ManifestEntry]

    @property
    def licence(self) -> str:
        return "; ".join(dict.fromkeys(e.licence for e in self.entries))

    @property
    def source(self) -> str:
        """Where its files come from: the repositories or packages, not each file."""
        return "; ".join(dict.fromkeys(_origin(e.source) for e in self.entries))

    @property
    def bytes(self) -> int:
        return sum(e.bytes for e in self.entries)

    @property
    def downloadable(self) -> bool:
        return all(e.url for e in self.entries)


def datasets(entries: Optional[Sequence[ManifestEntry]] = None) -> Dict[str, DatasetPlan]:
    """The manifest's data sets by name, in manifest order."""
    out: Dict[str, DatasetPlan] = {}
    for entry in manifest() if entries is None else entries:
        plan = out.setdefault(entry.dataset, DatasetPlan(entry.dataset, entry.task, []))
        plan.entries.append(entry)
    return out


def select(names: Sequence[str], entries: Optional[Sequence[ManifestEntry]] = None
           ) -> List[DatasetPlan]:
    """The data sets ``names`` asks for: a data set's name (``ws353``), a task (``pos``) or a
    folder of the data root (``wordnet``); none: every one. An unknown name is an error
    listing the known ones."""
    found = datasets(entries)
    if not names:
        return list(found.values())
    chosen: Dict[str, DatasetPlan] = {}
    unknown = []
    for name in names:
        hits = [p for p in found.values() if name in (p.name, p.task)
                or any(e.path.split("/", 1)[0] == name for e in p.entries)]
        if not hits:
            unknown.append(name)
        chosen.update((p.name, p) for p in hits)
    if unknown:
        raise FetchError(f"no data set {', '.join(unknown)}: give data sets "
                         f"({', '.join(found)}), tasks or folders")
    return [p for name, p in found.items() if name in chosen]


def file_state(root: Path, entry: ManifestEntry) -> str:
    """``ok`` (there, the manifest's size and sha256), ``missing`` or ``differs``."""
    path = Path(root) / entry.path
    if not path.is_file():
        return "missing"
    if path.stat().st_size == entry.bytes and sha256_of(path) == entry.sha256:
        return "ok"
    return "differs"


@dataclasses.dataclass
class FetchResult:
    fetched: List[str] = dataclasses.field(default_factory=list)    # paths downloaded / copied
    present: List[str] = dataclasses.field(default_factory=list)    # already there, checked
    differs: List[str] = dataclasses.field(default_factory=list)    # there, other content: kept
    failed: Dict[str, str] = dataclasses.field(default_factory=dict)  # path -> why
    downloaded_bytes: int = 0


def fetch(plans: Iterable[DatasetPlan], root: os.PathLike, replace: bool = False,
          progress: Optional[Callable[[str, int, Optional[int]], None]] = None) -> FetchResult:
    """Every file of ``plans`` into ``root`` (see the module's docstring). ``progress(label,
    bytes so far, total or None)`` is called as a download goes. A data set with no URL (the
    corpus) is a ``FetchError``; a file no source gives as the manifest lists it goes to
    ``failed`` with the reason, and the others are fetched all the same."""
    root = Path(root)
    result = FetchResult()
    plans = list(plans)
    wanted: List[ManifestEntry] = []
    for plan in plans:
        if not plan.downloadable:
            raise FetchError(f"{plan.name}: no single file to download ({plan.source}); "
                             f"see data/README.md")
        for entry in plan.entries:
            state = file_state(root, entry)
            if state == "ok":
                result.present.append(entry.path)
            elif state == "differs" and not replace:
                result.differs.append(entry.path)
            else:
                wanted.append(entry)
    archives = _Archives(root / DOWNLOADS, progress, result)
    for entry in wanted:
        try:
            if not _from_gensim(entry, root):
                _fetch_entry(entry, root, archives)
        except FetchError as exc:
            result.failed[entry.path] = str(exc)
            continue
        result.fetched.append(entry.path)
    if not result.failed:
        archives.remove()  # all out; a failed fetch keeps its downloads to resume from
    return result


def _from_gensim(entry: ManifestEntry, root: Path) -> bool:
    """The file from gensim's bundled test data when that is the manifest's file (gensim's
    copies of WS353, SimLex-999 and the analogy questions): no download."""
    if "gensim/test/test_data" not in entry.source:
        return False
    try:
        local = gensim_test_file(entry.path.rsplit("/", 1)[1])
    except ImportError:
        return False
    if local is None or local.stat().st_size != entry.bytes or sha256_of(local) != entry.sha256:
        return False
    with open(local, "rb") as fh:
        _place(fh, root / entry.path, entry)
    logger.info("%s: gensim's bundled copy", entry.path)
    return True


def _fetch_entry(entry: ManifestEntry, root: Path, archives: "_Archives") -> None:
    problems = []
    for source in sources(entry):
        try:
            if source.member is None:
                part = archives.download(source.url, entry.bytes)
                with open(part, "rb") as fh:
                    _place(fh, root / entry.path, entry)
                archives.done(source.url)
            else:
                archive = archives.download(source.url, None)
                with _open_member(archive, source.member) as fh:
                    _place(fh, root / entry.path, entry)
            return
        except (OSError, urllib.error.URLError, FetchError, tarfile.TarError,
                zipfile.BadZipFile) as exc:
            problems.append(f"{source.url}: {exc}")
            logger.info("%s: %s", entry.path, problems[-1])
    raise FetchError(f"cannot fetch {entry.path}: {'; '.join(problems) or 'no source listed'}")


def _place(fh, target: Path, entry: ManifestEntry) -> None:
    """Copy ``fh`` to ``target`` through a temp file beside it, checked against the manifest
    (size, sha256) before the rename: a file that differs is never put in place."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.fetch-{os.getpid()}.tmp")
    digest, size = hashlib.sha256(), 0
    try:
        with open(tmp, "wb") as out:
            for block in iter(lambda: fh.read(BLOCK), b""):
                digest.update(block)
                size += len(block)
                out.write(block)
        if size != entry.bytes or digest.hexdigest() != entry.sha256:
            raise FetchError(f"{entry.path}: not the manifest's file ({size:,} bytes, sha256 "
                             f"{digest.hexdigest()[:12]}..., expected {entry.bytes:,} bytes, "
                             f"{entry.sha256[:12]}...): the source changed?")
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


class _Archives:
    """Downloads by URL into the downloads folder, each once a fetch: ``NAME.part`` while it
    comes (resumed by a range request), ``NAME`` when whole."""

    def __init__(self, folder: Path, progress, result: FetchResult):
        self.folder, self.progress, self.result = folder, progress, result
        self.whole: Dict[str, Path] = {}

    def _name(self, url: str) -> str:
        tail = url.rstrip("/").rsplit("/", 1)[-1] or "download"
        return f"{hashlib.sha256(url.encode()).hexdigest()[:10]}-{tail}"

    def download(self, url: str, expected: Optional[int]) -> Path:
        if url in self.whole:
            return self.whole[url]
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.folder / self._name(url)
        if not final.exists():
            part = final.with_name(final.name + ".part")
            self._download(url, part, expected)
            os.replace(part, final)
        self.whole[url] = final
        return final

    def _download(self, url: str, part: Path, expected: Optional[int]) -> None:
        have = part.stat().st_size if part.exists() else 0
        if expected is not None and have > expected:  # not this file's beginning
            part.unlink()
            have = 0
        request = urllib.request.Request(url, headers={"User-Agent": "semhuff-data"})
        if have:
            request.add_header("Range", f"bytes={have}-")
        try:
            response = urllib.request.urlopen(request, timeout=TIMEOUT)
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:  # the part is the whole file already
                return
            raise
        with response:
            resumed = have and response.status == 206
            if have and not resumed:
                logger.info("%s: the server sent the whole file again (no range support)", url)
                have = 0
            length = response.headers.get("Content-Length")
            total = have + int(length) if length and length.isdigit() else expected
            label = url.rsplit("/", 1)[-1]
            with open(part, "ab" if resumed else "wb") as out:
                got = have
                for block in iter(lambda: response.read(BLOCK), b""):
                    out.write(block)
                    got += len(block)
                    self.result.downloaded_bytes += len(block)
                    if self.progress is not None:
                        self.progress(label, got, total)
        if total is not None and got != total:
            raise FetchError(f"{url}: the download stopped at {got:,} of {total:,} bytes "
                             f"(run the fetch again to resume it)")

    def done(self, url: str) -> None:
        """A plain file's download has been placed: it is not kept."""
        path = self.whole.pop(url, None)
        if path is not None and path.exists():
            path.unlink()

    def remove(self) -> None:
        """The downloads, every file taken out of them, and their folder when empty."""
        for path in self.whole.values():
            if path.exists():
                path.unlink()
        self.whole.clear()
        if self.folder.exists() and not any(self.folder.iterdir()):
            self.folder.rmdir()


def _open_member(archive: Path, member: str):
    """A file object over ``member`` of ``archive``: a Debian package (its data.tar.*), a zip
    or a tar file (told apart by content)."""
    with open(archive, "rb") as fh:
        head = fh.read(8)
    if head == b"!<arch>\n":
        return _tar_member(_deb_data(archive), member)
    if zipfile.is_zipfile(archive):
        archive_zip = zipfile.ZipFile(archive)
        return archive_zip.open(_member_name(archive_zip.namelist(), member))
    return _tar_member(tarfile.open(archive), member)


def _member_name(names: Sequence[str], member: str) -> str:
    wanted = member.lstrip("./")
    for name in names:
        if name.lstrip("./") == wanted:
            return name
    raise FetchError(f"the archive holds no {member}")


def _deb_data(deb: Path) -> tarfile.TarFile:
    """The data.tar.{xz,gz,bz2} of a Debian package (an ``ar`` archive)."""
    with open(deb, "rb") as fh:
        fh.read(8)
        while True:
            header = fh.read(60)
            if len(header) < 60:
                raise FetchError(f"{deb.name}: a Debian package without data.tar")
            name = header[:16].decode("ascii", "replace").strip().rstrip("/")
            size = int(header[48:58].decode("ascii").strip())
            if name.startswith("data.tar"):
                data = fh.read(size)
                if name.endswith(".zst"):
                    raise FetchError(f"{deb.name}: data.tar.zst needs zstandard, which Python's "
                                     f"library lacks")
                return tarfile.open(fileobj=io.BytesIO(data))
            fh.seek(size + (size & 1), os.SEEK_CUR)


class _TarMember(io.BufferedIOBase):
    """A tar member's file object that closes its tar file with it."""

    def __init__(self, tar: tarfile.TarFile, name: str):
        self.tar, self.raw = tar, tar.extractfile(name)
        if self.raw is None:
            raise FetchError(f"{name} is not a file in the archive")

    def read(self, n: int = -1) -> bytes:
        return self.raw.read(n)

    def close(self) -> None:
        self.raw.close()
        self.tar.close()
        super().close()


def _tar_member(tar: tarfile.TarFile, member: str) -> _TarMember:
    return _TarMember(tar, _member_name(tar.getnames(), member))
