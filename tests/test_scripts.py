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
