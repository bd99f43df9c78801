"""Store URLs (stores.urls), the per-process pool (stores.pool) and the
FIFO level queues of Store.open_fifo, on every backend."""

from __future__ import annotations

import os

import pytest

import stores
from stores import StoreConfigError, normalize_url, pooled_store, redact_url, scheme_of

from .test_stores import backend, make_store, store  # noqa: F401 - fixtures


@pytest.mark.parametrize("url, scheme", [
    ("redis://h:1/0", "redis"), ("REDIS://h", "redis"), ("rediss+cluster://h:1", "rediss+cluster"),
    ("file:rel/dir", "file"), ("file:///abs", "file"), ("memory://", "memory"),
    ("rel/dir", None), ("/abs/dir", None), ("C:\\dir", None), ("c:/dir", None),
])
def test_scheme_of(url, scheme):
    assert scheme_of(url) == scheme


def test_normalize_url_makes_file_stores_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    here = os.path.realpath(str(tmp_path))
    assert normalize_url("state") == f"file://{os.path.join(os.getcwd(), 'state')}"
    assert normalize_url("file:state") == f"file://{os.path.join(os.getcwd(), 'state')}"
    assert normalize_url(f"file://{here}/x") == f"file://{here}/x"
    assert normalize_url("~/mta-x") == "file://" + os.path.expanduser("~/mta-x")
    for url in ("redis://:pw@127.0.0.1:6379/0", "memory://name", "couchbase://h/b", None, ""):
        assert normalize_url(url) == url


@pytest.mark.parametrize("url", [b"file:x", "file://otherhost/x", "file:x?q=1", "file:"])
def test_normalize_url_refuses_bad_file_urls(url):
    with pytest.raises(StoreConfigError):
        normalize_url(url)


def test_redact_url():
    assert redact_url("redis://:s3cret@h:1/0") == "redis://:***@h:1/0"
    assert redact_url("rediss://user:s3cret@h:1/0?x=1") == "rediss://user:***@h:1/0?x=1"
    assert redact_url("couchbase://admin@h/b") == "couchbase://admin@h/b"
    assert redact_url("redis://h:1/0") == "redis://h:1/0"
    assert redact_url("file:///a@b") == "file:///a@b"
    # a password with an unescaped @ or /: all of it up to the last @ before the query
    assert redact_url("redis://u:s3c@ret/pw@h:1/0") == "redis://u:***@h:1/0"
    assert redact_url("redis://h/0?x=a@b") == "redis://h/0?x=a@b"
    # secrets passed as query parameters, whatever the case, beside others kept
    assert redact_url("redis://h:1/0?password=s3cret") == "redis://h:1/0?password=***"
    assert redact_url("redis://u:p@h/0?socket_timeout=1&Password=x&auth_token=t#f") == \
        "redis://u:***@h/0?socket_timeout=1&Password=***&auth_token=***#f"
    assert redact_url("redis://h/0?key_prefix=app&api_key=k") == "redis://h/0?key_prefix=app&api_key=***"
    # a password holding an unescaped ? or #; a file path holding : and @ is a path
    assert redact_url("redis://user:pa?ss@host/0") == "redis://user:***@host/0"
    assert redact_url("redis://user:pa#ss@host/0") == "redis://user:***@host/0"
    assert redact_url("file:///tmp/a:b@c/store") == "file:///tmp/a:b@c/store"
    with pytest.raises(StoreConfigError) as e:
        normalize_url("file://u:s3cret@otherhost/x")
    assert "s3cret" not in str(e.value)


def test_pooled_store_is_one_per_url_and_options(tmp_path):
    url = f"file://{tmp_path}/pool"
    a = pooled_store(url, {"retries": 1})
    assert pooled_store(url, {"retries": 1}) is a
    assert pooled_store(url, {"retries": 2}) is not a
    a.close()
    b = pooled_store(url, {"retries": 1})
    assert b is not a and not b.closed


def test_open_fifo(store):
    fifo = store.open_fifo("w~fifo", buffer_size=2, cache_size=2)
    values = [float(i) for i in range(40)]
    for v in values:
        fifo.append(v)
    fifo.lo += 25  # the 25 oldest leave
    assert [fifo[i] for i in range(fifo.lo, fifo.hi)] == values[25:]
    fifo.append(40.0)
    assert fifo[fifo.hi - 1] == 40.0 and len(fifo) == 16
    fifo.close(delete=True)
    assert store.list_epochs("w~fifo") == []


def test_open_fifo_starts_empty(store):
    first = store.open_fifo("w~fifo", buffer_size=2, cache_size=2)
    for v in range(10):
        first.append(v)
    first.close()
    again = store.open_fifo("w~fifo", buffer_size=2, cache_size=2)
    assert len(again) == 0
    again.close(delete=True)


def test_stores_exports_the_url_and_pool_api():
    for name in ("normalize_url", "redact_url", "scheme_of", "pooled_store", "FencingError"):
        assert name in stores.__all__ and hasattr(stores, name)


@pytest.mark.parametrize("url, problem", [
    ("127.0.0.1:6421", "redis://127.0.0.1:6421"),
    ("redis//127.0.0.1:6379/0", "':'"),
    ("redis//localhost/0", "missing the ':'"),
    (" redis://127.0.0.1:6379/0", "whitespace"),
    ("state ", "whitespace"),
    ("::::", "':'"),
    ("st\tate", "control character"),
])
def test_url_typos_are_errors_not_file_stores(url, problem, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for call in (normalize_url, stores.open_store):
        with pytest.raises(StoreConfigError) as e:
            call(url)
        assert problem in str(e.value)
    assert os.listdir(tmp_path) == []  # no store was created


def test_host_port_is_an_unknown_scheme_with_a_hint():
    with pytest.raises(StoreConfigError) as e:
        stores.open_store("localhost:6379/0")
    assert "unknown store URL scheme 'localhost'" in str(e.value)
    assert "did you mean redis://localhost:6379/0?" in str(e.value)


def test_url_typos_never_show_a_password():
    for url in ("redis//:s3cret@127.0.0.1:6379/0", " redis://u:s3cret@h:1/0", "u:s3cret@h:6379"):
        with pytest.raises(StoreConfigError) as e:
            normalize_url(url)
        assert "s3cret" not in str(e.value) and "***" in str(e.value)


def test_plain_paths_that_look_like_paths_still_make_file_stores(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for path in ("state", "a/b-c_d.e", "./x", "~/mta-x", "/abs/dir"):
        assert normalize_url(path) == "file://" + os.path.abspath(os.path.expanduser(path))
    # a directory with a ':' in its name is still reachable, as a file: URL
    assert normalize_url("file:a:b") == "file://" + os.path.join(os.getcwd(), "a:b")


def test_normalize_url_lowercases_the_scheme():
    assert normalize_url("REDIS://h:1/0") == "redis://h:1/0"
    assert normalize_url("Rediss+Cluster://:pw@H:1") == "rediss+cluster://:pw@H:1"
    assert normalize_url("FILE:///abs") == "file:///abs"


def test_a_malformed_redis_url_error_shows_no_password_fragment():
    """A password holding an unescaped '?' or '/' cuts the URL's authority
    short: the error about the port that results does not show it."""
    from stores.redis_url import parse_redis_url

    for url in ("redis://user:abSECRET?x@host/0", "redis://user:ab/cdSECRET@h/0"):
        with pytest.raises(StoreConfigError, match="percent-encoded") as info:
            parse_redis_url(url)
        assert "SECRET" not in str(info.value)


@pytest.mark.parametrize("url", ["redis:/user:s3cret@127.0.0.1:6390/0", "redis:user:s3cret@h:1/0",
                                 "rediss:/:s3cret@h/0", "redis:/s3cret@h/0"])
def test_a_redis_url_missing_its_slashes_is_refused_naming_no_password(url):
    """Without ``//`` the credentials land in the URL's path, which the
    error names: masked up to its last ``@``, with the form a URL takes."""
    from stores.redis_url import parse_redis_url

    with pytest.raises(StoreConfigError, match=r"database number, got '\*\*\*@[^']*' \(a Redis URL is redis://") \
            as info:
        parse_redis_url(url)
    assert "s3cret" not in str(info.value) and url.rsplit("@", 1)[1] in str(info.value)
