"""The package as users install it: pyproject.toml's metadata and
dependencies, ``mta-spark --version``, the console script without the
``spark`` extra, the stores' warnings, and (slow) the built wheel installed
with ``[spark]`` in a fresh virtualenv running ``mta-spark demo`` from
outside the source tree.
"""

from __future__ import annotations

import ast
import importlib.metadata
import logging
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

try:
    import tomllib  # novermin: the except below covers Python 3.10
except ModuleNotFoundError:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

import mta
import stores
from mta.amortized_mta import AmortizedMTA
from spark_ops.cli import entry

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
EXTRAS = PROJECT["optional-dependencies"]
INSTALL = "pip install 'mta-windows[spark]'"
#: What the wheel holds: the packages of [tool.setuptools.packages.find].
PACKAGES = ("mta", "stores", "spark_ops")
#: Declared but never imported, and why.
NOT_IMPORTED = {"hiredis": "redis-py's reply parser, which redis-py loads when it is installed"}


def names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


# -- metadata ------------------------------------------------------------------------------
def test_license_is_spdx_with_the_apache_text():
    assert PROJECT["license"] == "Apache-2.0"
    assert PROJECT["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    assert "END OF TERMS AND CONDITIONS" in text and "APPENDIX" in text
    # an SPDX expression excludes license classifiers (setuptools refuses both)
    assert not [c for c in PROJECT["classifiers"] if c.startswith("License ::")]
    # setuptools takes the SPDX string without a deprecation warning from 77 on
    (setuptools,) = [Requirement(r) for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools")]
    assert "77" in setuptools.specifier and "76.1" not in setuptools.specifier


def test_version_comes_from_mta():
    assert "version" not in PROJECT and PROJECT["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mta.__version__"}
    assert str(Version(mta.__version__)) == mta.__version__


def test_classifiers_and_console_script():
    assert "Programming Language :: Python :: 3" in PROJECT["classifiers"]
    assert any(c.startswith("Development Status ::") for c in PROJECT["classifiers"])
    assert PROJECT["scripts"] == {"mta-spark": "spark_ops.cli.entry:main"}


def test_the_code_runs_on_the_oldest_python_it_claims():
    """vermin reads every file for the syntax, modules and functions it
    needs: none may need a Python newer than ``requires-python`` says
    (this machine runs only the newest, so no test run would show it)."""
    (oldest,) = [s.version for s in SpecifierSet(PROJECT["requires-python"]) if s.operator == ">="]
    folders = [*PACKAGES, "tests", "bench", "scripts", "docs"]
    vermin = [sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())"]
    run = subprocess.run([*vermin, "--no-tips", "--eval-annotations", "--violations", f"-t={oldest}-", *folders],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"code that needs a Python newer than {oldest}:\n{run.stdout}{run.stderr}"
    assert "Analyzing" in run.stdout, run.stdout


def test_pyspark_is_a_compatible_range_not_one_version():
    import pyspark

    (pin,) = [Requirement(r) for r in EXTRAS["spark"] if Requirement(r).name == "pyspark"]
    assert not any(s.operator == "==" for s in pin.specifier), pin
    allowed = pin.specifier
    assert pyspark.__version__ in allowed, f"the tested pyspark {pyspark.__version__} is outside {allowed}"
    for inside in ("4.3.0", "4.3.1", "4.3.9"):
        assert inside in allowed
    for outside in ("4.2.1", "4.4.0", "5.0.0"):
        assert outside not in allowed


# -- every third-party import declared, no unused dependency ---------------------------------
def third_party_imports(path: Path) -> set[str]:
    """The top-level modules a file imports that are neither the standard
    library nor this project's."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in {*PACKAGES, "bench", "tests"}}


def distribution(module: str) -> str:
    """The distribution that installs ``module`` (the module's own name when
    it is not installed here)."""
    dists = importlib.metadata.packages_distributions().get(module) or [module]
    return canonicalize_name(dists[0])


def allowed(path: Path) -> set[str]:
    """What a file of the wheel may import: the base dependencies, and the
    extra that brings its backend or Spark."""
    rel = path.relative_to(ROOT).as_posix()
    extra = ("spark" if rel.startswith("spark_ops/") else "redis" if rel.startswith("stores/redis")
             else "couchbase" if rel.startswith("stores/couchbase") else None)
    return names(PROJECT["dependencies"]) | (names(EXTRAS[extra]) if extra else set())


def test_every_third_party_import_of_the_wheel_is_declared_where_it_is_needed():
    undeclared = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for module in third_party_imports(path):
                if distribution(module) not in allowed(path):
                    undeclared.setdefault(distribution(module), []).append(path.relative_to(ROOT).as_posix())
    assert not undeclared, f"imported but not declared for these files: {undeclared}"
    # the spark_ops files import what the spark extra declares (a sanity check of the walk)
    spark_imports = {distribution(m) for p in (ROOT / "spark_ops").rglob("*.py") for m in third_party_imports(p)}
    assert {"pyspark", "pandas", "pyarrow", "numpy", "matplotlib", "py4j"} <= spark_imports


def test_tests_and_benchmarks_imports_are_declared():
    everything = names(PROJECT["dependencies"]) | {n for reqs in EXTRAS.values() for n in names(reqs)}
    bench = names(PROJECT["dependencies"]) | names(EXTRAS["bench"]) | names(EXTRAS["spark"]) | names(EXTRAS["redis"])
    for folder, declared in (("tests", everything), ("bench", bench)):
        used = {distribution(m) for p in (ROOT / folder).rglob("*.py") for m in third_party_imports(p)}
        assert used <= declared, f"{folder}/ imports undeclared {sorted(used - declared)}"


def test_no_unused_runtime_dependency():
    imported: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for module in third_party_imports(path):
                imported.setdefault(distribution(module), set()).add(path.relative_to(ROOT).as_posix())
    for group, requirements in (("dependencies", PROJECT["dependencies"]), *(
            (f"[{e}]", EXTRAS[e]) for e in ("spark", "redis", "couchbase"))):
        unused = names(requirements) - set(imported) - set(NOT_IMPORTED)
        assert not unused, f"{group} declares {sorted(unused)}, which no module of the wheel imports"
    # an extra does not repeat the base dependencies
    for extra, requirements in EXTRAS.items():
        assert not names(requirements) & names(PROJECT["dependencies"]), extra


def test_entry_checks_the_modules_of_the_spark_extra():
    assert {distribution(m) for m in entry.SPARK_EXTRA_MODULES} == names(EXTRAS["spark"])


# -- the console script ------------------------------------------------------------------
def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_version_option(tmp_path):
    done = subprocess.run([sys.executable, "-m", "spark_ops.cli", "--version"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"mta-spark {mta.__version__}\n", "")
    assert "--version" in (ROOT / "docs" / "cli.md").read_text()


BLOCK = """
    import sys

    class Block:
        # as if these packages were not installed
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Block())
"""


@pytest.mark.parametrize("blocked", [("pyspark",), ("matplotlib",), entry.SPARK_EXTRA_MODULES])
def test_console_script_without_the_spark_extra_names_it(tmp_path, blocked):
    """The entry point (as the console script calls it) with packages of the
    spark extra missing: one line naming the extra, status 2, no traceback,
    before any work (no output directory made) or any of them is imported."""
    done = run_python(BLOCK.format(blocked=set(blocked)) + """
    from spark_ops.cli.entry import main

    status = main(["demo", "--rows", "100", "--hosts", "2", "--out", "out"])
    loaded = sorted(m for m in ("pyspark", "pandas", "pyarrow", "numpy", "matplotlib", "py4j") if m in sys.modules)
    print(status, loaded)
    """, tmp_path)
    assert done.stdout == "2 []\n", done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert INSTALL in lines[0] and all(m in lines[0] for m in blocked), lines[0]
    assert not (tmp_path / "out").exists()


def test_package_imports_load_no_spark_module(tmp_path):
    """``import spark_ops`` and ``spark_ops.cli`` load nothing of the spark
    extra until a name is used."""
    done = run_python(BLOCK.format(blocked=set(entry.SPARK_EXTRA_MODULES)) + """
    import spark_ops, spark_ops.cli
    print(sorted(spark_ops.__all__), sorted(spark_ops.cli.__all__) == sorted(spark_ops.cli._EXPORTS))
    try:
        spark_ops.sliding_window
    except ModuleNotFoundError as e:
        print("needs", e.name)
    """, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['READY', 'SlidingWindowError', 'WindowSpec', 'sliding_window'] True",
                                        "needs numpy"]


# -- the stores' warnings ---------------------------------------------------------------------
SECRET = "pw-Never-Shown-42"


def test_store_retries_are_logged_with_the_url_redacted(caplog):
    """A Redis store whose server is down (a connection refused is transient):
    each retry is a WARNING of the ``stores`` logger naming the operation,
    the window and the attempt, never the password."""
    from tests.conftest import free_port

    store = stores.open_store(f"redis://:{SECRET}@127.0.0.1:{free_port()}/0", retries=2, backoff=0.01)
    try:
        with caplog.at_level(logging.WARNING, logger="stores"), pytest.raises(stores.StoreUnavailable):
            store.write_pairs("w", 0, 0, 0, [b"x"])
    finally:
        store.close()
    retries = [r for r in caplog.records if r.name.startswith("stores")]
    assert [r.levelno for r in retries] == [logging.WARNING] * 2
    for n, record in enumerate(retries, 1):
        message = record.getMessage()
        assert f"store {store.url}: write_pairs on window 'w' failed" in message, message
        assert f"retry {n} of 2" in message and ":***@" in message
    assert SECRET not in caplog.text


def test_a_retry_that_succeeds_is_logged_once(tmp_path, caplog, monkeypatch):
    """A file store whose database is locked once: one WARNING, then the call succeeds."""
    store = stores.open_store(f"file:{tmp_path / 'state'}", backoff=0.01)
    real, calls = store._write_pairs, []

    def locked_once(*args):
        calls.append(args)
        if len(calls) == 1:
            raise sqlite3.OperationalError("database is locked")
        return real(*args)

    monkeypatch.setattr(store, "_write_pairs", locked_once)
    try:
        with caplog.at_level(logging.WARNING, logger="stores"):
            store.write_pairs("w", 0, 0, 0, [b"x"])
        assert store.read_pairs("w", 0, 0, 0, 1) == [b"x"]
    finally:
        store.close()
    (record,) = [r for r in caplog.records if r.name.startswith("stores")]
    assert record.levelno == logging.WARNING and record.name == "stores.base"
    assert f"store {store.url}: write_pairs on window 'w' failed (OperationalError: database is locked); retry 1 of 5 in" \
        in record.getMessage()
    assert store.stats.retries == 1


def test_fencing_is_logged(caplog):
    """A stale owner's refused checkpoint: a WARNING with the FencingError's text."""
    store = stores.open_store("memory://fencing-log")

    def newest_10(total, prefix):
        return len(total) - len(prefix) >= 10

    concat = mta.Monoid(lambda a, b: a + b, (), name="concat")
    options = dict(store=store, window_id="fenced", buffer_size=1, cache_size=1)
    a = AmortizedMTA(concat, newest_10, **options)
    for i in range(20):
        a.push((i,))
    a.checkpoint()
    b = AmortizedMTA(concat, newest_10, **options)  # a newer owner takes the window over
    a.push((20,))
    with caplog.at_level(logging.WARNING, logger="stores"), pytest.raises(stores.FencingError) as info:
        a.checkpoint()
    (record,) = [r for r in caplog.records if r.name == "stores.window"]
    assert record.levelno == logging.WARNING and record.getMessage() == str(info.value)
    assert "'fenced'" in record.getMessage() and "checkpoint refused" in record.getMessage()
    b.checkpoint()  # the owner's go on


# -- the wheel in a fresh virtualenv -------------------------------------------------------------
OFFLINE = re.compile(r"Failed to establish a new connection|Temporary failure in name resolution|"
                     r"Network is unreachable|ProxyError|Could not find a version that satisfies the requirement setuptools")


def pip(python: Path, *args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1800)
    if done.returncode and OFFLINE.search(done.stdout + done.stderr):
        pytest.skip(f"PyPI is unreachable: pip {args[0]} needs it ({OFFLINE.search(done.stdout + done.stderr)[0]})")
    assert done.returncode == 0, f"pip {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_wheel_in_a_fresh_venv_runs_the_demo(tmp_path):
    """Build the wheel from the package's files alone (no deprecation warning);
    install it in a new virtualenv that sees neither this environment's
    packages nor the source tree: bare, ``mta-spark`` names the spark extra;
    with ``[spark]``, ``mta-spark demo`` on a small profile exits 0 and writes
    its windows and plot."""
    java = os.environ.get("JAVA_HOME") or (shutil.which("java") and
                                           os.path.dirname(os.path.dirname(os.path.realpath(shutil.which("java")))))
    if not java:
        pytest.fail("no java on PATH: install a JDK 17 (apt-get install openjdk-17-jre-headless)", pytrace=False)
    src, dist, env_dir, work = (tmp_path / n for n in ("src", "dist", "venv", "work"))
    # the build sees what the Dockerfile and submit.sh copy, not a stale build/ or egg-info
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME", "VIRTUAL_ENV",
                        "PYTHONWARNINGS")}
    built = pip(Path(sys.executable), "wheel", "--no-deps", "-v", "--wheel-dir", str(dist), str(src), cwd=work, env=env)
    warnings = [line for line in (built.stdout + built.stderr).splitlines() if re.search(r"(?i)deprecat", line)]
    assert not warnings, "the build warns:\n" + "\n".join(warnings)
    (wheel,) = dist.glob("*.whl")
    # platform-tagged when pyproject's optional extension (mta/_native.c) is configured, with or without a compiler
    assert re.fullmatch(rf"mta_windows-{re.escape(mta.__version__)}-(py3-none-any|cp3\d+-cp3\d+-\w+)\.whl",
                        wheel.name), wheel.name

    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    python, script = env_dir / "bin" / "python", env_dir / "bin" / "mta-spark"
    env.update(PATH=f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}", JAVA_HOME=java, MPLCONFIGDIR=str(tmp_path / "mpl"))

    # the bare package: the console script names the extra
    pip(python, "install", str(wheel), cwd=work, env=env)
    bare = subprocess.run([str(script), "demo"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert bare.returncode == 2 and INSTALL in bare.stderr and len(bare.stderr.splitlines()) == 1, bare.stderr
    assert "Traceback" not in bare.stderr

    pip(python, "install", f"{wheel}[spark]", cwd=work, env=env)
    where = subprocess.run([str(python), "-c", "import mta, spark_ops; print(mta.__file__); print(spark_ops.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr
    for path in where.stdout.split():
        assert Path(path).is_relative_to(env_dir) and not Path(path).is_relative_to(ROOT), path
    version = subprocess.run([str(script), "--version"], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert version.stdout == f"mta-spark {mta.__version__}\n", version.stdout + version.stderr

    demo = subprocess.run([str(script), "demo", "--hosts", "10", "--rows", "3000", "--hours", "6", "--out", "out"],
                          cwd=work, env=env, capture_output=True, text=True, timeout=1200)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    out = work / "out"
    assert (out / "host.png").is_file() and (out / "host.png").stat().st_size > 0
    assert any((out / "windows").glob("*.parquet"))
    assert "windows match pandas" in demo.stdout
    assert re.search(r"Spark UI: http://\S+:\d+", demo.stderr), demo.stderr  # on by default
