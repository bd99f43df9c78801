"""``couchbase://`` URLs: parsed into connection settings, and shown redacted.

URLs::

    couchbase://host[,host2...][:port]/bucket[?scope=S&collection=C&...]
    couchbases://...                                  TLS

``scope`` and ``collection`` default to ``_default``; other query parameters
stay in the SDK connection string (e.g. ``?network=external``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from .errors import StoreConfigError

SCHEMES = ("couchbase", "couchbases")


def parse_couchbase_url(url: str) -> dict[str, Any]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise StoreConfigError(f"not a Couchbase URL (schemes: {', '.join(SCHEMES)})")
    netloc = parts.netloc.rpartition("@")[2]
    if not netloc:
        raise StoreConfigError("Couchbase URL has no host")
    bucket = unquote(parts.path.strip("/"))
    if not bucket or "/" in bucket:
        raise StoreConfigError("Couchbase URL must name one bucket: couchbase://host/bucket")
    scope, collection = "_default", "_default"
    rest = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name == "scope":
            scope = value
        elif name == "collection":
            collection = value
        elif name.lower() in ("password", "username", "user"):
            raise StoreConfigError("pass Couchbase credentials as options or environment "
                                   "variables, not URL parameters")
        else:
            rest.append((name, value))
    connstr = f"{scheme}://{netloc}" + (f"?{urlencode(rest)}" if rest else "")
    return {
        "scheme": scheme, "netloc": netloc, "connstr": connstr, "bucket": bucket,
        "scope": scope, "collection": collection,
        "username": unquote(parts.username) if parts.username else None,
        "password": unquote(parts.password) if parts.password else None,
        "query": rest,
    }


def redacted_url(cfg: dict[str, Any]) -> str:
    auth = ""
    if cfg.get("username") or cfg.get("password"):
        auth = (cfg.get("username") or "") + (":***" if cfg.get("password") else "") + "@"
    q = [("scope", cfg["scope"]), ("collection", cfg["collection"])] + cfg["query"]
    return f"{cfg['scheme']}://{auth}{cfg['netloc']}/{cfg['bucket']}?{urlencode(q)}"
