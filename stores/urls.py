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
#: A URL's ``scheme://``, before its user info.
_AUTHORITY = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
#: A query parameter whose value is a secret (``?password=...``).
_SECRET_PARAMETER = re.compile(
    r"([?&;](?:[\w.\-]*(?:pass|pwd|secret|token|auth|credential)[\w.\-]*|[\w.\-]*key)=)[^&;#]*", re.IGNORECASE)
#: A Windows drive (``C:\`` or ``c:/``): the one colon a plain path may hold.
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
#: A scheme name followed by ``//`` with no colon: a URL with a typo.
_SCHEME_NO_COLON = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*//")
#: ``host:port`` with no scheme.
_HOST_PORT = re.compile(r"^[\w.\-]+:\d+(/\d*)?$")


def scheme_of(url: str) -> str | None:
    """The URL's scheme in lower case, or ``None`` for a plain path (a
    one-letter "scheme" without ``://`` is a Windows drive, a path too)."""
    m = _SCHEME.match(url)
    if m is None or (len(m.group(1)) == 1 and "://" not in url):
        return None
    return m.group(1).lower()


def check_plain_path(url: str) -> None:
    """Refuse a "plain path" that is more likely a mistyped URL than a
    directory, so a typo never becomes a new, empty local store: it must not
    hold a colon (but for a Windows drive), start with ``name//``, carry
    whitespace at either end, or hold control characters.  An odd but
    intended directory can always be given as a ``file:`` URL."""
    shown = redact_url(url)
    if url != url.strip():
        raise StoreConfigError(f"store URL {shown!r} has leading or trailing whitespace")
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise StoreConfigError(f"store URL {shown!r} holds a control character")
    if ":" in (url[2:] if _DRIVE.match(url) else url):
        raise StoreConfigError(
            f"store URL {shown!r} has no known scheme and is not a plain path: it holds a ':' "
            f"(a directory with one in its name is given as a file: URL){typo_hint(url)}")
    if _SCHEME_NO_COLON.match(url):
        raise StoreConfigError(f"store URL {shown!r} looks like a URL missing the ':' after "
                               f"its scheme; a directory is given as a plain path or a file: URL")


def typo_hint(url: str) -> str:
    """``"; did you mean redis://host:port?"`` for a bare ``host:port``, else ``""``."""
    return f"; did you mean redis://{redact_url(url)}?" if _HOST_PORT.match(url) else ""


def parse_file_url(url: str) -> str:
    """The absolute directory of a ``file:`` URL or plain path (a plain path
    must pass :func:`check_plain_path`)."""
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
        check_plain_path(url)
        path = url
    if not path:
        raise StoreConfigError(f"file: URL {redact_url(url)!r} has no path")
    return os.path.abspath(os.path.expanduser(path))


def normalize_url(url: str | None) -> str | None:
    """``url`` as every process of a job can open it: a file store as an
    absolute ``file://`` URL, any other URL with its scheme in lower case,
    and no URL (``None`` or ``""``: no store) as given.  Raises
    :class:`StoreConfigError` for a bad file URL or a plain path that looks
    like a mistyped URL (naming it redacted), or a URL that is not a str."""
    if not url:
        return url
    if not isinstance(url, str):
        raise StoreConfigError(f"a store URL is a str, not {type(url).__name__}")
    if scheme_of(url) in (None, "file"):
        try:
            return "file://" + parse_file_url(url)
        except StoreConfigError as e:
            raise StoreConfigError(f"bad store URL {redact_url(url)}: {e}") from None
    scheme = scheme_of(url)
    return scheme + url[len(scheme):]


def redact_url(url: str) -> str:
    """``url`` with the password of its user info replaced by ``***`` (up to
    the last ``@`` before the query: a password may hold an unescaped
    ``@`` or ``/``; up to an ``@`` after a ``?`` or ``#`` with a colon
    before it: a password may hold those too; in a string that is not a
    well-formed URL, any ``:secret@``; a URL without authority, such as
    ``file:///a:b@c``, is a path and left whole),
    and so the value of any query parameter named like a secret
    (``password``, ``token``, ``auth``, ``..._key``, ...)."""
    url = _SECRET_PARAMETER.sub(r"\1***", url)
    m = _AUTHORITY.match(url)
    if m is None:
        # a mistyped URL (no scheme, no "//") may still carry a password
        return re.sub(r":[^:@/\s]*@", ":***@", url) if "@" in url else url
    rest = url[m.end():]
    if rest.startswith("/"):  # no authority (file:///a:b@c: a path)
        return url
    at = rest.rfind("@", 0, min([i for i in (rest.find("?"), rest.find("#")) if i >= 0], default=len(rest)))
    if at < 0:
        at = rest.rfind("@")
        if at < 0 or ":" not in rest[:at]:
            return url
    user, sep, password = rest[:at].partition(":")
    return url[:m.end()] + user + (":***" if sep and password else sep) + rest[at:]
