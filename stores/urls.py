"""Store URLs: the one place they are recognised, normalised and redacted.

``open_store`` picks its backend by :func:`scheme_of`; Spark jobs and the
CLI pass URLs through :func:`normalize_url` on the driver, because
executors may not share the driver's working directory; every message
shows :func:`redact_url`'s form.
"""

from __future__ import annotations

import os
import re
from urllib.parse import SplitResult, unquote, urlsplit

from .errors import StoreConfigError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
#: A URL's ``scheme://``, before its user info.
_AUTHORITY = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
#: The name of a query parameter whose value is a secret (``password``, ``my_token``, ``api_key``, ...).
#: The name ends in the secret's word, so that an option about one (``enable_mutation_tokens``, ``password_file``)
#: shows its value.
_SECRET_NAME = r"[\w.\-]*(?:pass|passwd|password|passphrase|pwd|secret|token|auth|credentials?|key)"
#: Such a parameter in a URL's query (``?password=...``), its value up to the next parameter.
_SECRET_PARAMETER = re.compile(rf"([?&;]{_SECRET_NAME}=)[^&;#]*", re.IGNORECASE)
#: How a user name or password holding reserved characters goes into a URL.
ENCODE_HINT = ("a user name or password holding '@', ':', '/', '?', '#', '[', ']' or a space must be "
               "percent-encoded (urllib.parse.quote(password, safe=''): '@' is %40), or given as an option")
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
            raise refused(url, e) from None
    scheme = scheme_of(url)
    return scheme + url[len(scheme):]


def refused(url: str, error: StoreConfigError) -> StoreConfigError:
    """The error for a store URL its backend's parser refused with
    ``error``, naming the URL redacted."""
    return StoreConfigError(f"bad store URL {redact_url(url)}: {error}")


def is_secret_parameter(name: str) -> bool:
    """Whether a URL query parameter named ``name`` holds a secret (what
    :func:`redact_url` hides)."""
    return re.fullmatch(_SECRET_NAME, name, re.IGNORECASE) is not None


def redact_url(url: str) -> str:
    """``url`` with the password of its user info replaced by ``***``, and
    the value of any query parameter named like a secret (``password``,
    ``token``, ``auth``, ``..._key``, ...).

    The user info runs up to the *last* ``@`` of the URL when a ``:`` comes
    before it: a password may hold any character unescaped (``@``, ``/``,
    ``?``, ``#``), and nothing tells such a password from a query value
    holding an ``@``, so the redaction errs on hiding more (the store
    parsers refuse an ``@`` after the host, :func:`split_url`).  A URL
    without authority, such as ``file:///a:b@c``, is a path and left whole;
    in a string that is not a well-formed URL, all from its first ``:`` to
    its last ``@`` goes."""
    url = _SECRET_PARAMETER.sub(r"\1***", url)
    m = _AUTHORITY.match(url)
    if m is None:
        # a mistyped URL (no scheme, no "//") may still carry a password, holding "/", " " or "@"
        # unescaped: all from the first ":" to the last "@" goes
        return re.sub(r":.*@", ":***@", url, flags=re.S) if "@" in url else url
    rest = url[m.end():]
    if rest.startswith("/"):  # no authority (file:///a:b@c: a path)
        return url
    at = rest.rfind("@")
    if at < 0 or ":" not in rest[:at]:
        return url
    user, _, password = rest[:at].partition(":")
    return url[:m.end()] + user + (":***" if password else ":") + rest[at:]


def split_url(url: str, kind: str) -> SplitResult:
    """``urlsplit(url)`` of a network store's URL (``kind``: "Redis",
    "Couchbase"), or a StoreConfigError quoting nothing of its user info
    when the URL cannot be split (a password holding ``[``) or holds an
    ``@`` after its host: a password holding ``/``, ``?`` or ``#`` before
    its ``@`` ends the host early, and the rest of it would be read as a
    path, a parameter or a fragment."""
    try:
        parts = urlsplit(url)
    except ValueError:
        raise StoreConfigError(f"{kind} URL {_without_userinfo(url)} cannot be parsed: {ENCODE_HINT}") from None
    # without a host (redis:/u:pw@h) the parsers name the path masked up to its "@"; a query or a
    # fragment they would show
    if "@" in (parts.path if parts.netloc else "") + parts.query + parts.fragment:
        raise StoreConfigError(f"{kind} URL {_without_userinfo(url)} holds an '@' after its host: {ENCODE_HINT}; "
                               "an '@' in a parameter is written %40")
    return parts


def _without_userinfo(url: str) -> str:
    """``url`` for a message about a URL that does not split well: all of it
    up to its last ``@`` hidden (any of it may be a password), query
    parameters named like secrets too."""
    if "@" not in url:
        return redact_url(url)
    m = _AUTHORITY.match(url)
    return (m.group() if m else "") + "***@" + _SECRET_PARAMETER.sub(r"\1***", url.rpartition("@")[2])
