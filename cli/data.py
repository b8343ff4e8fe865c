"""semhuff-data: the data folder's data sets, from their public sources.

    semhuff-data list [--data-dir DIR]                   # each data set: there?, size, source, licence
    semhuff-data fetch [NAME ...] [--data-dir DIR]       # download what is missing, checked
    semhuff-data check [--data-dir DIR]                  # every file against the manifest

NAME is a data set (``ws353``, ``wordnet``, ``conll2000`` ...), a task (``similarity``,
``pos``) or a folder of the data root (``wordsim``, ``ud_english``); none: every data set. The
data folder is the one semhuff reads (``$SEMHUFF_DATA``, else the one found, else
``~/.local/share/semhuff``: data/README.md) unless ``--data-dir`` says another. Each data
set's licence is printed before its files are fetched; every file is checked against the
manifest's sha256; an interrupted download resumes when the command is run again
(semhuff.data_fetch). The training corpus was assembled from several sources and is not one
download: data/provenance/corpus.md says how.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from semhuff.data_fetch import DOWNLOADS, FetchError, datasets, fetch, file_state, select

from .common import HelpFormatter, cli_main, console_script

PROG = "semhuff-data"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, formatter_class=HelpFormatter,
                                description="List, fetch and check the data sets semhuff "
                                            "evaluates with (the manifest's: data/manifest.csv).")
    p.add_argument("-v", "--verbose", action="count", default=0, help="log each step")
    p.add_argument("-q", "--quiet", action="count", default=0, help="only errors")
    sub = p.add_subparsers(dest="command", required=True)

    def common(command):
        command.add_argument("--data-dir", type=Path,
                             help="the data folder (default: the one semhuff reads; "
                                  "data/README.md)")
        command.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                             help="log each step")
        command.add_argument("-q", "--quiet", action="count", default=argparse.SUPPRESS,
                             help="only errors (fetch: no licence lines, no progress)")
        return command

    listing = common(sub.add_parser("list", help="each data set: there or not, size, source, "
                                    "licence", formatter_class=HelpFormatter))
    listing.set_defaults(run=cmd_list)
    get = common(sub.add_parser("fetch", help="download the missing files of data sets, "
                                "checked against the manifest", formatter_class=HelpFormatter))
    get.add_argument("names", nargs="*", metavar="NAME",
                     help="data sets, tasks or folders (default: all)")
    get.add_argument("--replace", action="store_true",
                     help="also replace files that are there but differ from the manifest")
    get.set_defaults(run=cmd_fetch)
    check = common(sub.add_parser("check", help="every file against the manifest (size, "
                                  "sha256), as semhuff-eval --check-data",
                                  formatter_class=HelpFormatter))
    check.set_defaults(run=cmd_check)
    return p


def _root(args) -> Path:
    from semhuff.data_paths import data_root
    return Path(args.data_dir) if args.data_dir is not None else data_root()


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} kB"


def cmd_list(args) -> int:
    root = _root(args)
    print(f"data folder: {root}")
    for plan in datasets().values():
        states = [file_state(root, e) for e in plan.entries]
        state = ("there" if all(s == "ok" for s in states) else "missing"
                 if all(s == "missing" for s in states)
                 else f"{states.count('ok')} of {len(states)} files there")
        how = "fetch" if plan.downloadable else "not one download"
        print(f"{plan.name:12s} {plan.task:10s} {state:18s} {_size(plan.bytes):>9s}  "
              f"[{how}] {plan.source}; licence: {plan.licence}")
    return 0


def cmd_fetch(args) -> int:
    root = _root(args)
    plans = select(args.names)
    named = set(args.names)
    if named:
        assembled = [p.name for p in plans if not p.downloadable]
        if assembled:
            raise FetchError(f"{', '.join(assembled)}: no single file to download (assembled "
                             f"from several public sources: data/provenance/corpus.md)")
    loud = args.quiet == 0
    fetched = present = downloaded = 0
    failed = {}
    for plan in plans:
        if not plan.downloadable:
            if loud:
                print(f"{plan.name}: not downloaded: assembled from several public sources "
                      f"(data/provenance/corpus.md says which and how)")
            continue
        if loud:
            print(f"{plan.name} ({plan.task}): {len(plan.entries)} file(s), "
                  f"{_size(plan.bytes)}, from {plan.source}\n  licence: {plan.licence}",
                  flush=True)
        result = fetch([plan], root, replace=args.replace, progress=_bar() if loud else None)
        for path in result.differs:
            print(f"{PROG}: warning: {root / path} differs from the manifest: kept (--replace "
                  f"fetches the manifest's)", file=sys.stderr)
        for path, why in result.failed.items():
            print(f"  FAILED {path}: {why}")
        failed.update(result.failed)
        fetched, present = fetched + len(result.fetched), present + len(result.present)
        downloaded += result.downloaded_bytes
    if loud:
        print(f"{fetched} file(s) fetched ({_size(downloaded)} downloaded), {present} already "
              f"there, in {root}")
        hint = _where_hint(root)
        if hint:
            print(hint)
    if failed:
        raise FetchError(f"{len(failed)} file(s) could not be fetched (the first: "
                         f"{next(iter(failed.values()))}); the same command fetches what is "
                         f"still missing and resumes partial downloads")
    return 0


def _where_hint(root: Path) -> str:
    """How semhuff finds ``root`` when its search would not (``--data-dir`` elsewhere)."""
    from semhuff.data_paths import find_data_root
    found = find_data_root()
    if found is not None and Path(found).resolve() == root.resolve():
        return ""
    return f"semhuff reads its data from {found or 'nowhere yet'}: export SEMHUFF_DATA={root}"


def _bar():
    """A tqdm bar a download, on a terminal only."""
    from tqdm.auto import tqdm
    bars = {}

    def show(label: str, done: int, total: Optional[int]) -> None:
        bar = bars.get(label)
        if bar is None:
            bar = bars[label] = tqdm(total=total, unit="B", unit_scale=True, desc=label,
                                     leave=False, disable=None)
        bar.update(done - bar.n)
        if total is not None and done >= total:
            bar.close()
    return show


def cmd_check(args) -> int:
    from semhuff.data_paths import check_entry
    root = _root(args)
    checks = [check_entry(root, e) for plan in datasets().values() for e in plan.entries]
    for check in checks:
        print(f"{check.status:14s} {check.entry.path}  ({check.entry.task}/{check.entry.dataset})")
    bad = sum(not c.ok for c in checks)
    print(f"{len(checks) - bad} of {len(checks)} files as the manifest lists them in {root}")
    return 1 if bad or not checks else 0


def main(argv: Optional[List[str]] = None) -> int:
    def interrupted(args) -> str:
        if getattr(args, "command", None) != "fetch":
            return ""
        return (f"the files fetched are in place, and what was being downloaded is kept in "
                f"{_root(args) / DOWNLOADS}: the same command resumes it")
    return cli_main(PROG, build_parser, lambda args: args.run(args), argv, interrupted)


console = console_script(main)  # the console script (setup.cfg)

if __name__ == "__main__":
    console()
