"""Shared pieces of the store benchmarks (kvs1, kvs2, exp4).

* :func:`backends`: the stores the engines use.  The
  benchmarks start their own ``redis-server`` on a free loopback port with
  persistence off (``--save "" --appendonly no``) unless ``--redis URL`` is
  given, and put the file store (SQLite) in a temporary directory unless
  ``--store-dir DIR`` is given; both are removed at the end.
* :data:`CONFIGS`: the engine configurations measured side by side: the
  in-memory AMTA and LMTA (the paper's "Mem. AMTA" / "Mem. LMTA") and the
  same engines with their level queues in Redis or in the file store ("KVS
  AMTA" / "KVS LMTA"), with the paper's buffer and cache of 512 pairs.
* :func:`counters`: a store-backed engine's traffic, from the engine's
  ``store_stats`` (window counters: round trips, pairs, cache hits and misses)
  and the store's own :class:`stores.StoreStats` (round trips and bytes).
* :func:`drain`: wait for the background flushes and prefetches of
  store-backed engines (charged to the engine that queued them).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import tempfile
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator

from mta.amortized_mta import AmortizedMTA
from mta.log_mta import LogMTA

from . import common
from .common import REPO, RunConfig, fmt_ns, pow2
from .experiment import Run
from .redis_server import RedisServer, redis_server_version

#: The storage backends the store benchmarks know, in report order.
BACKENDS = ("redis", "file")

#: Buffer and cache per level, in pairs (paper section 5.1).
BUFFER_SIZE = 512
CACHE_SIZE = 512


@dataclass
class Backends:
    """Where the store-backed engines keep their windows during one run."""

    urls: dict[str, str]
    info: dict[str, Any]

    def redis_client(self):
        import redis

        return redis.Redis.from_url(self.urls["redis"])

    def redis_info(self, section: str) -> dict:
        if "redis" not in self.urls:
            return {}
        client = self.redis_client()
        try:
            return client.info(section)
        finally:
            client.close()

    def redis_cpu_s(self, client=None) -> float | None:
        """The server's CPU time (user + system, seconds)."""
        if "redis" not in self.urls:
            return None
        own = client is None
        client = client or self.redis_client()
        try:
            info = client.info("cpu")
            return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
        finally:
            if own:
                client.close()


def configured(cfg: RunConfig, used) -> tuple[str, ...]:
    """The stores of ``used`` a benchmark may start: those ``--stores``
    names, so a machine without redis-server runs it with the file store."""
    return tuple(b for b in used if b in cfg.store_backends)


@contextmanager
def backends(cfg: RunConfig, wanted=BACKENDS) -> Iterator[Backends]:
    """Start (or connect to) the stores of ``wanted``; stop and remove what
    this run started at the end."""
    urls: dict[str, str] = {}
    info: dict[str, Any] = {}
    cleanup = []
    try:
        if "redis" in wanted:
            if cfg.redis_url:
                urls["redis"] = cfg.redis_url
                info["redis"] = {"started_by_benchmark": False}
            else:
                tmp = tempfile.mkdtemp(prefix="mta-bench-redis-")
                cleanup.append(lambda: shutil.rmtree(tmp, ignore_errors=True))
                try:
                    server = RedisServer(tmp).start()
                except RuntimeError as exc:
                    raise RuntimeError(f"{exc}; or pass --redis URL") from None
                cleanup.append(server.stop)
                urls["redis"] = server.url
                info["redis"] = {"started_by_benchmark": True, "binary": server.binary,
                                 "args": "--bind 127.0.0.1 --save '' --appendonly no (persistence off)"}
        if "file" in wanted:
            if cfg.store_dir:
                directory = os.path.abspath(cfg.store_dir)
                info["file"] = {"directory": directory, "temporary": False}
            else:
                directory = tempfile.mkdtemp(prefix="mta-bench-file-store-")
                cleanup.append(lambda: shutil.rmtree(directory, ignore_errors=True))
                info["file"] = {"directory": directory, "temporary": True}
            urls["file"] = "file://" + directory
            info["file"].update({"sqlite_version": sqlite3.sqlite_version, "synchronous": "meta (default)",
                                 "filesystem": _filesystem(directory)})
        b = Backends(urls, info)
        if "redis" in urls:
            server = b.redis_info("server")
            info["redis"].update({
                "url": _redact(urls["redis"]),
                "redis_server_version": server.get("redis_version"),
                "mode": server.get("redis_mode"),
                "hash_max_listpack_entries": _config_get(b, "hash-max-listpack-entries"),
            })
        yield b
    finally:
        for fn in reversed(cleanup):
            fn()


def _config_get(b: Backends, name: str):
    try:
        client = b.redis_client()
        try:
            return client.config_get(name).get(name)
        finally:
            client.close()
    except Exception:  # CONFIG may be disabled on a managed server
        return None


def _redact(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.password:
        return url.replace(parts.password, "***")
    return url


def _filesystem(path: str) -> str | None:
    try:
        out = subprocess.run(["df", "-T", path], capture_output=True, text=True, timeout=10).stdout.splitlines()
        return out[1].split()[1] if len(out) > 1 else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def store_info(b: Backends | None = None) -> dict:
    """Versions of what the store path runs on, plus a digest of stores/."""
    import msgpack
    import redis

    try:
        import hiredis

        hiredis_version = hiredis.__version__
    except ImportError:
        hiredis_version = None
    h = hashlib.sha256()
    for path in sorted((REPO / "stores").rglob("*.py")):
        h.update(str(path.relative_to(REPO)).encode())
        h.update(path.read_bytes())
    out = {
        "redis_server_version": redis_server_version(),
        "redis_py": redis.__version__, "hiredis": hiredis_version,
        "msgpack": ".".join(map(str, msgpack.version)), "sqlite": sqlite3.sqlite_version,
        "stores_source_sha256": h.hexdigest()[:16],
        "buffer_size": BUFFER_SIZE, "cache_size": CACHE_SIZE,
    }
    if b is not None:
        out["backends"] = b.info
        if "redis" in b.info and b.info["redis"].get("redis_server_version"):
            out["redis_server_version"] = b.info["redis"]["redis_server_version"]
    return out


# -- engine configurations ------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """One engine configuration: ``engine`` (AMTA/LMTA) in memory
    (``backend`` None) or with its level queues in ``backend``."""

    engine: str
    backend: str | None = None

    @property
    def label(self) -> str:
        return f"Mem {self.engine}" if self.backend is None else f"KVS {self.engine} {self.backend}"

    @property
    def key(self) -> str:
        return f"{self.engine}/{self.backend or 'memory'}"

    def build(self, monoid, wsp, b: Backends | None, *, window_id: str | None = None, **options):
        """``(engine, store)`` (store None in memory)."""
        cls = {"AMTA": AmortizedMTA, "LMTA": LogMTA}[self.engine]
        if self.backend is None:
            return cls(monoid, wsp), None
        import stores

        store = stores.open_store(b.urls[self.backend])
        window_id = window_id or f"bench-{self.engine}-{uuid.uuid4().hex[:10]}"
        engine = cls(monoid, wsp, store=store, window_id=window_id,
                     buffer_size=options.pop("buffer_size", BUFFER_SIZE),
                     cache_size=options.pop("cache_size", CACHE_SIZE), **options)
        return engine, store


def configs(cfg: RunConfig) -> list[Config]:
    """Every engine (AMTA, LMTA; ``--engines`` picks) in memory and on every
    backend (``--stores`` picks), grouped by engine."""
    engines = [e for e in (cfg.engines or ["AMTA", "LMTA"]) if e in ("AMTA", "LMTA")]
    if not engines:
        raise SystemExit("the store benchmarks run AMTA and LMTA only (--engines AMTA,LMTA)")
    return [Config(e, b) for e in engines for b in (None, *cfg.store_backends)]


def close(engine, store, delete: bool = True) -> None:
    """Close a store-backed engine (deleting its window) and its store."""
    if store is None:
        return
    try:
        engine.close(delete=delete)
    finally:
        store.close()


# -- counters -----------------------------------------------------------------

#: Counters reported per update / per eviction.
COUNTERS = ("round_trips", "pairs_written", "pairs_read", "bytes_written", "bytes_read",
            "cache_hits", "cache_misses")


def counters(engine, store) -> dict[str, int]:
    """The engine's store traffic so far: the store's round trips and bytes
    (:class:`stores.StoreStats`); the window's pairs written and read (the
    store counts values, one per group of pairs) and its cache hits and
    misses (the same :class:`stores.StoreStats`, the window's own)."""
    if store is None:
        return {k: 0 for k in COUNTERS}
    s = store.stats.as_dict()
    w = engine.store_stats
    return {"round_trips": s["round_trips"], "pairs_written": w.pairs_written,
            "pairs_read": w.pairs_read, "bytes_written": s["bytes_written"], "bytes_read": s["bytes_read"],
            "cache_hits": w.cache_hits, "cache_misses": w.cache_misses}


def delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def per(d: dict, n: int) -> dict:
    return {k: (v / n if n else None) for k, v in d.items()}


def drain(timeout: float = 120.0) -> None:
    """Wait until the background pool of stores.background has run every task
    submitted so far (flushes, prefetches)."""
    from stores.background import drain_background

    drain_background(timeout)


# -- reports --------------------------------------------------------------------------

def by_config(data: dict, field: str) -> dict[str, dict[int, dict]]:
    """The records that did not fail, by configuration, then by ``field``
    (the window size, or the eviction size k)."""
    out: dict[str, dict[int, dict]] = {}
    for r in data["records"]:
        if "error" not in r:
            out.setdefault(r["config"], {})[r[field]] = r
    return out


def report_configs(data: dict, field: str) -> tuple[dict, list[str], dict[str, str]]:
    """``by_config``, the configurations in the order they ran, and their labels."""
    cfgs = by_config(data, field)
    keys = list(data.get("configs") or cfgs)
    return cfgs, keys, {k: data["configs"].get(k, k) for k in keys}


def heading(data: dict, what: str, *, ram: bool = False) -> str:
    """A report's first line: what, the profile, the machine, the load."""
    m = data["machine"]
    return (f"{what}, {data['profile']} profile; {m.get('cpu_model')}, {m.get('logical_cores')} cores, "
            + (f"{m.get('memory_gb')} GB RAM, " if ram else "")
            + f"Python {m.get('python')}, redis-server {data.get('stores', {}).get('redis_server_version')}; "
            f"load average {m.get('load_average_at_start', ['?'])[0]} at start, "
            f"{m.get('load_average_at_end', ['?'])[0]} at end")


def caption(data: dict, *, ram: bool = False) -> str:
    """A plot's bottom line: the machine, the redis-server, the load."""
    m = data["machine"]
    return (common.machine_caption(m) + (f", {m.get('memory_gb')} GB RAM" if ram else "")
            + f"; redis-server {data.get('stores', {}).get('redis_server_version')}; "
            f"load avg {m.get('load_average_at_start', ['?'])[0]} -> {m.get('load_average_at_end', ['?'])[0]}")


def grid(cfgs: dict, keys, xs, cell) -> list[list[str]]:
    """A report table's rows: one per ``x`` of ``xs`` (a window size or an
    eviction size, shown as a power of two), then ``cell(record)`` per
    configuration of ``keys`` ("-" where it has no record)."""
    return [[pow2(x)] + ["-" if (r := cfgs.get(k, {}).get(x)) is None else cell(r) for k in keys] for x in xs]


def to_memory(cfgs: dict, key: str, x: int, field: str, digits: int = 2) -> str:
    """``field`` of configuration ``key`` over the in-memory run of the same
    engine at ``x``, as text ("-" when either is missing)."""
    mem = cfgs.get(key.split("/")[0] + "/memory", {}).get(x, {}).get(field)
    v = cfgs.get(key, {}).get(x, {}).get(field)
    return f"{v / mem:.{digits}f}" if v is not None and mem else "-"


def open_run(name: str, cfg: RunConfig, b: Backends, confs: list[Config], config: dict) -> Run:
    """A store experiment's :class:`~bench.experiment.Run`: the shared
    header, then the stores' versions and the configurations measured."""
    job = Run(name, cfg, config)
    job.data["stores"] = store_info(b)
    job.data["configs"] = {c.key: c.label for c in confs}
    return job


def with_ratios(cfgs: dict, keys, xs, field: str, digits: int = 2) -> list[list[str]]:
    """:func:`grid` of ``field`` (a duration), then one column per
    store-backed configuration: its :func:`to_memory` ratio."""
    stored = [k for k in keys if not k.endswith("/memory")]
    return [row + [to_memory(cfgs, k, x, field, digits) for k in stored]
            for x, row in zip(xs, grid(cfgs, keys, xs, lambda r: fmt_ns(r.get(field))))]
