"""``couchbase://`` URLs: parsed into connection settings, and shown redacted.

URLs::

    couchbase://host[,host2...][:port]/bucket[?scope=S&collection=C&...]
    couchbases://...                                  TLS

``scope`` and ``collection`` default to ``_default``; other query parameters
stay in the SDK connection string (e.g. ``?network=external``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, quote_plus, unquote, urlencode

from .errors import StoreConfigError
from .urls import is_secret_parameter, redact_url, split_url

SCHEMES = ("couchbase", "couchbases")


def parse_couchbase_url(url: str) -> dict[str, Any]:
    parts = split_url(url, "Couchbase")
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
    """The store's URL as messages show it: its query parameters named like
    secrets hidden as :func:`stores.urls.redact_url` hides them."""
    auth = ""
    if cfg.get("username") or cfg.get("password"):
        auth = (cfg.get("username") or "") + (":***" if cfg.get("password") else "") + "@"
    q = [("scope", cfg["scope"]), ("collection", cfg["collection"])] + cfg["query"]
    return redact_url(f"{cfg['scheme']}://{auth}{cfg['netloc']}/{cfg['bucket']}?{urlencode(q)}")


def query_secrets(cfg: dict[str, Any]) -> tuple[str, ...]:
    """The values of the URL's query parameters named like secrets, as given
    and as encoded in the SDK's connection string (which its errors may quote)."""
    values = [value for name, value in cfg["query"] if value and is_secret_parameter(name)]
    return tuple(dict.fromkeys(values + [quote_plus(v) for v in values]))
