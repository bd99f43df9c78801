"""Store URLs (stores.urls), the per-process pool (stores.pool) and the
FIFO level queues of Store.open_fifo, on every backend."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

import stores
from stores import StoreConfigError, normalize_url, pooled_store, redact_url, scheme_of

from tests.strategies import sane_settings

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


def test_pooled_store_takes_dict_and_list_options():
    """Couchbase's ``cluster_options`` (a dict) reach an executor's store
    through the pool: options equal as values share one store."""
    url = "couchbase://127.0.0.1/bucket"
    options = {"username": "u", "password": "p", "cluster_options": {"enable_tls": False, "tags": ["a", "b"]}}
    a = pooled_store(url, options)
    assert a._cluster_options == {"enable_tls": False, "tags": ["a", "b"]}
    same = {"cluster_options": {"tags": ["a", "b"], "enable_tls": False}, "password": "p", "username": "u"}
    assert pooled_store(url, same) is a
    for other in ({"enable_tls": True, "tags": ["a", "b"]}, {"enable_tls": False, "tags": ("a", "b")},
                  {"enable_tls": False}):
        b = pooled_store(url, dict(options, cluster_options=other))
        assert b is not a
        b.close()
    with pytest.raises(TypeError, match=r"option cluster_options\['token'\] is a bytearray") as e:
        pooled_store(url, dict(options, cluster_options={"token": bytearray(b"s3cret")}))
    assert "s3cret" not in str(e.value)
    a.close()


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


@pytest.mark.parametrize("url, problem", [
    ("redis://:S3cr3tPW@127.0.0.1:1/0?bogus=1", "unknown Redis URL parameter 'bogus'"),
    ("redis://u:S3cr3tPW@127.0.0.1:1/notadb", "Redis URL path must be a database number, got 'notadb'"),
    ("redis://u:S3cr3tPW@127.0.0.1:1/0?socket_timeout=abc", "URL parameter socket_timeout='abc' is not a number"),
    ("redis://127.0.0.1:1/0?password=S3cr3tPW", "unknown Redis URL parameter 'password'"),
    ("rediss+cluster://u:S3cr3tPW@h:1,,h2:2", "empty host"),
    ("couchbase://u:S3cr3tPW@h/", "must name one bucket"),
    ("couchbase://h/b?password=S3cr3tPW", "not URL parameters"),
    ("memory://x?password=S3cr3tPW", "take no query"),
    ("file:/tmp/x?password=S3cr3tPW", "take no query"),
])
def test_check_url_refuses_what_the_backend_refuses(url, problem, tmp_path, monkeypatch):
    """``check_url`` (run when a job is defined) refuses a URL its backend's
    parser refuses, with the error the backend gives when it opens the URL,
    the URL shown redacted; nothing is opened."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreConfigError) as checked:
        stores.check_url(url)
    with pytest.raises(StoreConfigError) as opened:
        stores.open_store(url)
    assert problem in str(opened.value)
    assert str(checked.value) == f"bad store URL {redact_url(url)}: {opened.value}"
    assert "S3cr3tPW" not in str(checked.value)
    assert os.listdir(tmp_path) == []


def test_check_url_needs_no_client_library():
    """The backends' URL parsers run without redis-py or the Couchbase SDK."""
    import subprocess
    import sys

    code = ("import sys; sys.modules.update(redis=None, couchbase=None)\n"
            "import stores\n"
            "for url in ('redis://u:pw@h:1/2?socket_timeout=2.5', 'rediss+cluster://h:1,h2:2', "
            "'couchbase://h/b?scope=s', 'memory://x', 'file:/tmp/x'):\n"
            "    assert stores.check_url(url) == url\n"
            "for url in ('redis://h/0?bogus=1', 'couchbase://h'):\n"
            "    try:\n"
            "        stores.check_url(url)\n"
            "    except stores.StoreConfigError:\n"
            "        pass\n"
            "    else:\n"
            "        raise AssertionError(url)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


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


@pytest.mark.parametrize("url", [
    "redis://u:1234?Zq9Secret@127.0.0.1:6379/0", "redis://u:p@ss?Zq9Secret@h:6379/0",
    "redis://u:Zq9S:ecret/x@h:6379/0", "redis://u:1234#Zq9Secret@h/0", "rediss://:Zq9[Secret]@h:6379/0",
    "redis+cluster://:Zq9/Secret@h1:1,h2:2", "couchbase://u:Zq9?Secret@h/bucket", "couchbase://u:Zq9[Secret]@h/b",
])
def test_a_password_that_needs_percent_encoding_is_refused_quoting_none_of_it(url):
    """An unescaped '/', '?' or '#' ends the host early and puts the rest of
    the password in the path, query or fragment; '[' makes the URL
    unsplittable: refused, saying how to encode it, naming no part of it."""
    assert "Zq9" not in redact_url(url) and "ecret" not in redact_url(url)
    with pytest.raises(StoreConfigError, match="must be percent-encoded") as e:
        stores.open_store(url)
    assert "Zq9" not in str(e.value) and "ecret" not in str(e.value)


def test_a_percent_encoded_password_holds_any_character():
    from urllib.parse import quote

    from stores.couchbase_url import parse_couchbase_url
    from stores.redis_url import parse_redis_url

    password = "1234?Zq9[Se]cr@et/#: x"
    assert parse_redis_url(f"rediss://u:{quote(password, safe='')}@h:6380/0")["password"] == password
    assert parse_couchbase_url(f"couchbase://u:{quote(password, safe='')}@h/b")["password"] == password


# -- no secret in any message -------------------------------------------------------------------------------

#: Characters a password may hold unescaped (reserved ones included), and those of a secret parameter's value.
_PASSWORD_CHARS = "Zq9Sx" + ":/?#@&;=%+ []!$"
_VALUE_CHARS = "Zq9Sx-._~"


def _leaked(secret: str, url: str, texts: list[str]) -> list[str]:
    """The fragments of 5 characters of ``secret`` found in ``texts`` (but
    for those the rest of ``url`` holds, such as its host)."""
    structure = url.replace(secret, "")
    fragments = {secret[i:i + 5] for i in range(len(secret) - 4)}
    return sorted(f for f in fragments if f not in structure and any(f in t for t in texts))


def _everything_said(url: str) -> list[str]:
    """The redacted URL, and the repr, url, error (with its chain) and log
    lines of a store opened at ``url`` and pinged (Redis, at a closed port)."""
    import io
    import logging
    import traceback

    said = io.StringIO()
    handler = logging.StreamHandler(said)
    logging.getLogger("stores").addHandler(handler)
    texts = [redact_url(url)]
    try:
        s = stores.open_store(url, retries=1, backoff=0.001, timeout=2)
        texts += [repr(s), s.url]
        if not url.lower().startswith("couchbase"):  # the SDK would wait for its connect timeout
            s.ping()
        s.close()
    except Exception as e:  # noqa: BLE001 - every error's text is what is checked
        texts.append("".join(traceback.format_exception(e)))
    finally:
        logging.getLogger("stores").removeHandler(handler)
    return texts + [said.getvalue()]


@given(password=st.text(_PASSWORD_CHARS, min_size=5, max_size=16),
       scheme=st.sampled_from(["redis", "rediss", "redis+cluster", "REDIS", "couchbase"]),
       user=st.sampled_from(["", "u", "admin"]),
       tail=st.sampled_from(["", "/0", "/0?socket_timeout=1", "/bucket", "/b?scope=s"]),
       sep=st.sampled_from(["://", "://", "//", ":/"]))  # and mistyped: a URL that is no URL at all
@sane_settings(300)
def test_no_message_shows_a_password_holding_reserved_characters(password, scheme, user, tail, sep):
    url = f"{scheme}{sep}{user}:{password}@127.0.0.1:1{tail}"
    texts = _everything_said(url)
    assert not _leaked(password, url, texts), (url, texts)


@given(value=st.text(_VALUE_CHARS, min_size=5, max_size=16),
       name=st.sampled_from(["my_token", "auth", "api_key", "sasl_password", "Secret"]),
       url=st.sampled_from(["couchbase://u:pw@127.0.0.1:1/bucket?network=external&{}={}",
                            "couchbase://127.0.0.1:1/b?{}={}", "redis://127.0.0.1:1/0?{}={}"]))
@sane_settings(100)
def test_no_message_shows_a_secret_parameter(value, name, url):
    url = url.format(name, value)
    texts = _everything_said(url)
    assert not _leaked(value, url, texts), (url, texts)


def test_an_option_about_a_secret_is_not_one():
    """Only a parameter whose name ends in a secret's word is hidden: an SDK
    option such as ``enable_mutation_tokens`` keeps its value in messages."""
    url = "couchbase://u:pw@h/b?enable_mutation_tokens=true&password_file=/etc/pw&my_token=Zq9Sx"
    assert redact_url(url) == "couchbase://u:***@h/b?enable_mutation_tokens=true&password_file=/etc/pw&my_token=***"
