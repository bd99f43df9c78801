"""No credential in anything ``mta-spark`` prints: every command, success
and failure, ``-v`` included, with the Redis password given in the store URL
and in the environment (``MTA_REDIS_PASSWORD``).

A real Redis server with ``requirepass`` on loopback; everything the
process writes to its stdout and stderr file descriptors (the JVM's log
lines too) is scanned for the password.
"""

from __future__ import annotations

import pytest

from spark_ops.spec import WindowSpec
from tests.test_cli import SPARK_CONF as TEST_CLI_SPARK_CONF
from tests.test_cli import _run_args, _subprocess, make_rows, one_error_line, run_cli, write_csv

SPARK_CONF = dict(TEST_CLI_SPARK_CONF, app="test_redaction")  # the shared session fixture (tests/conftest.py) reads it

SECRET = "s3cr3t-Pa55-q7"
ENV_SECRET = "env-Pa55-x9"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A Redis server that wants :data:`SECRET`, killed after the module."""
    from bench.redis_server import RedisServer
    from tests.conftest import _require_redis

    _require_redis()
    server = RedisServer(str(tmp_path_factory.mktemp("redis")), password=SECRET).start()
    yield server
    server.stop()


def _with_password(server, password=SECRET, query="") -> str:
    return f"redis://:{password}@127.0.0.1:{server.port}/0" + query


def _assert_clean(printed: str, *secrets: str) -> None:
    for secret in secrets or (SECRET,):
        assert secret not in printed, f"a password was printed:\n{printed}"


@pytest.fixture
def csv(tmp_path):
    src = tmp_path / "in.csv"
    write_csv(src, make_rows(30, keys=2, seed=3))
    return src


def test_run_and_stream_print_no_password(spark, guarded, csv, tmp_path, capfd):
    url = _with_password(guarded)
    assert run_cli(spark, *_run_args(csv, tmp_path / "o", "--store", url)) == 0
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    write_csv(incoming / "a.csv", make_rows(30, keys=2, seed=4))
    assert run_cli(spark, "stream", "--input", incoming, "--output", tmp_path / "so", "--checkpoint",
                   tmp_path / "ck", "--store", url, "--key", "key", "--time", "t", "--value", "v",
                   "--agg", "max", "--range", 10) == 0
    printed = capfd.readouterr()
    assert "processed 30 rows" in printed.out and "store redis://:***@" in printed.out
    _assert_clean(printed.out + printed.err)


def test_demo_prints_no_password(spark, guarded, tmp_path, capfd):
    assert run_cli(spark, "demo", "--hosts", 3, "--rows", 300, "--out", tmp_path / "demo", "--engine", "amta",
                   "--store", _with_password(guarded)) == 0
    printed = capfd.readouterr()
    assert printed.out.count("redis://:***@") >= 2
    _assert_clean(printed.out + printed.err)


@pytest.mark.parametrize("query, expect", [
    ("?socket_timout=3", "unknown Redis URL parameter 'socket_timout'"),
    ("?socket_timeout=soon", "socket_timeout='soon' is not a number"),
    (f"?password={ENV_SECRET}", "unknown Redis URL parameter 'password'"),  # a secret in the query, refused
])
def test_bad_store_url_error_names_it_redacted(guarded, csv, tmp_path, capfd, query, expect):
    from spark_ops import cli

    assert cli.main(_run_args(csv, tmp_path / "o", "--store", _with_password(guarded, query=query))) == 2
    printed = capfd.readouterr()
    line = one_error_line(printed.err)
    assert expect in line and "redis://:***@127.0.0.1" in line
    _assert_clean(printed.out + printed.err, SECRET, ENV_SECRET)


def test_wrong_password_error_prints_neither(guarded, csv, tmp_path, capfd, monkeypatch):
    from spark_ops import cli

    monkeypatch.setenv("MTA_REDIS_PASSWORD", ENV_SECRET)  # the server wants SECRET: refused
    assert cli.main(_run_args(csv, tmp_path / "o", "--store", f"redis://127.0.0.1:{guarded.port}/0")) == 2
    printed = capfd.readouterr()
    assert "auth" in one_error_line(printed.err).lower()
    _assert_clean(printed.out + printed.err, SECRET, ENV_SECRET)


@pytest.mark.slow
def test_verbose_failing_job_with_environment_password(guarded, tmp_path):
    """``-v``: the traceback of a job that fails in a worker (a null value,
    the windows in the password-protected store) holds neither password."""
    src = tmp_path / "in.csv"
    write_csv(src, [("a", 1.0, 2.0), ("a", 2.0, None)])
    import os

    os.environ["MTA_REDIS_PASSWORD"] = SECRET
    try:
        done = _subprocess(*_run_args(src, tmp_path / "o", "--store", f"redis://127.0.0.1:{guarded.port}/0"),
                           "-v", "--master", "local[1]", "--partitions", "1")
    finally:
        del os.environ["MTA_REDIS_PASSWORD"]
    assert done.returncode != 0 and "Traceback" in done.stderr, done.stderr
    assert "row rejected (null or NaN value)" in done.stderr
    _assert_clean(done.stdout + done.stderr)


def test_window_spec_repr_hides_the_store_credentials():
    spec = WindowSpec.build(key="k", time="t", value="v", aggs=["max"], range=5,
                            store=f"redis://:{SECRET}@127.0.0.1:1/0", store_options={"password": ENV_SECRET})
    _assert_clean(repr(spec), SECRET, ENV_SECRET)
