"""``redis://`` URLs: parsed into client settings, and shown redacted."""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from .errors import StoreConfigError
from .options import parse_bool, positive_int, seconds
from .urls import split_url

SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster")

_QUERY_FLOATS = {"socket_timeout", "socket_connect_timeout", "health_check_interval"}
_QUERY_BOOLS = {"cluster", "ssl_check_hostname"}
_QUERY_STRS = {"ssl_cert_reqs", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "key_prefix",
               "client_name"}
_QUERY_INTS = {"db", "max_connections"}

#: What redis-py's ``ssl_cert_reqs`` takes besides an ``ssl.VerifyMode``.
_CERT_REQS = (None, "none", "optional", "required")


def _cert_reqs(name: str, value: Any) -> None:
    if isinstance(value, bool) or not (value in _CERT_REQS if isinstance(value, str) or value is None
                                       else value in tuple(ssl.VerifyMode)):
        raise StoreConfigError(f"{name} must be 'none', 'optional', 'required' or an ssl.VerifyMode, got {value!r}")


#: The client settings redis-py checks only when it connects (a Cluster client: while it retries its
#: seeds, like an outage), or takes as no timeout at all, and their rules: whether from the URL or an option.
_CLIENT_RULES = {
    "socket_timeout": seconds,
    "socket_connect_timeout": seconds,
    "health_check_interval": lambda name, value: seconds(name, value, zero=True),  # 0: no health checks
    "max_connections": positive_int,
    "ssl_cert_reqs": _cert_reqs,
}


def check_client_settings(settings: dict[str, Any]) -> None:
    """Refuse a client setting of ``settings`` that breaks its rule
    (StoreConfigError naming it and its value)."""
    for name, rule in _CLIENT_RULES.items():
        if name in settings:
            rule(name, settings[name])


def parse_redis_url(url: str) -> dict[str, Any]:
    """Split a redis URL into client settings (``password`` included:
    keep the result private)."""
    parts = split_url(url, "Redis")
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise StoreConfigError(f"not a Redis URL (schemes: {', '.join(SCHEMES)})")
    cluster = scheme.endswith("+cluster")
    userinfo, _, hosts = parts.netloc.rpartition("@")
    if "," in hosts and "" in hosts.split(","):
        raise StoreConfigError("Redis URL has an empty host in its list of seed nodes")
    seeds = [_host_port(h) for h in hosts.split(",")]
    if len(seeds) > 1 and not cluster:
        raise StoreConfigError("several hosts (seed nodes) need a Redis Cluster URL: "
                               "redis+cluster://host1:port1,host2:port2")
    user, colon, password = userinfo.partition(":")
    cfg: dict[str, Any] = {
        "tls": scheme.startswith("rediss"),
        "cluster": cluster,
        "host": seeds[0][0],
        "port": seeds[0][1],
        "seeds": seeds,
        "username": unquote(user) if user else None,
        "password": unquote(password) if password else None,
        "db": 0,
    }
    path = parts.path.strip("/")
    if path:
        try:
            cfg["db"] = int(path)
        except ValueError:
            # a URL missing a slash (redis:/user:pw@host) puts its credentials here
            shown = path if "@" not in path else "***@" + path.rsplit("@", 1)[1]
            raise StoreConfigError(f"Redis URL path must be a database number, got {shown!r} "
                                   "(a Redis URL is redis://[user:password@]host:port/db)") from None
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name in _QUERY_FLOATS:
            try:
                cfg[name] = float(value)
            except ValueError:
                raise StoreConfigError(f"URL parameter {name}={value!r} is not a number") \
                    from None
        elif name in _QUERY_INTS:
            try:
                cfg[name] = int(value)
            except ValueError:
                raise StoreConfigError(f"URL parameter {name}={value!r} is not an int") \
                    from None
        elif name in _QUERY_BOOLS:
            cfg[name] = parse_bool(name, value, "URL parameter")
        elif name in _QUERY_STRS:
            cfg[name] = value
        else:
            raise StoreConfigError(
                f"unknown Redis URL parameter {name!r} (pass credentials as options or "
                f"in the URL's user info, other client settings as options)")
    check_client_settings(cfg)
    return cfg


def _host_port(text: str) -> tuple[str, int]:
    """``host[:port]`` (``[v6]:port`` too) of a URL's host list, port 6379 by default."""
    if not text:
        return "localhost", 6379
    try:
        parts = urlsplit("//" + text)
        port = parts.port or 6379
    except ValueError:
        # what follows the last colon is not shown: a URL missing its '@host' has its password there
        raise StoreConfigError(f"Redis URL host {text.rpartition(':')[0]!r} has an invalid port (a password "
                               "holding '/', '?', '#' or '@' must be percent-encoded)") from None
    if not parts.hostname:
        raise StoreConfigError(f"Redis URL host {text.rpartition(':')[0]!r} has no host name")
    return parts.hostname, port


def redacted_url(cfg: dict[str, Any]) -> str:
    scheme = ("rediss" if cfg["tls"] else "redis") + ("+cluster" if cfg["cluster"] else "")
    auth = ""
    if cfg.get("username") or cfg.get("password"):
        auth = (cfg.get("username") or "") + (":***" if cfg.get("password") else "") + "@"
    seeds = cfg.get("seeds") or [(cfg["host"], cfg["port"])]
    hosts = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in seeds)
    db = "" if cfg["cluster"] else f"/{cfg['db']}"
    return f"{scheme}://{auth}{hosts}{db}"


