"""The deployment files: docker-compose.yml, Dockerfile, .dockerignore,
.env.example and deploy/ (spark-submit recipes, the image's entrypoint and
Spark configuration, Couchbase set-up, Kubernetes manifests).

No Docker engine runs on the development machines, so what Docker would do is
checked statically:

* the compose file and every manifest parse; every job's command is a real
  ``mta-spark`` subcommand with real options (``spark_ops.cli.build_parser``),
  and so are the commands in deploy/README.md and the README's cluster section;
* images are pinned; the Dockerfile's Spark, Python and Java versions are the
  project's (pyproject.toml, the installed pyspark); the image's Python
  dependencies are pinned (deploy/docker/constraints.txt) within pyproject's ranges;
* store URLs name the services, ports, bucket/scope/collection and credential
  variables that exist (parsed with the stores' own URL parsers), and the
  credential variables are the ones the stores read;
* every ``${VAR}`` of the compose file is in .env.example; no password or token
  is committed as a literal;
* Redis's NetworkPolicy admits the Spark pods of the jobs, by the labels the
  manifests, submit.sh and the README give them, and no other pod.

What runs without Docker runs for real:

* the spark-submit recipe (deploy/submit.sh: ``pip wheel --no-deps``, the wheel
  shipped with ``--py-files`` to a Python that does not have the project,
  deploy/mta_spark_main.py) on ``local[2]``, against a Redis whose password
  comes from the environment;
* a Spark standalone master and worker started with the compose file's own
  commands through the image's entrypoint, running the compose file's
  ``stream`` job with the image's spark-defaults.conf (RocksDB state store);
* the image's entrypoint: commands as given, the Kubernetes ``driver`` mode
  (spark-submit of the entry file) and ``executor`` mode (Spark's executor
  backend, which finds no driver here), also under a uid without a passwd entry;
  its refusal of placeholder passwords;
* deploy/docker/couchbase-init.sh against a stand-in of Couchbase's REST API.
"""

from __future__ import annotations

import base64
import fnmatch
import importlib.metadata
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

try:
    import tomllib  # novermin: the except below covers Python 3.10
except ModuleNotFoundError:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml not installed: pip install -e '.[test]'")

import mta  # noqa: E402
from spark_ops import cli  # noqa: E402
from stores.couchbase_url import parse_couchbase_url  # noqa: E402
from stores.redis_url import parse_redis_url  # noqa: E402

from tests.conftest import free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
ENV_EXAMPLE = ROOT / ".env.example"
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
ENTRYPOINT = DEPLOY / "docker" / "entrypoint.sh"
SUBMIT = DEPLOY / "submit.sh"
ENTRY_FILE = DEPLOY / "mta_spark_main.py"
COUCHBASE_INIT = DEPLOY / "docker" / "couchbase-init.sh"
SPARK_CONF_DIR = DEPLOY / "docker" / "conf"
SECRET_EXAMPLE = K8S / "secret.yaml.example"
CREDENTIALS = {"MTA_REDIS_PASSWORD", "MTA_REDIS_USERNAME", "COUCHBASE_USERNAME", "COUCHBASE_PASSWORD"}
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
JOBS = ("demo", "run", "stream")
SPARK_SERVICES = ("spark-master", "spark-worker-1", "spark-worker-2")
SECRETISH = re.compile(r"(?i)(passw(or)?d|secret|token|api[_-]?key|credential)")
PLACEHOLDERS = {"", "change-me", "REPLACE_ME", "...", "***"}
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = mta.__version__  # pyproject.toml's dynamic version


# -- helpers: .env, compose interpolation ---------------------------------------------
def env_example() -> dict[str, str]:
    """The assignments of .env.example (dotenv syntax: NAME=value, # comments)."""
    env = {}
    for n, line in enumerate(ENV_EXAMPLE.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", line)
        assert m, f".env.example line {n} is not NAME=value: {line!r}"
        value = m.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[m.group(1)] = value
    return env


def env_alternatives(name: str) -> list[str]:
    """Values of NAME given in .env.example's comments (``# NAME=value``)."""
    found = []
    for line in ENV_EXAMPLE.read_text().splitlines():
        m = re.fullmatch(rf"#\s*{name}=(.*)", line.strip())
        if m:
            found.append(m.group(1).strip().strip("'\""))
    return found


_VAR = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}"
                  r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's interpolation: ``$$``, ``$VAR``, ``${VAR}``, ``${VAR:-default}``,
    ``${VAR-default}``, ``${VAR:?error}``, ``${VAR?error}``, ``${VAR:+alt}``."""
    def sub(m):
        if m.group("escaped"):
            return "$"
        name = m.group("braced") or m.group("plain")
        op, arg = m.group("op"), m.group("arg") or ""
        value = env.get(name)
        if op == ":-":
            return value if value else arg
        if op == "-":
            return arg if value is None else value
        if op in (":?", "?"):
            assert value is not None and (op == "?" or value), f"${{{name}}} is required: {arg}"
            return value
        if op == ":+":
            return arg if value else ""
        if op == "+":
            return "" if value is None else arg
        assert value is not None, f"${{{name}}} has neither a value in .env.example nor a default"
        return value
    return _VAR.sub(sub, text)


def variables(text: str) -> set[str]:
    return {m.group("braced") or m.group("plain") for m in _VAR.finditer(text) if not m.group("escaped")}


def strings(obj):
    """Every string in a parsed YAML document (keys excluded)."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


def resolve(obj, env: dict[str, str]):
    if isinstance(obj, str):
        return interpolate(obj, env)
    if isinstance(obj, dict):
        return {k: resolve(v, env) for k, v in obj.items()}
    if isinstance(obj, list):
        return [resolve(v, env) for v in obj]
    return obj


def raw_compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def compose(env: dict[str, str] | None = None) -> dict:
    """The compose file as docker compose sees it with .env.example as .env."""
    return resolve(raw_compose(), env_example() if env is None else env)


def argv(service: dict) -> list[str]:
    command = service.get("command", [])
    return shlex.split(command) if isinstance(command, str) else list(command)


def environment(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def option(args: list[str], name: str) -> str | None:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def mta_spark_args(args: list[str]) -> list[str] | None:
    """The arguments after ``mta-spark`` (or deploy/mta_spark_main.py), if any."""
    for i, a in enumerate(args):
        if a == "mta-spark" or a.endswith("/mta-spark") or a.endswith("mta_spark_main.py"):
            return args[i + 1:]
    return None


def parse_mta_spark(args: list[str], where: str):
    try:
        ns = cli.build_parser().parse_args(args)
    except cli.CLIError as e:
        pytest.fail(f"{where}: not a valid mta-spark command ({e}): {shlex.join(args)}")
    except SystemExit:
        pytest.fail(f"{where}: mta-spark would only print its help: {shlex.join(args)}")
    return ns


def yaml_documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def k8s_documents() -> list[tuple[Path, dict]]:
    return [(p, d) for p in sorted(K8S.glob("*.y*ml")) for d in yaml_documents(p)]


def k8s_kind(kind: str) -> list[dict]:
    return [d for _, d in k8s_documents() if d.get("kind") == kind]


def image_pinned(image: str) -> bool:
    """An explicit version tag (not latest) or a digest."""
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:  # no tag (a ':' belongs to a registry port)
        return False
    return tag != "latest" and bool(re.search(r"\d", tag))


def docker_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def docker_stages() -> list[tuple[str | None, list[tuple[str, str]]]]:
    """The Dockerfile's build stages: (name or None, the instructions after its FROM)."""
    stages = []
    for word, rest in docker_instructions():
        if word == "FROM":
            words = [w for w in rest.split() if not w.startswith("--platform")]
            stages.append((words[2] if len(words) == 3 and words[1].upper() == "AS" else None, []))
        elif stages:
            stages[-1][1].append((word, rest))
    return stages


def dockerfile_env() -> dict[str, str]:
    env = {}
    for word, rest in docker_instructions():
        if word == "ENV":
            for token in shlex.split(rest):
                k, _, v = token.partition("=")
                env[k] = v
    return env


def pyspark_range():
    """The pyspark versions pyproject's spark extra allows."""
    from packaging.requirements import Requirement

    pins = [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"]["spark"]]
    pins = [r for r in pins if r.name == "pyspark"]
    assert len(pins) == 1, f"pyproject's spark extra should name pyspark once: {pins}"
    return pins[0].specifier


def java_home() -> str | None:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return os.path.dirname(os.path.dirname(os.path.realpath(java))) if java else None


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


NO_JAVA = "java not found: install a JDK 17 (apt-get install openjdk-17-jre-headless)"


# -- the compose file ---------------------------------------------------------------
def test_compose_file_parses_and_its_services_fit_together():
    data = compose()
    services = data["services"]
    for name in ("redis", "couchbase", "couchbase-init", *SPARK_SERVICES, "demo", "run", "stream"):
        assert name in services, f"docker-compose.yml has no service {name}"
    declared = set(data.get("volumes") or {})
    for name, svc in services.items():
        for volume in svc.get("volumes", []):
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume.get("source")
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which does not exist"
            else:
                assert source in declared, f"{name} uses volume {source}, not declared under volumes:"
        for dep, how in (svc.get("depends_on") or {}).items():
            assert dep in services, f"{name} depends on {dep}, which is not a service"
            condition = how["condition"] if isinstance(how, dict) else "service_started"
            assert condition in ("service_started", "service_healthy", "service_completed_successfully")
            if condition == "service_healthy":
                assert "test" in (services[dep].get("healthcheck") or {}), \
                    f"{name} waits for {dep} to be healthy, but {dep} has no healthcheck"
            if condition == "service_completed_successfully":
                assert services[dep].get("restart", "no") == "no", f"{dep} is a one-shot: restart must be 'no'"

    # one project image for the master, the workers and the jobs, built from ./Dockerfile
    images = {services[s]["image"] for s in (*SPARK_SERVICES, *JOBS)}
    assert images == {f"mta-windows:{VERSION}"}, f"Spark services and jobs must share one image: {images}"
    for s in (*SPARK_SERVICES, *JOBS):
        build = services[s]["build"]
        assert (ROOT / build["context"] / build.get("dockerfile", "Dockerfile")).resolve() == DOCKERFILE

    # Redis persists with an append-only file; Redis, Couchbase and Spark have health checks
    assert option(argv(services["redis"]), "--appendonly") == "yes"
    for s in ("redis", "couchbase", "spark-master", "spark-worker-1", "spark-worker-2"):
        assert services[s]["healthcheck"]["test"], f"{s} has no healthcheck"
    init = services["couchbase-init"]
    assert init["depends_on"]["couchbase"]["condition"] == "service_healthy"
    script = [v.split(":")[0] for v in init["volumes"] if "couchbase-init.sh" in v]
    assert script and (ROOT / script[0]).resolve() == COUCHBASE_INIT
    assert init["entrypoint"][-1] == [v.split(":")[1] for v in init["volumes"] if "couchbase-init.sh" in v][0]

    # the jobs wait for the stores and the workers; run reads what demo writes
    for job in JOBS:
        deps = services[job]["depends_on"]
        assert deps["redis"]["condition"] == "service_healthy"
        assert deps["couchbase-init"]["condition"] == "service_completed_successfully"
        assert {"spark-worker-1", "spark-worker-2"} <= set(deps)
    assert services["run"]["depends_on"]["demo"]["condition"] == "service_completed_successfully"
    assert services["stream"].get("profiles") == ["stream"]


def test_driver_and_executors_share_the_paths_of_the_jobs():
    services = compose()["services"]
    for name in (*JOBS, "spark-worker-1", "spark-worker-2"):
        assert "mta-data:/data" in services[name]["volumes"], f"{name} must mount mta-data at /data"
    demo = cli.build_parser().parse_args(mta_spark_args(argv(services["demo"])))
    run = cli.build_parser().parse_args(mta_spark_args(argv(services["run"])))
    stream = cli.build_parser().parse_args(mta_spark_args(argv(services["stream"])))
    for path in (demo.out, run.input, run.output, stream.input, stream.output, stream.checkpoint):
        assert path.startswith("/data/"), f"{path} is not on the shared volume /data"
    assert run.input == demo.out + "/input", "run reads the readings demo writes (OUT/input)"
    # the image creates the stream's input directory (a new volume copies it)
    assert any(w == "RUN" and stream.input in r for w, r in docker_instructions())


def test_every_job_command_is_a_real_mta_spark_command():
    services = compose()["services"]
    master = argv(services["spark-master"])
    master_url = f"spark://{option(master, '--host')}:{option(master, '--port')}"
    commands = {}
    for name, svc in services.items():
        args = mta_spark_args(argv(svc))
        if args is None:
            continue
        ns = parse_mta_spark(args, f"docker-compose.yml service {name}")
        commands[name] = ns.command
        assert ns.master == master_url, f"{name} runs on {ns.master}, not on the cluster's master {master_url}"
        assert ns.store, f"{name} should keep its windows in a store (--store)"
    assert commands == {"demo": "demo", "run": "run", "stream": "stream"}

    # the Spark daemons: the workers register at the master's address; health checks use the UI ports
    assert master[:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    assert option(master, "--host") == "spark-master" == services["spark-master"]["hostname"]
    assert f"{option(master, '--webui-port')}" in " ".join(services["spark-master"]["healthcheck"]["test"])
    for w in ("spark-worker-1", "spark-worker-2"):
        worker = argv(services[w])
        assert worker[:2] == ["spark-class", "org.apache.spark.deploy.worker.Worker"]
        assert worker[-1] == master_url
        assert f":{option(worker, '--webui-port')}/" in " ".join(services[w]["healthcheck"]["test"])
        assert re.fullmatch(r"\d+", option(worker, "--cores")) and re.fullmatch(r"\d+[mg]", option(worker, "--memory"))


def test_image_spark_defaults_hold_the_settings_of_mta_spark_sessions():
    """The image's spark-defaults.conf gives sessions spark-submit starts
    what mta-spark sets on its own (spark_ops.session.SESSION_DEFAULTS, and
    PYTHON_SOCKET_CONF, which only the SparkContext's start takes), value
    for value."""
    from spark_ops.session import PYTHON_SOCKET_CONF, SESSION_DEFAULTS

    text = (ROOT / "deploy" / "docker" / "conf" / "spark-defaults.conf").read_text()
    settings = dict(line.split(None, 1) for line in text.splitlines() if line.strip() and not line.startswith("#"))
    for key, value in {**SESSION_DEFAULTS, **PYTHON_SOCKET_CONF}.items():
        assert settings.get(key, "").strip() == value, f"spark-defaults.conf: {key} is not {value}"


def test_every_yaml_file_parses():
    files = [COMPOSE, *sorted(DEPLOY.rglob("*.y*ml"))]
    assert len(files) >= 6
    for path in files:
        docs = yaml_documents(path)
        assert docs, f"{path} is empty"
        if K8S in path.parents:
            for doc in docs:
                for field in ("apiVersion", "kind"):
                    assert doc.get(field), f"{path}: a document without {field}"
                assert doc["metadata"]["name"], f"{path}: a {doc['kind']} without a name"


# -- images and versions ----------------------------------------------------------------
def test_every_image_is_pinned():
    images = {f"docker-compose.yml {n}": s["image"] for n, s in compose()["services"].items() if "image" in s}
    for path, doc in k8s_documents():
        if doc["kind"] == "SparkApplication":
            images[f"{path.name} {doc['metadata']['name']}"] = doc["spec"]["image"]
        for container in (doc.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])):
            images[f"{path.name} {container['name']}"] = container["image"]
    assert len(images) >= 10
    for where, image in images.items():
        assert image_pinned(image), f"{where}: image {image!r} is not pinned to a version"
    stages = set()
    froms = [r for w, r in docker_instructions() if w == "FROM"]
    assert froms
    for line in froms:
        words = [w for w in line.split() if not w.startswith("--platform")]
        image = words[0]
        assert image in stages or image_pinned(image), f"Dockerfile: FROM {image} is not pinned"
        if len(words) == 3 and words[1].upper() == "AS":
            stages.add(words[2])


def test_dockerfile_versions_are_the_projects():
    import pyspark

    instructions = docker_instructions()
    args = dict(r.split("=", 1) for w, r in instructions if w == "ARG" and "=" in r)
    spark = args["SPARK_VERSION"]
    # the image's Spark is the one installed here, and within the range the spark extra allows
    assert spark == pyspark.__version__ == "4.3.0", "the Dockerfile's Spark, the installed pyspark and the facts disagree"
    assert spark in pyspark_range(), f"the Dockerfile's Spark {spark} is outside pyproject's {pyspark_range()}"
    runs = " ".join(r for w, r in instructions if w == "RUN")
    assert '"pyspark==${SPARK_VERSION}"' in runs

    # the image's Python is 3.11, within requires-python; this machine's may be any it allows
    low = re.fullmatch(r">=\s*(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"])
    assert sys.version_info[:2] >= (int(low.group(1)), int(low.group(2)))
    for line in (r for w, r in instructions if w == "FROM"):
        image = line.split()[0]
        if image.startswith("python:"):
            m = re.match(r"python:(\d+)\.(\d+)\.\d+-", image)
            assert m and (int(m.group(1)), int(m.group(2))) == (3, 11), f"FROM {image}: not Python 3.11.x"
            assert (int(m.group(1)), int(m.group(2))) >= (int(low.group(1)), int(low.group(2)))
    env = dockerfile_env()
    assert env["SPARK_HOME"] == "/opt/venv/lib/python3.11/site-packages/pyspark"
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == "/opt/venv/bin/python"
    assert "python -m venv /opt/venv" in runs

    # Java 17 from Debian, JAVA_HOME pointing at it; this machine's, which the real runs below
    # use, any Spark 4 runs on (17 or newer)
    assert "openjdk-17-jre-headless" in runs and env["JAVA_HOME"] == "/usr/lib/jvm/java-17"
    assert "/usr/lib/jvm/java-17" in runs
    if shutil.which("java"):
        out = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
        major = re.search(r'version "(?:1\.)?(\d+)', out)
        assert major and int(major.group(1)) >= 17, f"this machine's Java is older than 17: {out}"

    # the project's wheel (built with its LICENSE) with the extras the services need
    # (spark brings matplotlib, for demo's plot)
    extras = re.search(r"mta_windows-\*\.whl\)\[([a-z,]+)\]", runs)
    assert extras and set(extras.group(1).split(",")) >= {"spark", "redis", "couchbase"}
    assert any(r.startswith("matplotlib") for r in PYPROJECT["project"]["optional-dependencies"]["spark"])
    copies = [r.split() for w, r in instructions if w == "COPY"]
    assert any("pyproject.toml" in c and "LICENSE" in c for c in copies), "the wheel stage must copy LICENSE"
    assert "pip wheel --no-deps" in runs

    # an unprivileged user, tini, the entrypoint and the entry file
    users = [r for w, r in instructions if w == "USER"]
    assert users and users[-1] not in ("root", "0") and not users[-1].startswith(("root:", "0:"))
    entrypoint = json.loads([r for w, r in instructions if w == "ENTRYPOINT"][-1])
    assert entrypoint == ["/usr/bin/tini", "--", "/opt/mta/entrypoint.sh"]
    copies = {tuple(r.split()[-2:]) for w, r in instructions if w == "COPY" and not r.startswith("--from")}
    assert ("deploy/docker/entrypoint.sh", "/opt/mta/entrypoint.sh") in copies
    assert ("deploy/mta_spark_main.py", "/opt/mta/mta_spark_main.py") in copies
    assert ("deploy/docker/conf/", "/opt/mta/conf/") in copies and env["SPARK_CONF_DIR"] == "/opt/mta/conf"

    # the SparkApplications run this image's Spark and entry file
    for app in k8s_kind("SparkApplication"):
        assert app["spec"]["sparkVersion"] == spark
        assert app["spec"]["image"].endswith(f"/mta-windows:{VERSION}")
        assert app["spec"]["mainApplicationFile"] == "local:///opt/mta/mta_spark_main.py"


def test_image_builds_the_compiled_cores_and_fails_without_them():
    """The cores are optional ext-modules: pip builds a wheel without them,
    with a warning only, where no C compiler is, and the slim Python image
    has none.  The wheel stage installs one (the runtime stage does not need
    it), and a RUN after the wheel's install fails the build when either
    compiled module is missing."""
    stages = docker_stages()
    builders = [s for s in stages if any(w == "RUN" and "pip wheel" in r for w, r in s[1])]
    assert len(builders) == 1, "one stage builds the wheel"
    runs = [r for w, r in builders[0][1] if w == "RUN"]
    before_wheel = " ".join(runs[:next(i for i, r in enumerate(runs) if "pip wheel" in r)])
    assert re.search(r"apt-get install\b[^&;]*\bgcc\b", before_wheel) and "libc6-dev" in before_wheel, \
        "the wheel stage must install a C compiler before pip wheel"
    runtime = [r for w, r in stages[-1][1] if w == "RUN"]
    assert not any(re.search(r"\b(gcc|libc6-dev|build-essential)\b", r) for r in runtime), \
        "the runtime stage needs no compiler"
    installed = next(i for i, r in enumerate(runtime) if "mta_windows-*.whl" in r)
    checks = [c for r in runtime[installed:] for c in re.findall(r'python -c "([^"]*)"', r)]
    native = [c for c in checks if "mta.native" in c and "AVAILABLE" in c]
    codec = [c for c in checks if "stores.codec" in c and "PACKS_IN_C" in c]
    assert native and codec, "no RUN checks that the image's compiled cores load"

    # the checks themselves: they pass with the cores and fail without them
    from mta import native as mta_native
    from stores import codec as store_codec

    if not (mta_native.AVAILABLE and store_codec.PACKS_IN_C):
        pytest.skip("the compiled cores are not built here (no C compiler at install): "
                    f"{mta_native.WHY_NOT or 'stores._codec missing'}")
    env = {k: v for k, v in os.environ.items() if k != "MTA_PURE_PYTHON"}
    env["PYTHONPATH"] = str(ROOT)
    for code in native + codec:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        done = subprocess.run([sys.executable, "-c", code], env={**env, "MTA_PURE_PYTHON": "1"},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and "AssertionError" in done.stderr, f"{code!r} passes without the cores"


CONSTRAINTS = DEPLOY / "docker" / "constraints.txt"


def _constraints() -> dict[str, str]:
    """deploy/docker/constraints.txt: canonical name -> pinned version."""
    from packaging.utils import canonicalize_name

    pins = {}
    for n, line in enumerate(CONSTRAINTS.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)", line)
        assert m, f"constraints.txt line {n} is not NAME==VERSION: {line!r}"
        name = canonicalize_name(m.group(1))
        assert name not in pins, f"constraints.txt pins {name} twice"
        pins[name] = m.group(2)
    return pins


def _image_install() -> str:
    """The runtime stage's RUN that pip-installs the project's wheel."""
    installs = [r for w, r in docker_stages()[-1][1] if w == "RUN" and "mta_windows-*.whl" in r]
    assert len(installs) == 1, "one RUN of the runtime stage installs the wheel"
    return installs[0]


def test_image_installs_its_python_dependencies_at_pinned_versions():
    """The image's pip install takes deploy/docker/constraints.txt (-c), and every
    package pyproject.toml names for the extras the image installs is pinned
    there, within pyproject's range; pyspark at the Dockerfile's SPARK_VERSION."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    pins = _constraints()
    copied = [r.split() for w, r in docker_stages()[-1][1] if w == "COPY" and "constraints.txt" in r]
    assert [c[:-1] for c in copied] == [["deploy/docker/constraints.txt"]], "the runtime stage copies constraints.txt"
    install = _image_install()
    words = shlex.split(install.split("pip install", 1)[1].split("&&", 1)[0])
    given = [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-c", "--constraint")]
    given += [w.split("=", 1)[1] for w in words if w.startswith("--constraint=")]
    assert given == [copied[0][-1]], f"the image's pip install does not take {copied[0][-1]} as constraints: {words}"

    extras = PYPROJECT["project"]["optional-dependencies"]
    installed_extras = re.search(r"mta_windows-\*\.whl\)\[([a-z,]+)\]", install).group(1).split(",")
    wanted = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    wanted += [Requirement(r) for extra in installed_extras for r in extras[extra]]
    assert {canonicalize_name(r.name) for r in wanted} >= {"pyspark", "pandas", "pyarrow", "numpy", "py4j",
                                                           "msgpack", "redis", "hiredis", "couchbase", "matplotlib"}
    for r in wanted:
        name = canonicalize_name(r.name)
        assert name in pins, f"constraints.txt does not pin {name} (pyproject: {r})"
        assert r.specifier.contains(Version(pins[name]), prereleases=True), \
            f"constraints.txt pins {name}=={pins[name]}, outside pyproject's {r}"
    spark = dict(r.split("=", 1) for w, r in docker_instructions() if w == "ARG" and "=" in r)["SPARK_VERSION"]
    assert pins["pyspark"] == spark, f"constraints.txt pins pyspark {pins['pyspark']}, the image installs {spark}"


def test_constraints_pin_what_the_pinned_packages_require():
    """Each pinned package's requirements on the image's Python (its FROM line's,
    on Linux) are pinned too, at versions they accept: pip resolves nothing
    unpinned.  Read from the metadata of the pinned versions installed here."""
    from packaging.markers import default_environment
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    pins = _constraints()
    image = [r.split()[0] for w, r in docker_instructions() if w == "FROM"][-1]
    python = re.match(r"python:(\d+\.\d+\.\d+)-", image).group(1)
    marker_env = {**default_environment(), "python_version": python.rsplit(".", 1)[0],
                  "python_full_version": python, "sys_platform": "linux", "platform_system": "Linux",
                  "os_name": "posix", "implementation_name": "cpython", "platform_python_implementation": "CPython",
                  "extra": ""}
    read = []
    for name, version in pins.items():
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        if dist.version != version:
            continue
        read.append(name)
        for text in dist.requires or []:
            r = Requirement(text)
            if r.marker is not None and not any(r.marker.evaluate({**marker_env, "platform_machine": machine})
                                                for machine in ("x86_64", "aarch64")):
                continue
            needed = canonicalize_name(r.name)
            assert needed in pins, f"{name}=={version} requires {r}, which constraints.txt does not pin"
            assert r.specifier.contains(Version(pins[needed]), prereleases=True), \
                f"{name}=={version} requires {r}; constraints.txt pins {needed}=={pins[needed]}"
    if not read:
        pytest.skip("none of the pinned versions is installed here to read its requirements from")


def _dockerignored(path: str, patterns: list[str]) -> bool:
    ignored = False
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        negate = pattern.startswith("!")
        p = pattern[1:] if negate else pattern
        p = p.strip("/")
        if any(fnmatch.fnmatch(prefix, p) or (p.startswith("**/") and fnmatch.fnmatch(prefix.split("/")[-1], p[3:]))
               for prefix in prefixes):
            ignored = not negate
    return ignored


def test_build_context_has_what_the_dockerfile_copies_and_no_secrets():
    patterns = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    sources = []
    for word, rest in docker_instructions():
        if word == "COPY" and not rest.startswith("--from"):
            sources += rest.split()[:-1]
    assert sources
    for source in sources:
        assert (ROOT / source).exists(), f"Dockerfile copies {source}, which does not exist"
        assert not _dockerignored(source, patterns), f".dockerignore leaves {source} out of the build context"
    for secret in (".env", ".venv/bin/python", ".git/config", "bench/results/exp1.json", "demo-output/x",
                   "mta/_native.cpython-311-x86_64-linux-gnu.so", "stores/_codec.cpython-311-x86_64-linux-gnu.so"):
        assert _dockerignored(secret, patterns), f".dockerignore lets {secret} into the build context"


# -- stores, ports, credentials ----------------------------------------------------------
def _store_variables() -> set[str]:
    """The environment variables the store backends read."""
    names = set()
    for module in ("redis_store.py", "couchbase_store.py"):
        source = (ROOT / "stores" / module).read_text()
        names |= set(re.findall(r'environ(?:\.get)?\(\s*"([A-Z_]+)"', source))
        names |= set(re.findall(r'\(\s*"[a-z]+",\s*"([A-Z_]+)"\s*\)', source))  # ("password", "MTA_REDIS_PASSWORD")
    return names


def test_credentials_are_the_variables_the_stores_read():
    read = _store_variables()
    assert {"MTA_REDIS_PASSWORD", "MTA_REDIS_USERNAME", "COUCHBASE_USERNAME", "COUCHBASE_PASSWORD"} <= read
    raw = raw_compose()
    credentials = set(raw["x-store-credentials"])
    assert credentials and credentials <= read, f"compose passes {credentials - read}, which no store reads"
    for name in ("spark-worker-1", "spark-worker-2", *JOBS):
        assert credentials <= set(environment(compose()["services"][name])), \
            f"{name} lacks store credentials (executors and drivers open the store)"
    secret = yaml_documents(SECRET_EXAMPLE)[0]
    assert secret["kind"] == "Secret" and set(secret["stringData"]) <= read
    submit = SUBMIT.read_text()
    listed = re.search(r"^credentials=\(([^)]*)\)", submit, re.M).group(1).split()
    assert set(listed) == {"MTA_REDIS_PASSWORD", "MTA_REDIS_USERNAME", "COUCHBASE_USERNAME", "COUCHBASE_PASSWORD"}
    assert set(listed) <= read


def _container_ports(svc: dict) -> set[int]:
    ports = {int(p) for p in svc.get("expose", [])}
    for p in svc.get("ports", []):
        ports.add(int(str(p).rsplit(":", 1)[-1].split("/")[0]))
    return ports


def _store_urls() -> list[tuple[str, str, dict]]:
    """(where, URL, resolved services) for every store URL the compose jobs can use:
    with .env.example as it is, and with each alternative MTA_STORE it offers."""
    found = []
    settings = [("", env_example())] + [(f" with MTA_STORE={alt}", {**env_example(), "MTA_STORE": alt})
                                         for alt in env_alternatives("MTA_STORE")]
    for label, env in settings:
        services = compose(env)["services"]
        for name in JOBS:
            found.append((f"{name}{label}", option(argv(services[name]), "--store"), services))
    return found


def test_store_urls_name_the_services_ports_and_collections_of_the_compose_file():
    raw = raw_compose()["services"]
    schemes = set()
    urls = _store_urls()
    assert len({u for _, u, _ in urls}) >= 2, ".env.example should offer the Couchbase store as an alternative"
    for where, url, services in urls:
        scheme = url.split(":", 1)[0]
        schemes.add(scheme)
        if scheme == "redis":
            cfg = parse_redis_url(url)
            assert cfg["password"] is None and cfg["username"] is None, f"{where}: credentials in the URL"
            svc = services.get(cfg["host"])
            assert svc and svc["image"].startswith("redis:"), f"{where}: {cfg['host']} is not the Redis service"
            server_port = int(option(argv(svc), "--port") or 6379)
            assert cfg["port"] == server_port and server_port in _container_ports(svc), \
                f"{where}: port {cfg['port']} is not Redis's"
            # the jobs' password is the server's: the same variable
            required = option(argv(raw[cfg["host"]]), "--requirepass")
            assert variables(required) == variables(raw_compose()["x-store-credentials"]["MTA_REDIS_PASSWORD"]) \
                == {"MTA_REDIS_PASSWORD"}
            assert "MTA_REDIS_PASSWORD" in environment(services[where.split()[0]])
        elif scheme == "couchbase":
            cfg = parse_couchbase_url(url)
            assert cfg["username"] is None and cfg["password"] is None, f"{where}: credentials in the URL"
            host = cfg["netloc"].split(":")[0]
            svc = services.get(host)
            assert svc and svc["image"].startswith("couchbase:"), f"{where}: {host} is not the Couchbase service"
            assert {8091, 11210} <= _container_ports(svc)
            init = environment(services["couchbase-init"])
            assert init["COUCHBASE_HOST"] == host and init["COUCHBASE_REST_PORT"] == "8091"
            assert (cfg["bucket"], cfg["scope"], cfg["collection"]) == \
                (init["COUCHBASE_BUCKET"], init["COUCHBASE_SCOPE"], init["COUCHBASE_COLLECTION"]), \
                f"{where}: {url} is not the bucket/scope/collection couchbase-init creates"
            # the jobs log in as the user couchbase-init creates
            init_raw = environment(raw["couchbase-init"])
            creds = raw_compose()["x-store-credentials"]
            for name in ("COUCHBASE_USERNAME", "COUCHBASE_PASSWORD"):
                assert variables(init_raw[name]) == variables(creds[name]) == {name}
                assert name in environment(services[where.split()[0]])
        else:
            pytest.fail(f"{where}: unexpected store {url}")
    assert schemes == {"redis", "couchbase"}


def test_kubernetes_manifests_fit_together():
    from spark_ops.session import PYTHON_SOCKET_CONF

    services = {d["metadata"]["name"]: d for d in k8s_kind("Service")}
    claims = {d["metadata"]["name"] for d in k8s_kind("PersistentVolumeClaim")}
    accounts = {d["metadata"]["name"] for d in k8s_kind("ServiceAccount")}
    secret = yaml_documents(SECRET_EXAMPLE)[0]
    secrets = {secret["metadata"]["name"]: secret}
    apps = k8s_kind("SparkApplication")
    assert {a["spec"]["arguments"][0] for a in apps} == {"run", "stream"}
    for app in apps:
        name = app["metadata"]["name"]
        assert app["apiVersion"] == "sparkoperator.k8s.io/v1beta2" and app["spec"]["type"] == "Python"
        ns = parse_mta_spark([str(a) for a in app["spec"]["arguments"]], f"SparkApplication {name}")
        cfg = parse_redis_url(ns.store)
        assert cfg["password"] is None
        service = services.get(cfg["host"])
        assert service, f"{name}: --store names {cfg['host']}, which is no Service"
        assert cfg["port"] in {p["port"] for p in service["spec"]["ports"]}
        assert app["spec"]["driver"]["serviceAccount"] in accounts
        mounted = {}
        for volume in app["spec"]["volumes"]:
            assert volume["persistentVolumeClaim"]["claimName"] in claims
        for role in ("driver", "executor"):
            pod = app["spec"][role]
            mounted.update({m["mountPath"]: m["name"] for m in pod["volumeMounts"]})
            names = {e["name"] for e in pod["env"]}
            assert names == CREDENTIALS, f"{name} {role}: the store variables are {names}"
            for e in pod["env"]:
                ref = e["valueFrom"]["secretKeyRef"]
                assert ref["name"] in secrets and ref["key"] == e["name"], f"{name} {role}: {ref}"
                # a Secret holds the keys of the store in use only; a missing required key stops the pod
                assert ref.get("optional") is True, f"{name} {role}: {e['name']} must be an optional reference"
        paths = [getattr(ns, a, None) for a in ("input", "output", "checkpoint")]
        for path in filter(None, paths):
            assert any(path.startswith(m + "/") for m in mounted), f"{name}: {path} is on no shared volume"
        # a SparkContext setting, which the operator's driver takes from sparkConf only
        # (it reads a properties file of its own, not the image's spark-defaults.conf)
        for key, value in PYTHON_SOCKET_CONF.items():
            assert app["spec"]["sparkConf"].get(key) == value, f"{name}: sparkConf has no {key}={value}"
        if ns.command == "stream":
            assert app["spec"]["sparkConf"]["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB
            assert app["spec"]["restartPolicy"]["type"] in ("Always", "OnFailure")
    # Redis takes its password from the same Secret
    redis = [d for d in k8s_kind("Deployment") if d["metadata"]["name"] == "redis"][0]
    container = redis["spec"]["template"]["spec"]["containers"][0]
    assert option(container["args"], "--appendonly") == "yes"
    assert option(container["args"], "--requirepass") == "$(MTA_REDIS_PASSWORD)"
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"]}
    assert env["MTA_REDIS_PASSWORD"] == {"name": "mta-store-credentials", "key": "MTA_REDIS_PASSWORD"}
    assert redis["spec"]["template"]["metadata"]["labels"].items() >= services["redis"]["spec"]["selector"].items()
    for volume in redis["spec"]["template"]["spec"]["volumes"]:
        assert volume["persistentVolumeClaim"]["claimName"] in claims


def test_the_secret_example_is_never_applied():
    """``kubectl apply -f deploy/k8s/`` takes the directory's .yaml, .yml and
    .json files: none may be a Secret, whose placeholders would replace the
    real values (and become Redis's password).  The example lies beside them
    under another name, and no manifest or document says to apply it."""
    applied = [p for p in K8S.iterdir() if p.suffix in (".yaml", ".yml", ".json")]
    assert applied
    for path in applied:
        kinds = [d.get("kind") for d in yaml_documents(path)]
        assert "Secret" not in kinds, f"kubectl apply -f deploy/k8s/ would apply the Secret in {path.name}"
    assert SECRET_EXAMPLE.suffix not in (".yaml", ".yml", ".json")
    assert [d["kind"] for d in yaml_documents(SECRET_EXAMPLE)] == ["Secret"]
    texts = {p.relative_to(ROOT): p.read_text() for p in [*applied, DEPLOY / "README.md", ROOT / "README.md"]}
    for where, text in texts.items():
        for line in text.splitlines():
            if "kubectl apply" in line:
                for name in re.findall(r"-f\s+(\S+)", line):
                    file = K8S / Path(name).name
                    assert file.is_file() and file in applied, f"{where}: applies {name}: {line.strip()}"


def _selects(selector: dict, labels: dict[str, str]) -> bool:
    """Whether a Kubernetes label selector (matchLabels, matchExpressions) selects ``labels``."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
        assert op in ("In", "NotIn", "Exists", "DoesNotExist"), op
    return True


def _spark_pod_labels(role: str, own: dict[str, str]) -> dict[str, str]:
    """A Spark pod's labels: those Spark on Kubernetes sets (and the operator's), and ``own``."""
    labels = {"spark-app-selector": "spark-0123456789abcdef", "spark-app-name": "mta-windows-run",
              "spark-role": role, "spark-version": "4.3.0",
              "sparkoperator.k8s.io/app-name": "mta-windows-run", "sparkoperator.k8s.io/submission-id": "1234"}
    if role == "executor":
        labels.update({"spark-exec-id": "1", "spark-exec-resourceprofile-id": "0"})
    return {**labels, **own}


def _conf_labels(pairs: list[str], role: str) -> dict[str, str]:
    """The pod labels of ``spark.kubernetes.ROLE.label.KEY=VALUE`` settings."""
    prefix = f"spark.kubernetes.{role}.label."
    return dict(p[len(prefix):].split("=", 1) for p in pairs if p.startswith(prefix))


def test_only_the_jobs_spark_pods_reach_redis(tmp_path):
    """A NetworkPolicy lets into the Redis pods, on Redis's port only, the Spark
    driver and executor pods of the SparkApplications, of submit.sh with a
    k8s:// master and of the README's spark-submit command, with the labels
    they give them: not the pods of another Spark application, nor other pods."""
    redis = [d for d in k8s_kind("Deployment") if d["metadata"]["name"] == "redis"][0]
    redis_labels = redis["spec"]["template"]["metadata"]["labels"]
    container = redis["spec"]["template"]["spec"]["containers"][0]
    policies = [p for p in k8s_kind("NetworkPolicy") if _selects(p["spec"]["podSelector"], redis_labels)]
    assert len(policies) == 1, "one NetworkPolicy selects the Redis pods"
    spec = policies[0]["spec"]
    assert "Ingress" in spec["policyTypes"]
    named = {p.get("name"): p["containerPort"] for p in container["ports"]}
    service = [d for d in k8s_kind("Service") if d["metadata"]["name"] == "redis"][0]
    target = service["spec"]["ports"][0]["targetPort"]
    for rule in spec["ingress"]:
        ports = {named.get(p["port"], p["port"]) for p in rule["ports"]}
        assert ports == {named.get(target, target)} == {6379}, f"the policy opens {ports}, not Redis's port only"
        assert all(p.get("protocol", "TCP") == "TCP" for p in rule["ports"])
        for peer in rule["from"]:
            assert set(peer) == {"podSelector"}, f"a peer other than pods of this namespace: {peer}"

    def admitted(labels: dict[str, str]) -> bool:
        return any(_selects(peer["podSelector"], labels) for rule in spec["ingress"] for peer in rule["from"])

    pods = {}
    for app in k8s_kind("SparkApplication"):
        for role in ("driver", "executor"):
            own = app["spec"][role].get("labels") or {}
            pods[f"{app['metadata']['name']} {role}"] = _spark_pod_labels(role, own)
    spy, seen = _spark_submit_spy(tmp_path)
    done = _dry_run(["--master", "k8s://https://kubernetes.example.com:6443", "--deploy-mode", "cluster"],
                    MTA_DRY_RUN="0", SPARK_HOME=str(spy))
    assert done.returncode == 0, done.stderr
    written = seen.read_text().splitlines()
    readme = [shlex.split(c) for _, c in _doc_commands(DEPLOY / "README.md")
              if c.startswith("spark-submit --master k8s://")]
    assert len(readme) == 1, "deploy/README.md: the spark-submit command for Kubernetes"
    confs = [readme[0][i + 1] for i, w in enumerate(readme[0][:-1]) if w == "--conf"]
    for role in ("driver", "executor"):
        pods[f"submit.sh {role}"] = _spark_pod_labels(role, _conf_labels(written, role))
        pods[f"deploy/README.md spark-submit {role}"] = _spark_pod_labels(role, _conf_labels(confs, role))
    for where, labels in pods.items():
        assert admitted(labels), f"{where}: its pods, labelled {labels}, do not reach Redis"

    # and nothing else: Redis itself, another Spark application's pods, a pod of the project not run by Spark
    others = {"the Redis pod": redis_labels,
              "another application's driver": _spark_pod_labels("driver", {}),
              "another application's executor": _spark_pod_labels("executor", {"app.kubernetes.io/part-of": "x"}),
              "a pod labelled part-of only": {"app.kubernetes.io/part-of": "mta-windows"}}
    for where, labels in others.items():
        assert not admitted(labels), f"{where} reaches Redis"


def test_pods_run_unprivileged_and_can_write_the_shared_volume():
    """Pod Security "restricted": non-root, no privilege escalation, every
    capability dropped, the runtime's seccomp profile; fsGroup the image's
    user, so that a fresh volume mounted at /data is writable by it."""
    uid = int(dict(r.split("=", 1) for w, r in docker_instructions() if w == "ARG" and "=" in r)["MTA_UID"])
    for app in k8s_kind("SparkApplication"):
        for role in ("driver", "executor"):
            pod, where = app["spec"][role], f"{app['metadata']['name']} {role}"
            security = pod.get("podSecurityContext") or {}
            assert security.get("runAsNonRoot") is True and security.get("runAsUser") == uid, where
            assert security.get("fsGroup") == uid, f"{where}: fsGroup must be the image's user {uid}"
            assert security.get("seccompProfile") == {"type": "RuntimeDefault"}, where
            container = pod.get("securityContext") or {}
            assert container.get("allowPrivilegeEscalation") is False, where
            assert container.get("capabilities", {}).get("drop") == ["ALL"], where
    redis = [d for d in k8s_kind("Deployment") if d["metadata"]["name"] == "redis"][0]["spec"]["template"]["spec"]
    assert redis["securityContext"]["runAsNonRoot"] is True
    assert redis["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = redis["containers"][0]["securityContext"]
    assert container["allowPrivilegeEscalation"] is False and container["capabilities"]["drop"] == ["ALL"]


#: memory size suffixes: Redis's (k = 1000, kb = 1024), Kubernetes's (K = 1000, Ki = 1024) and
#: compose's (Docker's byte values: k, m, g are powers of 1024)
_SIZES = {"redis": {"": 1, "k": 1000, "kb": 1024, "m": 1000 ** 2, "mb": 1024 ** 2, "g": 1000 ** 3, "gb": 1024 ** 3},
          "k8s": {"": 1, "K": 1000, "Ki": 1024, "M": 1000 ** 2, "Mi": 1024 ** 2, "G": 1000 ** 3, "Gi": 1024 ** 3},
          "compose": {"": 1, "b": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}}


def _bytes(size: str, units: str) -> int:
    """A memory size in bytes, read with ``units``' suffixes (a key of :data:`_SIZES`)."""
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", str(size).strip())
    suffix = m and (m.group(2) if units == "k8s" else m.group(2).lower())
    assert m and suffix in _SIZES[units], f"not a {units} memory size: {size!r}"
    return int(m.group(1)) * _SIZES[units][suffix]


def test_redis_refuses_writes_before_its_container_is_killed():
    """Redis's --maxmemory lies below its container's memory limit, with
    noeviction: at the cap it refuses writes (an error the job sees) instead
    of being killed at the limit or evicting a window's pairs."""
    redis = [d for d in k8s_kind("Deployment") if d["metadata"]["name"] == "redis"][0]
    container = redis["spec"]["template"]["spec"]["containers"][0]
    service = compose()["services"]["redis"]
    for where, args, limit, units in (
            ("k8s/redis.yaml", container["args"], container["resources"]["limits"]["memory"], "k8s"),
            ("docker-compose.yml redis", argv(service), service.get("mem_limit"), "compose")):
        assert option(args, "--maxmemory-policy") == "noeviction", where
        assert option(args, "--maxmemory") and limit, f"{where}: no --maxmemory or no memory limit"
        # room below the limit for the append-only file's rewrite and client buffers
        assert _bytes(option(args, "--maxmemory"), "redis") <= 0.8 * _bytes(limit, units), \
            f"{where}: --maxmemory near the limit {limit}"


def test_a_file_store_on_a_cluster_master_is_warned_about(caplog):
    from spark_ops.cli.store import warn_file_store_on_cluster

    url = "file:///data/state"
    with caplog.at_level("WARNING"):
        for master in ("local[2]", "local", "local-cluster[2,1,1024]"):
            assert not warn_file_store_on_cluster(url, master), master
        for store in (None, "", "redis://redis:6379/0", "couchbase://cb/mta"):
            assert not warn_file_store_on_cluster(store, "k8s://https://k:6443"), store
        assert caplog.records == []
        for master in ("spark://spark-master:7077", "yarn", "k8s://https://k:6443"):
            assert warn_file_store_on_cluster(url, master), master
    assert len(caplog.records) == 3
    for record in caplog.records:
        assert record.levelname == "WARNING" and url in record.getMessage() and "redis://" in record.getMessage()


# -- .env.example and secrets ---------------------------------------------------------------
def test_env_example_defines_every_variable_of_the_compose_file():
    used = set()
    for text in strings(raw_compose()):
        used |= variables(text)
    defined = env_example()
    assert used - set(defined) == set(), f"used in docker-compose.yml, missing from .env.example: {used - set(defined)}"
    assert set(defined) - used == set(), f"in .env.example, unused by docker-compose.yml: {set(defined) - used}"
    compose()  # every ${VAR:?} is satisfied by .env.example


def test_no_secret_is_committed():
    tracked = subprocess.run(["git", "ls-files", "--", ".env", "**/.env"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    assert tracked == [], f"a .env file is committed: {tracked}"

    # compose: secrets only as ${VAR} references, filled from .env
    raw = raw_compose()
    blocks = {"x-store-credentials": raw["x-store-credentials"]}
    blocks.update({name: environment(svc) for name, svc in raw["services"].items()})
    for where, env in blocks.items():
        for key, value in env.items():
            if SECRETISH.search(key) or key == "REDISCLI_AUTH":
                assert re.fullmatch(r"\$\{[A-Z_]+(:?[-?][^}]*)?\}", value), \
                    f"docker-compose.yml {where}: {key} must come from .env as ${{VAR}}, not {value!r}"
                m = re.fullmatch(r"\$\{[A-Z_]+:-([^}]*)\}", value)
                assert not m, f"docker-compose.yml {where}: {key} has a default value"
    for name, svc in raw["services"].items():
        args = argv(svc)
        for flag in ("--requirepass", "--password", "-a"):
            if flag in args:
                assert variables(option(args, flag)), f"{name}: {flag} is a literal"

    # .env.example and the Kubernetes Secret hold placeholders only
    for key, value in env_example().items():
        if SECRETISH.search(key) and not key.endswith("USERNAME"):
            assert value in PLACEHOLDERS, f".env.example: {key}={value!r} is not a placeholder"
    for secret in [*k8s_kind("Secret"), *yaml_documents(SECRET_EXAMPLE)]:
        for key, value in {**secret.get("stringData", {}), **secret.get("data", {})}.items():
            assert value in PLACEHOLDERS, f"Secret {secret['metadata']['name']}: {key} is not a placeholder"
    for path, doc in k8s_documents():
        for container_env in _k8s_env_lists(doc):
            for e in container_env:
                if SECRETISH.search(e["name"]):
                    assert "valueFrom" in e and "value" not in e, f"{path.name}: {e['name']} is a literal"

    # anything that looks like "password = literal" in the deployment files and docs
    assignment = re.compile(r"""(?i)(?:passw(?:or)?d|secret|token)\w*["']?\s*[:=]\s*(?P<v>"[^"]*"|'[^']*'|[^\s"',;)}]+)""")
    files = [COMPOSE, ENV_EXAMPLE, DOCKERFILE, *sorted(p for p in DEPLOY.rglob("*")
                                                       if p.is_file() and "__pycache__" not in p.parts)]
    for path in files:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            line = re.sub(r"\$[{(][^})]*[})]", "$VAR", line)  # ${VAR...}, $(VAR), $(command)
            for m in assignment.finditer(line):
                value = m.group("v").strip("\"'")
                ok = (value in PLACEHOLDERS or value.startswith(("$", "<", "@", "*")) or value.endswith("...")
                      or re.fullmatch(r"[\w.-]+:[A-Z_]+", value))  # a Secret reference name:KEY
                assert ok, f"{path.relative_to(ROOT)}:{n}: a literal secret? {m.group(0)!r}"


REFUSE = DEPLOY / "docker" / "refuse-placeholders.sh"


def _published_placeholders() -> set[str]:
    """The passwords the project's files show in place of real ones: .env.example's,
    secret.yaml.example's and deploy/README.md's examples."""
    found = {v for k, v in env_example().items() if k.endswith("PASSWORD")}
    found |= {v for k, v in yaml_documents(SECRET_EXAMPLE)[0]["stringData"].items() if k.endswith("PASSWORD")}
    for m in re.finditer(r"""PASSWORD=(["'])([^"'$]+)\1""", (DEPLOY / "README.md").read_text()):
        found.add(m.group(2))
    assert {"change-me", "REPLACE_ME", "..."} <= found, found
    return found


def _fake_spark(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment for the entrypoint whose spark-submit only records that it ran."""
    ran = tmp_path / "ran"
    spark = tmp_path / "spark"
    (spark / "bin").mkdir(parents=True)
    (spark / "bin" / "spark-submit").write_text(f'#!/bin/bash\necho "$@" > "{ran}"\n')
    (spark / "bin" / "spark-submit").chmod(0o755)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SPARK_HOME": str(spark), "JAVA_HOME": str(tmp_path)}
    return env, ran


def test_placeholder_passwords_stop_the_image_before_it_starts_anything(tmp_path):
    """The image's entrypoint refuses, naming the variable, any password that is
    still a placeholder the project publishes, in every mode: so the compose
    file's workers and jobs with .env.example copied as it is, and the pods of a
    Secret made from secret.yaml.example; with passwords of one's own they run."""
    env, ran = _fake_spark(tmp_path)

    def entrypoint(*args: str, **extra: str) -> subprocess.CompletedProcess:
        ran.unlink(missing_ok=True)
        return subprocess.run(["bash", str(ENTRYPOINT), *args], env={**env, **extra}, capture_output=True,
                              text=True, timeout=60, cwd=tmp_path)

    driver = ("driver", "--master", "local[1]", "local:///opt/mta/mta_spark_main.py", "run")
    for placeholder in sorted(_published_placeholders()):
        for name in ("MTA_REDIS_PASSWORD", "COUCHBASE_PASSWORD", "COUCHBASE_ADMIN_PASSWORD"):
            for args in (driver, ("touch", str(ran))):
                done = entrypoint(*args, **{name: placeholder})
                assert done.returncode == 78 and not ran.exists(), f"{name}={placeholder}: {args[0]} ran"
                assert f"{name} is still the placeholder" in done.stderr, done.stderr
    done = entrypoint(*driver, MTA_REDIS_PASSWORD="s3cr3t-R3dis-pw", COUCHBASE_PASSWORD="change-me-not")
    assert done.returncode == 0 and ran.read_text().split()[-2:] == list(driver[-2:]), done.stderr

    services = compose()["services"]  # .env.example copied to .env as it is
    chosen = compose({**env_example(), "MTA_REDIS_PASSWORD": "s3cr3t-R3dis-pw", "COUCHBASE_PASSWORD": "s3cr3t-CB-pw",
                      "COUCHBASE_ADMIN_PASSWORD": "s3cr3t-adm1n-pw"})["services"]
    image = f"mta-windows:{VERSION}"
    workers = [n for n, s in services.items() if s.get("image") == image and "MTA_REDIS_PASSWORD" in environment(s)]
    assert set(workers) >= {"spark-worker-1", "spark-worker-2", *JOBS}
    for name in workers:
        done = entrypoint("touch", str(ran), **environment(services[name]))
        assert done.returncode == 78 and not ran.exists(), f"docker-compose.yml {name} starts with change-me"
        assert "MTA_REDIS_PASSWORD" in done.stderr and "COUCHBASE_PASSWORD" in done.stderr and ".env" in done.stderr
        done = entrypoint("touch", str(ran), **environment(chosen[name]))
        assert done.returncode == 0 and ran.exists(), f"docker-compose.yml {name}: {done.stderr}"

    secret = yaml_documents(SECRET_EXAMPLE)[0]["stringData"]
    for app in k8s_kind("SparkApplication"):
        for role, args in (("driver", driver), ("executor", ("executor",))):
            pod_env = {e["name"]: secret[e["valueFrom"]["secretKeyRef"]["key"]]
                       for e in app["spec"][role]["env"] if e["valueFrom"]["secretKeyRef"]["key"] in secret}
            done = entrypoint(*args, **pod_env)
            assert done.returncode == 78 and not ran.exists(), f"{app['metadata']['name']} {role}: {done.stderr}"
            assert "mta-store-credentials" in done.stderr

    # the image holds the check beside its entrypoint
    copies = {tuple(r.split()[-2:]) for w, r in docker_instructions() if w == "COPY" and not r.startswith("--from")}
    target = dict(copies)["deploy/docker/entrypoint.sh"]
    assert ("deploy/docker/refuse-placeholders.sh", str(Path(target).parent / REFUSE.name)) in copies


def test_couchbase_init_refuses_placeholder_passwords_before_provisioning(fake_couchbase):
    """The cluster keeps the administrator password it is provisioned with:
    couchbase-init stops before its first request while either password is
    still .env.example's placeholder.  The compose file mounts the check
    beside the script."""
    raw = raw_compose()["services"]["couchbase-init"]
    mounts = dict(v.split(":")[:2] for v in raw["volumes"])
    init_target = mounts["./deploy/docker/couchbase-init.sh"]
    assert mounts.get(f"./{REFUSE.relative_to(ROOT)}") == str(Path(init_target).parent / REFUSE.name)

    base = environment(compose()["services"]["couchbase-init"])  # .env.example as it is
    base.update(COUCHBASE_HOST="127.0.0.1", COUCHBASE_REST_PORT=str(fake_couchbase.port),
                PATH=os.environ["PATH"], HOME=os.environ.get("HOME", "/tmp"))
    for admin, user in (("change-me", "change-me"), ("adm1n-Pw", "change-me"), ("change-me", "us3r-Pw")):
        env = {**base, "COUCHBASE_ADMIN_PASSWORD": admin, "COUCHBASE_PASSWORD": user}
        done = subprocess.run(["bash", str(COUCHBASE_INIT)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 78, done.stdout + done.stderr
        for name, value in (("COUCHBASE_ADMIN_PASSWORD", admin), ("COUCHBASE_PASSWORD", user)):
            assert (f"{name} is still the placeholder" in done.stderr) == (value == "change-me"), done.stderr
        assert fake_couchbase.requests == [] and fake_couchbase.cluster is None, "it went on to Couchbase"


def _k8s_env_lists(doc: dict):
    spec = doc.get("spec", {})
    for container in spec.get("template", {}).get("spec", {}).get("containers", []):
        yield container.get("env", [])
    for role in ("driver", "executor"):
        if role in spec:
            yield spec[role].get("env", [])


# -- scripts -------------------------------------------------------------------------------
SCRIPTS = sorted(DEPLOY.rglob("*.sh"))


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_scripts_are_valid(script):
    assert os.access(script, os.X_OK), f"{script} is not executable"
    assert script.read_text().startswith("#!/bin/bash\n")
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (apt-get install shellcheck): only bash -n checked")
    done = subprocess.run(["shellcheck", "--shell=bash", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_entry_file_answers_help_and_usage_errors_without_spark():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(ENTRY_FILE), "run", "--help"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0 and "--store URL" in done.stdout
    done = subprocess.run([sys.executable, str(ENTRY_FILE), "run", "--input", "x"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("mta-spark: error:") and len(done.stderr.strip().splitlines()) == 1


class _SessionStarted(Exception):
    pass


@pytest.mark.parametrize("given, named", [
    (["--conf", "spark.sql.session.timeZone=Europe/Paris"], ["--conf"]),
    (["--no-ui", "--master", "local[1]"], ["--master", "--no-ui"]),
    ([], []),
])
def test_entry_file_warns_of_the_session_options_spark_submit_ignores(monkeypatch, capsys, given, named):
    """Under spark-submit the session exists before mta-spark runs: its
    --master, --conf and --no-ui have no effect, and the entry file says so
    before it takes the session."""
    import importlib.util
    import types

    spec = importlib.util.spec_from_file_location("mta_spark_main_under_test", ENTRY_FILE)
    entry = importlib.util.module_from_spec(spec)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    spec.loader.exec_module(entry)

    def started():
        raise _SessionStarted

    builder = types.SimpleNamespace(getOrCreate=started)
    monkeypatch.setitem(sys.modules, "pyspark.sql", types.SimpleNamespace(SparkSession=types.SimpleNamespace(
        builder=builder)))
    args = ["run", "--input", "/data/in", "--output", "/data/out", "--key", "k", "--time", "t", "--value", "v",
            "--agg", "max", "--range", "60", *given]
    with pytest.raises(_SessionStarted):
        entry.main(args)
    err = capsys.readouterr().err
    if not named:
        assert err == ""
        return
    assert err.startswith("mta-spark: warning: ") and len(err.splitlines()) == 1, err
    for flag in named:
        assert flag in err.split(" ignored")[0]
    assert "spark-submit" in err


def test_entrypoint_runs_commands_and_the_kubernetes_driver_and_executor_modes(tmp_path):
    """The image's entrypoint: a command runs as given (with SPARK_LOCAL_IP set to
    the container's address when it has one of its own), ``driver`` is
    spark-submit in client mode with the bind address, ``executor`` starts
    Spark's Kubernetes executor backend, which here finds no driver."""
    home = java_home()
    if home is None:
        pytest.skip(NO_JAVA)
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": str(tmp_path),
           "JAVA_HOME": home, "SPARK_HOME": str(spark_home()), "PYSPARK_PYTHON": sys.executable}
    run = lambda *args, **extra: subprocess.run(["bash", str(ENTRYPOINT), *args], env={**env, **extra},  # noqa: E731
                                                capture_output=True, text=True, timeout=120, cwd=tmp_path)

    done = run()
    assert done.returncode == 0 and done.stdout.startswith("usage: mta-spark"), "no arguments: mta-spark's help"
    address = subprocess.run(["getent", "ahostsv4", socket.gethostname()], capture_output=True,
                             text=True).stdout.split()[:1]
    expected = address[0] if address and not address[0].startswith("127.") else "unset"
    assert run("bash", "-c", 'echo "${SPARK_LOCAL_IP-unset}"').stdout.strip() == expected
    assert run("bash", "-c", 'echo "$SPARK_LOCAL_IP"', SPARK_LOCAL_IP="10.1.2.3").stdout.strip() == "10.1.2.3"

    done = run("driver", "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(ENTRY_FILE),
               "run", "--input", "x", SPARK_DRIVER_BIND_ADDRESS="127.0.0.1", SPARK_LOCAL_IP="127.0.0.1")
    assert done.returncode == 2, done.stdout + done.stderr
    # (spark-submit's PythonRunner passes the Python process's stderr on to stdout)
    assert "mta-spark: error: the following arguments are required: --output" in done.stdout + done.stderr

    port = free_port()  # nothing listens there
    done = run("executor", SPARK_LOCAL_IP="127.0.0.1", SPARK_EXECUTOR_MEMORY="512m",
               SPARK_DRIVER_URL=f"spark://CoarseGrainedScheduler@127.0.0.1:{port}", SPARK_EXECUTOR_ID="1",
               SPARK_EXECUTOR_CORES="1", SPARK_APPLICATION_ID="app-1", SPARK_EXECUTOR_POD_IP="127.0.0.1",
               SPARK_RESOURCE_PROFILE_ID="0", SPARK_EXECUTOR_POD_NAME="mta-exec-1",
               SPARK_JAVA_OPT_0="-Dspark.network.timeout=5s")
    assert done.returncode != 0
    assert f"Failed to connect to /127.0.0.1:{port}" in done.stdout + done.stderr, done.stderr[-3000:]


ANONYMOUS_UID = 1000650000  # as OpenShift picks them: listed in no /etc/passwd


def _nss_wrapper() -> str | None:
    """libnss_wrapper.so where the entrypoint looks for it (the image's libnss-wrapper)."""
    for pattern in ("/usr/lib/*/libnss_wrapper.so", "/usr/lib/libnss_wrapper.so", "/lib/*/libnss_wrapper.so"):
        for path in sorted(Path("/").glob(pattern.lstrip("/"))):
            if path.stat().st_size:
                return str(path)
    return None


def test_entrypoint_gives_a_uid_without_a_passwd_entry_one(tmp_path):
    """Under a uid /etc/passwd does not list, Spark's Hadoop login stops with
    "Invalid UID".  The entrypoint gives the uid an entry through nss_wrapper
    (the image installs libnss-wrapper), with which an executor gets as far as
    its driver; where the library is missing it says so up front.  Run in a
    user namespace that maps this user to that uid."""
    home = java_home()
    if home is None:
        pytest.skip(NO_JAVA)
    as_anonymous = ["unshare", "--user", f"--map-user={ANONYMOUS_UID}", "--map-group=0"]
    if shutil.which("unshare") is None or subprocess.run([*as_anonymous, "true"], capture_output=True).returncode:
        pytest.skip("no unshare, or user namespaces are not allowed here")
    assert subprocess.run(["getent", "passwd", str(ANONYMOUS_UID)], capture_output=True).returncode == 2
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "JAVA_HOME": home, "SPARK_HOME": str(spark_home()),
           "SPARK_LOCAL_IP": "127.0.0.1"}
    run = lambda *args, **extra: subprocess.run([*as_anonymous, "bash", str(ENTRYPOINT), *args],  # noqa: E731
                                                env={**env, **extra}, capture_output=True, text=True, timeout=120,
                                                cwd=tmp_path)
    port = free_port()  # nothing listens there
    executor = dict(SPARK_EXECUTOR_MEMORY="512m", SPARK_DRIVER_URL=f"spark://CoarseGrainedScheduler@127.0.0.1:{port}",
                    SPARK_EXECUTOR_ID="1", SPARK_EXECUTOR_CORES="1", SPARK_APPLICATION_ID="app-1",
                    SPARK_EXECUTOR_POD_IP="127.0.0.1", SPARK_RESOURCE_PROFILE_ID="0",
                    SPARK_EXECUTOR_POD_NAME="mta-exec-1", SPARK_JAVA_OPT_0="-Dspark.network.timeout=5s")
    done = run("executor", **executor)
    logs = done.stdout + done.stderr
    if _nss_wrapper() is None:
        assert f"uid {ANONYMOUS_UID} has no entry in /etc/passwd" in done.stderr and "libnss-wrapper" in done.stderr
        assert "Invalid UID" in logs, logs[-3000:]
        pytest.skip("libnss_wrapper.so is not installed here (apt-get install libnss-wrapper): "
                    "checked only that the entrypoint says so")
    assert "Invalid UID" not in logs and f"Failed to connect to /127.0.0.1:{port}" in logs, logs[-3000:]
    entry = run("bash", "-c", 'getent passwd "$(id -u)"').stdout.strip().split(":")
    assert entry[2:4] == [str(ANONYMOUS_UID), "0"] and entry[5] == str(tmp_path), entry
    assert run("bash", "-c", "getent passwd root").stdout.startswith("root:x:0:0:"), "the other entries stay"


def test_what_the_jobs_write_is_group_0_writable_for_a_uid_the_platform_picks():
    """OpenShift runs the image as a uid of its own choosing in group 0
    (ANONYMOUS_UID above): every directory the image leaves for the jobs to
    write (Spark's worker directory, the working directory, the compose
    volume's mount point, what the image makes with the user) belongs to
    group 0 and gives it the owner's rights, recursively."""
    _, final = docker_stages()[-1]
    runs = [shlex.split(rest) for word, rest in final if word == "RUN"]
    chgrp0, group_rw, made = set(), set(), set()
    for words in runs:
        for command in " ".join(words).split("&&"):
            argv = command.split()
            if argv[:2] == ["chown", "-R"] and argv[2].endswith(":0"):
                chgrp0.update(argv[3:])
            elif argv[:3] == ["chmod", "-R", "g=u"]:
                group_rw.update(argv[3:])
            elif argv[:2] == ["mkdir", "-p"] and "useradd" in words:  # the user's, not the build's
                made.update(argv[2:])
    workdir = [rest for word, rest in final if word == "WORKDIR"][-1]
    mounts = {volume.split(":")[1] for service in compose()["services"].values() if "build" in service
              for volume in service.get("volumes", []) if isinstance(volume, str) and volume.startswith("mta-data:")}
    written = made | mounts | {dockerfile_env()["SPARK_WORKER_DIR"], workdir}
    assert mounts and made, "found no directory the jobs write"

    def covered(path, by):
        return any(path == d or path.startswith(d.rstrip("/") + "/") for d in by)

    assert [p for p in sorted(written) if not covered(p, chgrp0)] == [], f"not group 0's (chown -R ...:0): {chgrp0}"
    assert [p for p in sorted(written) if not covered(p, group_rw)] == [], \
        f"not group-writable (chmod -R g=u): {group_rw}"


def test_entrypoint_puts_the_hadoop_configuration_on_the_executor_classpath(tmp_path):
    """Spark mounts the Hadoop configuration (spark.kubernetes.hadoop.configMapName)
    in its pods and names it in HADOOP_CONF_DIR: the executor's classpath has it
    after Spark's configuration and before the jars, and SPARK_DIST_CLASSPATH
    last, as in Spark's own image; unset, they leave no empty entry."""
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/bash\nprintf "%s\\n" "$@"\n')
    java.chmod(0o755)
    spark = spark_home()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "JAVA_HOME": str(tmp_path / "jdk"),
           "SPARK_HOME": str(spark), "SPARK_CONF_DIR": "/opt/mta/conf", "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_EXECUTOR_MEMORY": "1g", "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.0.0.1:7078",
           "SPARK_EXECUTOR_ID": "1", "SPARK_EXECUTOR_CORES": "1", "SPARK_APPLICATION_ID": "spark-1",
           "SPARK_EXECUTOR_POD_IP": "10.0.0.2", "SPARK_RESOURCE_PROFILE_ID": "0", "SPARK_EXECUTOR_POD_NAME": "exec-1"}

    def classpath(**extra: str) -> list[str]:
        done = subprocess.run(["bash", str(ENTRYPOINT), "executor"], env={**env, **extra}, capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        args = done.stdout.splitlines()
        assert "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend" in args
        return option(args, "-cp").split(":")

    assert classpath() == ["/opt/mta/conf", f"{spark}/jars/*"]
    assert classpath(HADOOP_CONF_DIR="/opt/hadoop/conf", SPARK_EXTRA_CLASSPATH="/opt/extra/*",
                     SPARK_DIST_CLASSPATH="/opt/hadoop/share/a.jar:/opt/hadoop/share/b.jar") == \
        ["/opt/mta/conf", "/opt/hadoop/conf", f"{spark}/jars/*", "/opt/extra/*",
         "/opt/hadoop/share/a.jar", "/opt/hadoop/share/b.jar"]


def test_submit_dry_run_passes_credentials_in_a_file_not_on_the_command_line(tmp_path):
    base = tmp_path / "base.conf"
    base.write_text("spark.executor.memory 3g\n")
    secret, cb_secret = "s3cr3t-R3dis-pw", "s3cr3t-CB-pw"
    env = {**os.environ, "MTA_DRY_RUN": "1", "MTA_SHIP": "archive", "MTA_VENV_ARCHIVE": "/x/mta-venv.tar.gz",
           "SPARK_HOME": str(spark_home()), "MTA_REDIS_PASSWORD": secret, "COUCHBASE_USERNAME": "mta",
           "COUCHBASE_PASSWORD": cb_secret, "PYTHON": sys.executable}
    env.pop("MTA_REDIS_USERNAME", None)
    mta = ["run", "--input", "hdfs:///in", "--output", "hdfs:///out", "--key", "host", "--time", "ts",
           "--value", "mem", "--agg", "max", "--range", "3600", "--store", "redis://redis.example.com:6379/0"]
    done = subprocess.run([str(SUBMIT), "--master", "yarn", "--deploy-mode", "cluster", "--properties-file",
                           str(base), "--", *mta], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr and cb_secret not in done.stdout + done.stderr
    command_line, _, listing = done.stdout.partition("\nproperties:\n")
    command = shlex.split(command_line)
    assert command[0] == str(spark_home() / "bin" / "spark-submit")
    properties_file = option(command, "--properties-file")
    assert properties_file != str(base)
    assert option(command, "--archives") == "/x/mta-venv.tar.gz#environment"
    assert "spark.pyspark.python=./environment/bin/python" in command
    assert not any(c.startswith("spark.pyspark.driver.python") for c in command), "cluster mode: no driver python"
    assert option(command, "--deploy-mode") == "cluster" and option(command, "--master") == "yarn"
    at = command.index(str(ENTRY_FILE))
    assert command[at + 1:] == mta
    parse_mta_spark(command[at + 1:], "submit.sh")
    names = listing.split()
    assert "spark.executor.memory" in names, "the given --properties-file is kept"
    assert "spark.sql.streaming.stateStore.providerClass" in names
    for var in ("MTA_REDIS_PASSWORD", "COUCHBASE_USERNAME", "COUCHBASE_PASSWORD"):
        for prefix in ("spark.executorEnv", "spark.yarn.appMasterEnv"):
            assert f"{prefix}.{var}" in names
    assert not any("MTA_REDIS_USERNAME" in n for n in names), "unset variables are not passed"
    assert not any(n.startswith("spark.kubernetes.") for n in names), "no Kubernetes settings for YARN"
    assert not os.path.exists(properties_file), "the properties file is removed"

    # client mode: the driver runs the local Python
    done = subprocess.run([str(SUBMIT), "--master", "yarn", "--", *mta], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"spark.pyspark.driver.python={sys.executable}" in shlex.split(done.stdout.partition("\n")[0])


def _dry_run(args: list[str], **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in CREDENTIALS and not k.startswith("MTA_K8S_")}
    env.update({"MTA_DRY_RUN": "1", "MTA_SHIP": "archive", "MTA_VENV_ARCHIVE": "/x/mta-venv.tar.gz",
                "SPARK_HOME": str(spark_home()), "PYTHON": sys.executable}, **extra)
    return subprocess.run([str(SUBMIT), *args, "--", "run", "--input", "/data/in", "--output", "/data/out"],
                          capture_output=True, text=True, env=env, timeout=60)


def _spark_submit_spy(tmp_path: Path) -> tuple[Path, Path]:
    """A SPARK_HOME whose spark-submit copies the properties file it is given
    (submit.sh removes its own on exit), and where the copy goes."""
    seen = tmp_path / "seen.properties"
    spy = tmp_path / "spark"
    (spy / "bin").mkdir(parents=True)
    (spy / "bin" / "spark-submit").write_text(
        f'#!/bin/bash\nwhile [ "$1" != --properties-file ]; do shift; done\ncp "$2" "{seen}"\n')
    (spy / "bin" / "spark-submit").chmod(0o755)
    return spy, seen


def _properties(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 0, done.stderr
    return done.stdout.partition("\nproperties:\n")[2].split()


def test_submit_to_kubernetes_passes_secret_references_not_values(tmp_path):
    """With a k8s:// master Spark writes spark.executorEnv.* and
    spark.kubernetes.driverEnv.* as literal values into the pods' specs and
    the driver's config map: submit.sh passes references to a Secret's keys
    instead, for the credential variables set (or listed)."""
    secret, cb_secret = "s3cr3t-R3dis-pw", "s3cr3t-CB-pw"
    master = ["--master", "k8s://https://kubernetes.example.com:6443", "--deploy-mode", "cluster"]
    done = _dry_run(master, MTA_REDIS_PASSWORD=secret, COUCHBASE_USERNAME="mta", COUCHBASE_PASSWORD=cb_secret)
    names = _properties(done)
    assert secret not in done.stdout + done.stderr and cb_secret not in done.stdout + done.stderr
    refs = {n for n in names if ".secretKeyRef." in n}
    assert refs == {f"spark.kubernetes.{role}.secretKeyRef.{var}" for role in ("driver", "executor")
                    for var in ("MTA_REDIS_PASSWORD", "COUCHBASE_USERNAME", "COUCHBASE_PASSWORD")}
    assert not any(re.match(r"spark\.(executorEnv|yarn\.appMasterEnv|kubernetes\.(driver|executor)Env)\.", n)
                   for n in names), f"a credential's value goes to the pods' specs: {names}"
    assert "mta-store-credentials" in done.stderr

    # the properties themselves: NAME:KEY, in the Secret given by MTA_K8S_SECRET; a master from
    # the properties file counts as well
    base = tmp_path / "base.conf"
    base.write_text("spark.master k8s://https://kubernetes.example.com:6443\n")
    spy, seen = _spark_submit_spy(tmp_path)
    done = _dry_run(["--properties-file", str(base)], MTA_DRY_RUN="0", SPARK_HOME=str(spy),
                    MTA_REDIS_PASSWORD=secret, MTA_K8S_SECRET="my-creds",
                    MTA_K8S_SECRET_KEYS="MTA_REDIS_USERNAME,MTA_REDIS_PASSWORD")
    assert done.returncode == 0, done.stderr
    written = seen.read_text()
    assert secret not in written
    for role in ("driver", "executor"):
        for var in ("MTA_REDIS_USERNAME", "MTA_REDIS_PASSWORD"):
            assert f"spark.kubernetes.{role}.secretKeyRef.{var}=my-creds:{var}" in written.splitlines()
    assert not re.search(r"Env\.", written)

    done = _dry_run(master, MTA_K8S_SECRET_KEYS="MTA_REDIS_PASSWORD,NOT_A_STORE_VARIABLE")
    assert done.returncode == 2 and "NOT_A_STORE_VARIABLE" in done.stderr


@pytest.mark.parametrize("option", ["--properties-file", "--py-files", "--deploy-mode", "--master"])
def test_submit_option_without_its_value_is_a_usage_error(option):
    done = _dry_run(["--master", "yarn", option])
    assert done.returncode == 2 and done.stdout == ""
    assert f"submit.sh: {option} needs a value" in done.stderr and "unbound variable" not in done.stderr
    assert "deploy/submit.sh [spark-submit options] -- COMMAND" in done.stderr


def test_submit_keeps_the_state_store_provider_of_the_properties_file(tmp_path):
    base = tmp_path / "base.conf"
    base.write_text("spark.sql.streaming.stateStore.providerClass = com.example.MyProvider\n")
    spy, seen = _spark_submit_spy(tmp_path)
    done = _dry_run(["--master", "yarn", "--properties-file", str(base)], MTA_DRY_RUN="0", SPARK_HOME=str(spy))
    assert done.returncode == 0, done.stderr
    assert ROCKSDB not in seen.read_text() and "com.example.MyProvider" in seen.read_text()
    without = tmp_path / "plain.conf"
    without.write_text("spark.executor.memory 2g\n")
    done = _dry_run(["--master", "yarn", "--properties-file", str(without)], MTA_DRY_RUN="0", SPARK_HOME=str(spy))
    assert done.returncode == 0 and f"spark.sql.streaming.stateStore.providerClass={ROCKSDB}" in seen.read_text()


# -- the documentation's commands ----------------------------------------------------------------
def _doc_commands(path: Path, section: str | None = None) -> list[tuple[int, str]]:
    """Logical command lines of the indented and fenced code blocks of a
    markdown file (continuation lines joined), with their line numbers."""
    lines = path.read_text().splitlines()
    if section:
        start = lines.index(section)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        offset, lines = start, lines[start:end]
    else:
        offset = 0
    commands, fenced, current, first = [], False, "", 0
    for i, line in enumerate(lines, offset + 1):
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        code = line[4:] if line.startswith("    ") else (line if fenced else None)
        if code is None:
            continue
        code = code.strip()
        if not current:
            first = i
        if code.endswith("\\"):
            current += code[:-1] + " "
            continue
        current += code
        if current:
            commands.append((first, current))
        current = ""
    return commands


DOCS_WITH_COMMANDS = [(DEPLOY / "README.md", None), (ROOT / "README.md", "## Running on a cluster")]


def test_documented_commands_are_real():
    services = compose()["services"]
    profiles = {p for s in services.values() for p in s.get("profiles", [])}
    checked = {"mta-spark": 0, "docker compose": 0, "kubectl": 0}
    for path, section in DOCS_WITH_COMMANDS:
        for n, line in _doc_commands(path, section):
            where = f"{path.relative_to(ROOT)}:{n}"
            if "mta_spark_main.py " in line or ("submit.sh" in line and " -- " in line):
                words = shlex.split(line)
                args = words[words.index("--") + 1:] if "submit.sh" in line else mta_spark_args(words)
                parse_mta_spark(args, where)
                checked["mta-spark"] += 1
            if "docker compose" in line:
                words = shlex.split(line.split("docker compose", 1)[1], comments=True)
                ws = iter(words)
                rest = []
                for w in ws:
                    if w == "--profile":
                        assert next(ws) in profiles, f"{where}: no such profile"
                    else:
                        rest.append(w)
                verb, targets = rest[0], [w for w in rest[1:] if not w.startswith("-")]
                if verb in ("kill", "start", "stop", "restart", "logs", "up"):
                    for t in targets:
                        assert t in services, f"{where}: docker compose {verb} {t}: no such service"
                elif verb in ("exec", "cp", "run"):
                    assert targets[0].split(":")[0] in services, f"{where}: no service {targets[0]}"
                checked["docker compose"] += 1
            for m in re.finditer(r"-f (deploy/k8s/[\w.-]+)", line):
                assert (ROOT / m.group(1)).is_file(), f"{where}: {m.group(1)} does not exist"
                checked["kubectl"] += 1
            for m in re.finditer(r"mta-windows:([\w.-]+)", line):
                assert m.group(1) == VERSION, f"{where}: image tag {m.group(1)} is not the project's version"
            if "spark.sql.streaming.stateStore.providerClass" in line:
                assert ROCKSDB in line
            for m in re.finditer(r"MTA_STORE='?([^'\s]+)", line):
                assert m.group(1) in [env_example()["MTA_STORE"], *env_alternatives("MTA_STORE")]
    assert checked["mta-spark"] >= 4 and checked["docker compose"] >= 8 and checked["kubectl"] >= 4, checked
    # the dependencies the --py-files recipe installs on the nodes: the project's own, and the
    # spark and redis extras (the wheel goes with --no-deps)
    recipe = [c for _, c in _doc_commands(DEPLOY / "README.md") if c.startswith("python3.11 -m pip install 'pyspark")]
    assert recipe, "deploy/README.md: the nodes' pip install line is gone"
    listed = {re.split(r"[<>=]", w)[0] for w in shlex.split(recipe[0])[4:]}
    extras = PYPROJECT["project"]["optional-dependencies"]
    wanted = {re.split(r"[<>=]", r)[0] for r in PYPROJECT["project"]["dependencies"] + extras["spark"] + extras["redis"]}
    assert listed == wanted, f"deploy/README.md installs {listed}, the extras need {wanted}"


def test_documented_wheel_names_carry_the_platform_tag():
    """The declared ext-modules make the distribution non-pure: pip tags the
    wheel for its Python and platform even when no compiler built them, so
    no document may promise a py3-none-any wheel."""
    assert PYPROJECT["tool"]["setuptools"]["ext-modules"]
    for path in (DEPLOY / "README.md", ROOT / "README.md", SUBMIT):
        assert "py3-none-any" not in path.read_text(), f"{path.relative_to(ROOT)} names a py3-none-any wheel"
    assert "mta_windows-0.1.0-cp311-cp311-linux_x86_64.whl" in (DEPLOY / "README.md").read_text()


# -- couchbase-init.sh against a stand-in of Couchbase's REST API ------------------------------------
class FakeCouchbase:
    """The REST endpoints couchbase-init.sh calls, with Couchbase's answers."""

    def __init__(self):
        self.cluster = None  # the /clusterInit form once provisioned
        self.buckets: dict[str, dict] = {}
        self.users: dict[str, dict] = {}
        self.requests: list[tuple[str, str, bool, bool]] = []  # method, path, provisioned, authenticated
        self.lock = threading.Lock()

    def handle(self, method: str, path: str, auth: str | None, form: dict) -> tuple[int, object]:
        with self.lock:
            authed = False
            if self.cluster and auth:
                user, _, pw = base64.b64decode(auth.split()[1]).decode().partition(":")
                authed = (user, pw) == (self.cluster["username"], self.cluster["password"])
            self.requests.append((method, path, self.cluster is not None, authed))
            if (method, path) == ("GET", "/pools"):
                return 200, {"isAdminCreds": False}
            if (method, path) == ("POST", "/clusterInit"):
                if self.cluster:
                    return 400, {"errors": {"_": "Cluster is already initialized"}}
                if not (form.get("username") and form.get("password") and form.get("services")):
                    return 400, {"errors": {"_": "missing parameters"}}
                self.cluster = form
                return 200, {}
            if not self.cluster:
                return 404, "unknown pool"
            if not authed:
                return 401, ""
            parts = path.strip("/").split("/")
            if (method, path) == ("GET", "/pools/default"):
                return 200, {"name": "default"}
            if method == "POST" and path == "/pools/default/buckets":
                if form["name"] in self.buckets:
                    return 400, {"errors": {"name": "Bucket with given name already exists"}}
                self.buckets[form["name"]] = {"form": form, "scopes": {"_default": {"_default"}}}
                return 202, ""
            if parts[:3] == ["pools", "default", "buckets"] and len(parts) >= 4:
                bucket = self.buckets.get(parts[3])
                if bucket is None:
                    return 404, {"errors": "Requested resource not found."}
                if method == "GET" and len(parts) == 4:
                    return 200, {"name": parts[3], "nodes": [{"hostname": "couchbase:8091", "status": "healthy"}]}
                if method == "POST" and len(parts) == 5 and parts[4] == "scopes":
                    if form["name"] in bucket["scopes"]:
                        return 400, {"errors": {"_": "Scope with this name already exists"}}
                    bucket["scopes"][form["name"]] = set()
                    return 200, {"uid": "8"}
                if method == "POST" and len(parts) == 7 and parts[4] == "scopes" and parts[6] == "collections":
                    scope = bucket["scopes"].get(parts[5])
                    if scope is None:
                        return 404, {"errors": {"_": "Scope with this name is not found"}}
                    if form["name"] in scope:
                        return 400, {"errors": {"_": "Collection with this name already exists"}}
                    scope.add(form["name"])
                    return 200, {"uid": "9"}
            if method == "PUT" and parts[:4] == ["settings", "rbac", "users", "local"] and len(parts) == 5:
                self.users[parts[4]] = form
                return 200, ""
            return 404, {"errors": f"no endpoint {method} {path}"}


@pytest.fixture
def fake_couchbase():
    fake = FakeCouchbase()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            form = dict(urllib.parse.parse_qsl(body, keep_blank_values=True))
            status, reply = fake.handle(self.command, self.path, self.headers.get("Authorization"), form)
            data = (reply if isinstance(reply, str) else json.dumps(reply, separators=(",", ":"))).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = _serve

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    fake.port = server.server_address[1]
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()


def test_couchbase_init_sets_up_bucket_scope_collection_and_user(fake_couchbase):
    if shutil.which("curl") is None:
        pytest.skip("curl not installed (the Couchbase image has it): apt-get install curl")
    services = compose({**env_example(), "COUCHBASE_ADMIN_PASSWORD": "adm1n-Pw",
                        "COUCHBASE_PASSWORD": "us3r-Pw"})["services"]
    env = environment(services["couchbase-init"])
    env.update(COUCHBASE_HOST="127.0.0.1", COUCHBASE_REST_PORT=str(fake_couchbase.port),
               PATH=os.environ["PATH"], HOME=os.environ.get("HOME", "/tmp"))
    for attempt in (1, 2):  # a second run finds everything in place
        done = subprocess.run(["bash", str(COUCHBASE_INIT)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"run {attempt}: {done.stdout}{done.stderr}"
        assert "adm1n-Pw" not in done.stdout + done.stderr and "us3r-Pw" not in done.stdout + done.stderr
    fake = fake_couchbase
    assert fake.cluster["username"] == env["COUCHBASE_ADMIN_USERNAME"] and fake.cluster["password"] == "adm1n-Pw"
    assert fake.cluster["services"] == "kv" and fake.cluster["hostname"] == "127.0.0.1"
    assert fake.cluster["memoryQuota"] == env["COUCHBASE_RAM_MB"]
    bucket = fake.buckets[env["COUCHBASE_BUCKET"]]
    assert bucket["form"]["replicaNumber"] == "0" and bucket["form"]["ramQuota"] == env["COUCHBASE_BUCKET_RAM_MB"]
    assert env["COUCHBASE_COLLECTION"] in bucket["scopes"][env["COUCHBASE_SCOPE"]]
    user = fake.users[env["COUCHBASE_USERNAME"]]
    assert user["password"] == "us3r-Pw" and user["roles"] == f"bucket_full_access[{env['COUCHBASE_BUCKET']}]"
    assert list(fake.buckets) == [env["COUCHBASE_BUCKET"]]
    for method, path, provisioned, authed in fake.requests:
        if provisioned and path != "/pools":
            assert authed, f"{method} {path} without the administrator's credentials"
    # the store's URL for this set-up parses to what was created
    cfg = parse_couchbase_url(next(u for u in env_alternatives("MTA_STORE") if u.startswith("couchbase")))
    assert (cfg["bucket"], cfg["scope"], cfg["collection"]) == \
        (env["COUCHBASE_BUCKET"], env["COUCHBASE_SCOPE"], env["COUCHBASE_COLLECTION"])


# -- real runs ------------------------------------------------------------------------------------
SECRET = "t3st-Redis-pw!"


def _oracle(rows: list[tuple[str, float, float]], seconds: float) -> dict[tuple[str, float], tuple[float, float]]:
    """(host, ts) -> (max, mean) over the host's rows with time in (ts - seconds, ts]."""
    out = {}
    for host, t, _ in rows:
        window = [v for h, u, v in rows if h == host and t - seconds < u <= t]
        out[(host, t)] = (max(window), sum(window) / len(window))
    return out


@pytest.mark.slow
def test_spark_submit_recipe_ships_the_wheel_with_py_files(tmp_path, redis_server_factory):
    """deploy/submit.sh on local[2]: the wheel built into a temporary directory and
    shipped with --py-files to a Python that has the dependencies but not the
    project; the windows in a Redis whose password comes from the environment."""
    home = java_home()
    if home is None:
        pytest.skip(NO_JAVA)
    redis = redis_server_factory(password=SECRET)

    # a Python with the dependencies (this environment's site-packages, whose .pth
    # files -- the editable install of the project -- it does not run) but not the project
    py = tmp_path / "py"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(py)], check=True, timeout=60)
    site = py / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = str(py / "bin" / "python")
    bare = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as the job's Python runs below
    assert subprocess.run([python, "-c", "import pyspark, pandas, pyarrow, msgpack, redis"],
                          cwd=tmp_path, env=bare).returncode == 0
    assert subprocess.run([python, "-c", "import spark_ops"], cwd=tmp_path, capture_output=True,
                          env=bare).returncode != 0

    import random

    rng = random.Random(5)
    rows = [(f"h{rng.randrange(4)}", float(i * 7 + rng.randrange(3)), round(rng.uniform(0, 100), 3))
            for i in range(300)]
    with open(tmp_path / "readings.csv", "w") as f:
        f.write("host,ts,mem\n")
        f.writelines(f"{h},{t},{v}\n" for h, t, v in rows)
    out, dist = tmp_path / "windows", tmp_path / "dist"
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "SPARK_HOME": str(spark_home()),
           "JAVA_HOME": home, "PYSPARK_PYTHON": python, "PYTHON": sys.executable, "MTA_DIST": str(dist),
           "SPARK_LOCAL_IP": "127.0.0.1", "MTA_REDIS_PASSWORD": SECRET}
    command = [str(SUBMIT), "--master", "local[2]", "--driver-memory", "1g", "--",
               "run", "--input", str(tmp_path / "readings.csv"), "--output", str(out), "--key", "host",
               "--time", "ts", "--value", "mem", "--agg", "max,mean", "--range", "60", "--engine", "amta", "--store", redis.url,
               # windows past buffer + cache rows move to the store (smaller ones stay in executor memory)
               "--buffer-size", "2", "--cache-size", "2"]
    done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if done.returncode and re.search(r"satisfies the requirement (setuptools|wheel)|No matching distribution",
                                     done.stderr):
        pytest.skip("pip wheel builds in isolation and needs setuptools>=77 from PyPI, unreachable here")
    assert done.returncode == 0, done.stdout + done.stderr[-4000:]
    assert f"wrote {len(rows)} rows" in done.stdout
    assert SECRET not in done.stdout + done.stderr
    # tagged for this Python and platform, with the compiled cores when the machine has a C compiler
    assert len(list(dist.glob(f"mta_windows-{VERSION}-*.whl"))) == 1 and (dist / "mta_windows.zip").is_file()

    import pyarrow.parquet as pq

    got = pq.read_table(out).to_pylist()
    assert len(got) == len(rows)
    want = _oracle(rows, 60)
    for r in got:
        mx, mean = want[(r["host"], float(r["ts"]))]
        assert r["max"] == pytest.approx(mx) and r["mean"] == pytest.approx(mean), r
    # the executors opened the store with the password from the environment
    client = redis.client()
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    assert stats.get("cmdstat_evalsha", {}).get("calls", 0) >= 4, stats


def _wait_for(what: str, check, timeout: float, procs=()):
    deadline = time.monotonic() + timeout
    while True:
        for p in procs:
            assert p.poll() is None, f"{what}: a process exited with {p.returncode}"
        try:
            value = check()
            if value:
                return value
        except OSError:
            pass
        assert time.monotonic() < deadline, f"{what}: not after {timeout} s"
        time.sleep(0.5)


def _master_json(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=3) as r:
        return json.load(r)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.slow
def test_standalone_cluster_from_the_compose_commands_runs_the_stream_job(tmp_path, redis_server_factory):
    """The compose file's spark-master and spark-worker-1 commands and its
    ``stream`` job, through the image's entrypoint, with the image's Spark
    configuration: only host names, ports and /data are replaced."""
    home = java_home()
    if home is None:
        pytest.skip(NO_JAVA)
    redis = redis_server_factory(password=SECRET)
    # a .env of one's own: the image refuses .env.example's placeholder passwords
    services = compose({**env_example(), "MTA_REDIS_PASSWORD": SECRET, "COUCHBASE_PASSWORD": "t3st-CB-pw"})["services"]
    master_port, master_ui, worker_ui = free_port(), free_port(), free_port()
    data = tmp_path / "data"
    store = option(argv(services["stream"]), "--store")
    assert store.startswith("redis://redis:")

    def adapt(args: list[str]) -> list[str]:
        out, previous = [], None
        for a in args:
            if a == "spark://spark-master:7077":
                a = f"spark://127.0.0.1:{master_port}"
            elif a == "spark-master":
                a = "127.0.0.1"
            elif previous == "--port" and a == "7077":
                a = str(master_port)
            elif previous == "--webui-port":
                a = str({"8080": master_ui, "8081": worker_ui}[a])
            elif a == "/data" or a.startswith("/data/"):
                a = str(data) + a[len("/data"):]
            elif a == store:
                a = redis.url
            elif previous == "--trigger":
                a = "available-now"  # the compose job runs until stopped
            out.append(a)
            previous = args[len(out) - 1]
        return out

    # the image's environment (Dockerfile ENV), with this machine's paths
    image_env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": str(tmp_path),
                 "JAVA_HOME": home, "SPARK_HOME": str(spark_home()), "SPARK_CONF_DIR": str(SPARK_CONF_DIR),
                 "SPARK_WORKER_DIR": str(tmp_path / "work"), "PYSPARK_PYTHON": sys.executable,
                 "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                 "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    procs = []
    try:
        for name in ("spark-master", "spark-worker-1"):
            log = open(tmp_path / f"{name}.log", "wb")
            procs.append(subprocess.Popen(["bash", str(ENTRYPOINT), *adapt(argv(services[name]))],
                                          env={**image_env, **environment(services[name])}, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))
            log.close()
        _wait_for("the worker registers", lambda: _master_json(master_ui)["aliveworkers"] == 1, 90, procs)

        # input: the demo's readings, as Parquet files in the stream's input directory
        from spark_ops.cli.demo_report import write_parquet_input
        from spark_ops.telemetry import fleet_memory

        readings = fleet_memory(5, 1500, seed=3, span=3 * 3600.0)
        stream_args = adapt(argv(services["stream"]))
        ns = cli.build_parser().parse_args(mta_spark_args(stream_args))
        assert write_parquet_input(readings, ns.input, rows_per_file=500) == 3

        done = subprocess.run(["bash", str(ENTRYPOINT), *stream_args],
                              env={**image_env, **environment(services["stream"])},
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)
        logs = f"{done.stdout}{done.stderr[-4000:]}"
        assert done.returncode == 0, logs
        assert SECRET not in done.stdout + done.stderr
        assert "processed 1,500 rows" in done.stdout, logs

        # it ran on the cluster, with the executor memory the compose job passes (PYSPARK_SUBMIT_ARGS)
        apps = _master_json(master_ui)["completedapps"] + _master_json(master_ui)["activeapps"]
        mine = [a for a in apps if a["name"] == "mta-spark stream"]
        assert mine, apps
        memory = int(re.search(r"spark\.executor\.memory=(\d+)g",
                               environment(services["stream"])["PYSPARK_SUBMIT_ARGS"]).group(1))
        assert mine[0].get("memoryperexecutor", mine[0].get("memoryperslave")) == memory * 1024, mine[0]
    finally:
        for p in reversed(procs):
            _stop(p)

    import pandas as pd
    import pyarrow.parquet as pq

    got = pq.read_table(ns.output).to_pandas()
    assert len(got) == len(readings)
    host = readings["host"].iloc[0]
    mine = got[got["host"] == host].sort_values("ts", kind="stable")
    source = readings[readings["host"] == host].sort_values("ts", kind="stable")
    want = source.set_index("ts")["mem_mb"].rolling("3600s").max().to_numpy()
    assert mine["max"].to_numpy() == pytest.approx(want)
    assert pd.api.types.is_datetime64_any_dtype(got["ts"])

    # Spark's state store was RocksDB (the image's spark-defaults.conf): the checkpoint records it
    offsets = sorted((p for p in (Path(ns.checkpoint) / "offsets").iterdir() if p.name.isdigit()),
                     key=lambda p: int(p.name))
    assert ROCKSDB in offsets[0].read_text()
    client = redis.client()
    try:
        assert client.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0) > 0
    finally:
        client.close()
