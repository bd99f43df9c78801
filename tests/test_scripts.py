"""The set-up scripts the README's two commands run: ``scripts/needs`` (system
packages from apt) and ``scripts/venv`` (the virtualenv), run for real
against stand-ins of ``apt-get``, ``sudo`` and the virtualenv's Python that
record how they are called."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash on PATH")


def _recorder(path: Path, log: Path, then: str = "") -> None:
    """An executable at ``path`` that appends its name and arguments to ``log``."""
    path.write_text(f'#!/usr/bin/env bash\necho "$(basename "$0") $*" >> "{log}"\n{then}')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def fake_bin(tmp_path):
    """A directory of stand-ins first on PATH: apt-get and sudo record their
    calls (sudo then runs the command), ``present`` is a command that exists."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls.log"
    bin_dir.mkdir()
    _recorder(bin_dir / "apt-get", log)
    _recorder(bin_dir / "sudo", log, 'exec "$@"\n')
    _recorder(bin_dir / "present", log)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return env, log


def _calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_needs_installs_only_the_packages_whose_command_is_missing(fake_bin):
    env, log = fake_bin
    done = subprocess.run([str(SCRIPTS / "needs"), "present:pkg-present", "no-such-command-mta:pkg-missing"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    apt = [c.split(" ", 1)[1] for c in _calls(log) if c.startswith("apt-get ")]
    assert apt == ["update -qq", "install -y -qq pkg-missing"], _calls(log)
    assert "pkg-missing" in done.stderr and "pkg-present" not in done.stderr
    assert ("sudo" in " ".join(_calls(log))) == (os.getuid() != 0)


def test_needs_does_nothing_when_every_command_is_there(fake_bin):
    env, log = fake_bin
    done = subprocess.run([str(SCRIPTS / "needs"), "present:pkg-present", "bash:bash"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert _calls(log) == []


def test_needs_finds_a_shared_library_where_debian_installs_them(fake_bin):
    """``libNAME.so`` stands for a library under /usr/lib or /usr/lib/<arch>:
    one that is there (libc's) installs nothing, one that is not its package."""
    env, log = fake_bin
    present = sorted(p.name for p in Path("/usr/lib").glob("*/libc.so*")) or pytest.skip("no libc under /usr/lib")
    done = subprocess.run([str(SCRIPTS / "needs"), f"{present[0]}:pkg-libc", "libno_such_mta.so:pkg-missing"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    apt = [c.split(" ", 1)[1] for c in _calls(log) if c.startswith("apt-get ")]
    assert apt == ["update -qq", "install -y -qq pkg-missing"], _calls(log)


@pytest.fixture
def venv_root(tmp_path):
    """A copy of ``scripts/venv`` in a project root whose ``.venv/bin/python``
    records its calls, with a pyproject.toml and the compiled cores' sources."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(SCRIPTS / "venv", root / "scripts" / "venv")
    (root / ".venv" / "bin").mkdir(parents=True)
    log = tmp_path / "pip.log"
    _recorder(root / ".venv" / "bin" / "python", log)
    for src in ("pyproject.toml", "mta/_native.c", "mta/_native_tree.h", "stores/_codec.c"):
        (root / src).parent.mkdir(parents=True, exist_ok=True)
        (root / src).write_text("")
    return root, log


def _venv(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(root / "scripts" / "venv"), "spark"], capture_output=True, text=True)


def _age(paths, seconds: float) -> None:
    """Set the modification time of ``paths`` ``seconds`` into the past."""
    then = time.time() - seconds
    for p in paths:
        os.utime(p, (then, then))


@pytest.mark.parametrize("changed", ["pyproject.toml", "mta/_native.c", "mta/_native_tree.h", "stores/_codec.c"])
def test_venv_reinstalls_when_pyproject_or_a_c_source_changed(venv_root, changed):
    root, log = venv_root
    assert _venv(root).returncode == 0  # first run: no stamp
    assert sum("pip install" in c for c in _calls(log)) == 1, _calls(log)
    sources = [root / s for s in ("pyproject.toml", "mta/_native.c", "mta/_native_tree.h", "stores/_codec.c")]
    _age(sources, 60)
    _age(root.joinpath(".venv").glob(".installed-*"), 30)
    done = _venv(root)  # nothing changed since the stamp
    assert done.returncode == 0 and sum("pip install" in c for c in _calls(log)) == 1, _calls(log)
    os.utime(root / changed)  # edited now: newer than the stamp
    done = _venv(root)
    assert done.returncode == 0, done.stderr
    assert sum("pip install" in c for c in _calls(log)) == 2, _calls(log)
    assert "installing mta-windows[spark]" in done.stderr


@pytest.mark.parametrize("version, installs", [
    ('openjdk version "11.0.22" 2024-01-16', True),
    ('java version "1.8.0_392"', True),
    ('openjdk version "17.0.15" 2025-04-15', False),
    ('openjdk version "21" 2023-09-19', False),
])
def test_needs_installs_java_when_the_one_on_path_is_older_than_asked(fake_bin, version, installs):
    """Spark 4 needs Java 17 or newer: a `java` on PATH is not enough."""
    env, log = fake_bin
    java = Path(env["PATH"].split(":")[0]) / "java"
    java.write_text(f"#!/usr/bin/env bash\necho '{version}' >&2\n")
    java.chmod(0o755)
    done = subprocess.run([str(SCRIPTS / "needs"), "java>=17:openjdk-17-jre-headless"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    apt = [c.split(" ", 1)[1] for c in _calls(log) if c.startswith("apt-get ")]
    assert apt == (["update -qq", "install -y -qq openjdk-17-jre-headless"] if installs else []), _calls(log)


def test_needs_installs_java_when_there_is_none(fake_bin):
    env, log = fake_bin
    bare = Path(env["PATH"].split(":")[0])
    # only the stand-ins and the tools the script itself runs: no java
    for tool in ("bash", "sed", "head", "id", "basename"):
        (bare / tool).symlink_to(shutil.which(tool))
    done = subprocess.run([str(SCRIPTS / "needs"), "java>=17:openjdk-17-jre-headless"],
                          env={**env, "PATH": str(bare)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "apt-get install -y -qq openjdk-17-jre-headless" in _calls(log)


def _project_with_venv_script(tmp_path) -> Path:
    """A project root holding a copy of ``scripts/venv`` and a pyproject.toml
    asking for Python 3.10 or newer, and no virtualenv."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    shutil.copy2(SCRIPTS / "venv", root / "scripts" / "venv")
    (root / "pyproject.toml").write_text('[project]\nrequires-python = ">=3.10"\n')
    return root


def test_venv_makes_the_virtualenv_with_PYTHON_and_refuses_one_too_old(tmp_path, fake_bin):
    """scripts/venv creates .venv with $PYTHON (default python3) and names
    requires-python when that Python is older."""
    env, log = fake_bin
    root = _project_with_venv_script(tmp_path)
    old = Path(env["PATH"].split(":")[0]) / "python3.9"
    _recorder(old, log, "exit 1\n")  # sys.version_info < (3, 10): status 1
    done = subprocess.run([str(root / "scripts" / "venv"), "spark"], env={**env, "PYTHON": str(old)},
                          capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "3.10 or newer" in done.stderr and "PYTHON=" in done.stderr
    assert not any("-m venv" in c for c in _calls(log)), _calls(log)

    # a Python new enough makes the virtualenv (a stand-in that records the call and makes .venv/bin/python)
    new = Path(env["PATH"].split(":")[0]) / "python3.12"
    _recorder(new, log, f'[ "$1" = -m ] && mkdir -p "$3/bin" && cp "{root / "scripts" / "fake"}" "$3/bin/python"\n'
                        "exit 0\n")
    _recorder(root / "scripts" / "fake", log)
    done = subprocess.run([str(root / "scripts" / "venv"), "spark"], env={**env, "PYTHON": str(new)},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"python3.12 -m venv {root / '.venv'}" in _calls(log)


def test_venv_makes_again_a_virtualenv_without_pip(venv_root, fake_bin):
    """A .venv whose python has no pip (made where Python's venv support was
    missing, or interrupted) is made again with $PYTHON, then installed
    into, instead of every later run failing with 'No module named pip'."""
    root, log = venv_root
    env, _ = fake_bin
    broken = root / ".venv" / "bin" / "python"
    _recorder(broken, log, 'echo "No module named pip" >&2\nexit 1\n')
    (root / ".venv" / "leftover").write_text("")
    # $PYTHON: records its calls; -m venv DIR makes DIR/bin/python, a python with pip (a recorder)
    maker = Path(env["PATH"].split(":")[0]) / "python3.12"
    _recorder(root / "scripts" / "good-python", log)
    _recorder(maker, log, f'[ "$1" = -m ] && [ "$2" = venv ] && mkdir -p "$3/bin" && '
                          f'cp "{root / "scripts" / "good-python"}" "$3/bin/python"\nexit 0\n')
    done = subprocess.run([str(root / "scripts" / "venv"), "spark"], env={**env, "PYTHON": str(maker)},
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "has no working python or pip: making it again" in done.stderr
    calls = _calls(log)
    made = calls.index(f"python3.12 -m venv {root / '.venv'}")
    assert not (root / ".venv" / "leftover").exists()
    # the new virtualenv's python (the broken one fails every call) installs the project
    assert any(c.startswith("python -m pip install --quiet -e") for c in calls[made:]), calls


def test_venv_that_cannot_get_pip_says_what_to_install_and_leaves_no_half_venv(tmp_path, fake_bin):
    env, log = fake_bin
    root = _project_with_venv_script(tmp_path)
    # Debian's python -m venv without its -venv package: a bin/python without pip, and status 1
    maker = Path(env["PATH"].split(":")[0]) / "python3.12"
    _recorder(maker, log, '[ "$1" = -m ] && [ "$2" = venv ] && mkdir -p "$3/bin" && '
                          'printf "#!/usr/bin/env bash\\nexit 1\\n" > "$3/bin/python" && chmod +x "$3/bin/python" '
                          '&& exit 1\nexit 0\n')
    for _ in range(2):  # the second run finds no half-made .venv either
        done = subprocess.run([str(root / "scripts" / "venv"), "spark"], env={**env, "PYTHON": str(maker)},
                              capture_output=True, text=True)
        assert done.returncode == 1, done.stderr
        assert "cannot make a virtualenv with pip" in done.stderr and "python3-venv" in done.stderr
        assert not (root / ".venv").exists()


def _python_stand_in(path: Path, log: Path, *, venv_support: bool, version: str = "3.12") -> None:
    """A Python whose ``import ensurepip, venv`` works or not, and that
    prints its version for ``sys.version_info``."""
    _recorder(path, log, f'case "$2" in *ensurepip*) exit {0 if venv_support else 1} ;; '
                         f'*version_info*) echo {version} ;; esac\nexit 0\n')


@pytest.mark.parametrize("python, installs", [
    (None, "python3-venv"),  # python3 itself lacks venv support: the package named
    ("python3.12", "python3.12-venv"),  # $PYTHON lacks it: that Python's own package
])
def test_needs_checks_venv_support_of_the_python_scripts_venv_uses(fake_bin, python, installs):
    env, log = fake_bin
    bin_dir = Path(env["PATH"].split(":")[0])
    _python_stand_in(bin_dir / "python3", log, venv_support=python is not None, version="3.11")
    _python_stand_in(bin_dir / "python3.12", log, venv_support=False)
    if python:
        env = {**env, "PYTHON": python}
    done = subprocess.run([str(SCRIPTS / "needs"), "python3-venv:python3-venv"], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    apt = [c.split(" ", 1)[1] for c in _calls(log) if c.startswith("apt-get ")]
    assert apt == ["update -qq", f"install -y -qq {installs}"], _calls(log)


def test_needs_installs_no_venv_support_that_PYTHON_has(fake_bin):
    env, log = fake_bin
    bin_dir = Path(env["PATH"].split(":")[0])
    _python_stand_in(bin_dir / "python3", log, venv_support=False)
    _python_stand_in(bin_dir / "python3.12", log, venv_support=True)
    done = subprocess.run([str(SCRIPTS / "needs"), "python3-venv:python3-venv"], env={**env, "PYTHON": "python3.12"},
                          capture_output=True, text=True)
    assert done.returncode == 0 and not any(c.startswith("apt-get") for c in _calls(log)), _calls(log)


def test_demo_script_runs_the_job_in_the_callers_directory(tmp_path):
    """scripts/demo's relative --out (and the default ./demo-output) are the
    caller's: mta-spark starts in the directory scripts/demo was run from."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    (root / ".venv" / "bin").mkdir(parents=True)
    shutil.copy2(SCRIPTS / "demo", root / "scripts" / "demo")
    log = tmp_path / "calls.log"
    for stand_in in ("scripts/needs", "scripts/venv"):
        _recorder(root / stand_in, log)
    _recorder(root / ".venv" / "bin" / "mta-spark", log, f'pwd > "{tmp_path / "cwd"}"\n')
    caller = tmp_path / "elsewhere"
    caller.mkdir()
    done = subprocess.run(["../project/scripts/demo", "--out", "my-results", "--rows", "1000"], cwd=caller,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "mta-spark demo --out my-results --rows 1000" in _calls(log)
    assert (tmp_path / "cwd").read_text().strip() == str(caller)
