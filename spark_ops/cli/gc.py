"""``mta-spark gc``: find and delete the windows no job uses any more
(:meth:`stores.Store.sweep`); no Spark."""

from __future__ import annotations

import os
import sys
import time

import stores
from stores.gc import sweep_listed

from .. import durations
from .errors import EXIT_OK, CLIError
from .options import Command
from .store import normalize_store, pinged

def age(text: str) -> float:
    """An age such as ``1d``, ``12h``, ``30m``, ``2w``, ``1d12h`` or a number
    of seconds (:mod:`spark_ops.durations`), in seconds."""
    import argparse

    try:
        return durations.seconds(text, "--older-than")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def span(seconds: float) -> str:
    """``seconds`` as the largest two units: 45s, 12m, 3h20m, 2d4h."""
    s = int(round(seconds))
    for unit, size, sub, subsize in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if s >= size:
            whole, rest = divmod(s, size)
            rest //= subsize
            return f"{whole}{unit}" + (f"{rest}{sub}" if rest else "")
    return f"{s}s"


def add_arguments(p) -> None:
    p.add_argument("--store", required=True, metavar="URL",
                   help="the store the jobs used: file:DIR, redis://..., couchbase://... (credentials from "
                        "the environment, as for run and stream)")
    p.add_argument("--older-than", required=True, type=age, metavar="AGE",
                   help="delete the windows not opened or checkpointed for this long: 30m, 12h, 1d, 1d12h, 2w. "
                        "Make it longer than any live job goes without touching a window: a streaming key's "
                        "longest quiet spell, a batch task's longest key")
    p.add_argument("--dry-run", action="store_true",
                   help="list the windows that would be deleted, delete nothing")
    p.add_argument("-v", "--verbose", action="store_true", help="list every window found, and full tracebacks")


def run(args, spark=None) -> int:
    url = normalize_store(args.store)
    if stores.scheme_of(url) == "file":  # opening a file store makes one: a mistyped path would sweep nothing
        from stores.urls import parse_file_url

        directory = parse_file_url(url)
        if not os.path.isdir(directory):
            raise CLIError(f"no store at {url}: {directory} is not a directory (give the store= the jobs used)")
    out = sys.stdout
    with pinged(url) as store:  # before anything is deleted: a usage error, as for run
        print(f"listing the windows of {store.url} (one metadata read each) ...", file=sys.stderr,
              flush=True)
        found = store.windows(args.older_than)
        orphans = [w for w in found if not w.held]
        print(f"store {store.url}: {len(found)} window{'s' * (len(found) != 1)}, {len(orphans)} not used for "
              f"{span(args.older_than)} or more", file=out, flush=True)
        for w in found if args.verbose else orphans if args.dry_run else ():
            print("  " + _describe(w), file=out)
        if args.dry_run:
            print(f"dry run: would delete {len(orphans)} window{'s' * (len(orphans) != 1)}; nothing deleted",
                  file=out)
            return EXIT_OK
        result = sweep_listed(store, found, progress=_Reporter())
    deleted = len(result.deleted)
    print(f"deleted {deleted} window{'s' * (deleted != 1)} of {result.found}, "
          f"kept {result.kept} (in use, or of unknown age)"
          + (f" and {len(result.changed)} used since they were listed" if result.changed else ""), file=out)
    return EXIT_OK


def _describe(w) -> str:
    used = "never recorded" if w.used is None else \
        time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(w.used)) + f" ({span(max(0.0, w.idle))} ago)"
    owner = f", opened by {w.owner}" if w.owner else ""
    held = "in use" if w.held else "orphan"
    return f"{w.name!r}: {held}, {w.kind}, last used {used}{owner}"


class _Reporter:
    """Sweep progress on stderr: a line every ``every`` seconds, and the last."""

    def __init__(self, every: float = 5.0) -> None:
        self.every = every
        self.last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - self.last >= self.every:
            self.last = now
            print(f"  deleting: {done}/{total}", file=sys.stderr, flush=True)


COMMAND = Command(
    name="gc",
    summary="delete the windows no job uses any more from a store",
    description="Find the windows in --store that nobody opened or checkpointed for --older-than (the "
                "windows of killed batch task attempts, of abandoned streaming queries) and delete them, every "
                "level of every epoch.  A window opened or checkpointed while the sweep runs is left alone.",
    epilog="Example: mta-spark gc --store redis://cache:6379/0 --older-than 1d --dry-run",
    add_arguments=add_arguments,
    run=run,
    master=None,
)
