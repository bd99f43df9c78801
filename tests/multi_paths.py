"""Both executors of :class:`mta.SharedWindows` for the multi-query tests.

``executor`` (module scope, autouse where a test module names it) runs the
module once with the compiled core in use where it applies
(:mod:`mta.multi.compiled`) and once on the pure-Python path, as
tests/test_native.py runs the compiled engines beside their references.
"""

from __future__ import annotations

import pytest

from mta.multi import compiled


@pytest.fixture(autouse=True, scope="module", params=["compiled", "pure"])
def executor(request):
    """Sets :data:`mta.multi.compiled.USE` for the module's tests."""
    saved = compiled.USE
    compiled.USE = request.param == "compiled"
    if compiled.USE and compiled._core_type() is None:
        compiled.USE = saved
        pytest.skip(f"compiled core not in use: {compiled.why_not([], [], [])}")
    yield request.param
    compiled.USE = saved
