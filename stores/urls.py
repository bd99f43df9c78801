"""Store URLs: the one place they are recognised, normalised and redacted.

``open_store`` picks its backend by :func:`scheme_of`; Spark jobs and the
CLI pass URLs through :func:`normalize_url` on the driver, because
executors may not share the driver's working directory; every message
shows :func:`redact_url`'s form.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

from .errors import StoreConfigError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
#: ``user:password@`` in a URL's authority.
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*://)([^@/?#]*)@")


def scheme_of(url: str) -> str | None:
    """The URL's scheme in lower case, or ``None`` for a plain path (a
    one-letter "scheme" without ``://`` is a Windows drive, a path too)."""
    m = _SCHEME.match(url)
    if m is None or (len(m.group(1)) == 1 and "://" not in url):
        return None
    return m.group(1).lower()


def parse_file_url(url: str) -> str:
    """The absolute directory of a ``file:`` URL or plain path."""
    if scheme_of(url) == "file":
        parts = urlsplit(url)
        if parts.query or parts.fragment:
            raise StoreConfigError(f"file: URLs take no query or fragment: {redact_url(url)!r}")
        if parts.netloc not in ("", "localhost"):
            raise StoreConfigError(
                f"file: URL {redact_url(url)!r} names host {parts.hostname!r}; only local paths are "
                f"supported (file:///abs/dir or file:relative/dir)")
        path = unquote(parts.path)
    else:
        path = url
    if not path:
        raise StoreConfigError(f"file: URL {redact_url(url)!r} has no path")
    return os.path.abspath(os.path.expanduser(path))


def normalize_url(url: str | None) -> str | None:
    """``url`` as every process of a job can open it: a file store as an
    absolute ``file://`` URL, any other URL unchanged, and no URL (``None``
    or ``""``: no store) as given.  Raises :class:`StoreConfigError` for a
    bad file URL (naming it redacted) or a URL that is not a str."""
    if not url:
        return url
    if not isinstance(url, str):
        raise StoreConfigError(f"a store URL is a str, not {type(url).__name__}")
    if scheme_of(url) in (None, "file"):
        try:
            return "file://" + parse_file_url(url)
        except StoreConfigError as e:
            raise StoreConfigError(f"bad store URL {redact_url(url)}: {e}") from None
    return url


def redact_url(url: str) -> str:
    """``url`` with the password of its user info replaced by ``***``."""
    m = _USERINFO.match(url)
    if m is None:
        return url
    user, sep, password = m.group(2).partition(":")
    return m.group(1) + user + (":***" if sep and password else sep) + "@" + url[m.end():]
