"""Column names as Spark resolves them.

Spark resolves a column name without regard to case (its default,
``spark.sql.caseSensitive=false``), so two names that differ only in case
are one name to a later ``select``: :func:`clashes` and :func:`repeated`
compare names that way, and :func:`spelled` finds the column a user's name
means as Spark's own ``df["host"]`` does (:func:`missing_columns` says why
one it cannot find is not there).  PySpark's ``mapInArrow`` and
``applyInPandasWithState`` look each input column up by its name as a path,
where a dot reaches into a struct and a backtick quotes: a column named
``host.name`` or ``a`b`` cannot cross them under its own name
(:func:`awkward`), so :func:`map_in_arrow` renames the columns on the way in
and the function sees them under their own names again.
"""

from __future__ import annotations

__all__ = ["awkward", "clashes", "map_in_arrow", "missing_columns", "repeated", "spelled", "trimmed"]


def _folded(name: str) -> str:
    return name.lower()


def clashes(names, others) -> list[str]:
    """The names of ``names`` that are one of ``others`` to Spark (equal but
    for case), sorted.  O(len(names) + len(others))."""
    taken = {_folded(n) for n in others}
    return sorted({n for n in names if _folded(n) in taken})


def repeated(names) -> list[str]:
    """The names of ``names`` that come more than once to Spark (equal but
    for case), sorted.  O(len(names))."""
    counts: dict[str, int] = {}
    for n in names:
        counts[_folded(n)] = counts.get(_folded(n), 0) + 1
    return sorted({n for n in names if counts[_folded(n)] > 1})


def spelled(given, names):
    """``given`` (a column's name, or a list or tuple of them) as ``names``
    spell it: a name that is one of ``names`` stays, one equal but for case
    to exactly one of them becomes that one, as Spark resolves it; any other
    (no such column, or several equal but for case) stays for the caller's
    "no column" error to name, whatever the session's
    ``spark.sql.caseSensitive`` (exact names come first, so a session that
    tells ``host`` from ``Host`` gets the one it names).  O(len(names) per
    name given)."""
    if isinstance(given, (list, tuple)):
        return type(given)(spelled(g, names) for g in given)
    if not isinstance(given, str) or given in names:
        return given
    found = _answering(given, names)
    return found[0] if len(found) == 1 else given


def _answering(name: str, names) -> list[str]:
    """The names of ``names`` equal to ``name`` but for case."""
    return [n for n in names if _folded(n) == _folded(name)]


def missing_columns(given, names) -> str:
    """The error for the columns ``given`` (a list) that are not among the
    input's ``names`` as :func:`spelled` resolves them: a name several
    columns answer to (``HOST`` for ``host`` and ``Host``, in a session that
    tells them apart) is ambiguous rather than absent, so the message says
    which columns it matches."""
    for name in given:
        found = _answering(name, names)
        if len(found) > 1:
            return (f"column {name!r} matches {', '.join(map(repr, found[:-1]))} and {found[-1]!r} (equal but "
                    "for case, which this session tells apart); spell it exactly")
    return f"no column {', '.join(map(repr, given))} in the input; it has {', '.join(names) or 'no columns'}"


def trimmed(name: str, names) -> str:
    """``name``, one of several typed in one string (SQL's ``key => 'dc,
    host'``), as it names a column of ``names``: as typed when a column
    answers to it (a CSV header's `` v``, kept apart from a column ``v``),
    else without the blanks around it."""
    return name if _answering(name, names) else name.strip()


def awkward(name: str) -> bool:
    """Whether PySpark's per-column lookup by name fails for ``name`` (it
    reads a dot as a struct's field and a backtick as quoting)."""
    return "." in name or "`" in name


def map_in_arrow(df, fn, schema):
    """``df.mapInArrow(fn, schema)`` for columns of any name: where one is
    :func:`awkward`, the columns cross as ``_0, _1, ...`` and ``fn`` gets
    each batch under ``df``'s own names (``schema``, the output's, may hold
    any names)."""
    names = df.columns
    if not any(awkward(n) for n in names):
        return df.mapInArrow(fn, schema)

    def renamed(batches):
        return fn(batch.rename_columns(names) for batch in batches)

    return df.toDF(*[f"_{i}" for i in range(len(names))]).mapInArrow(renamed, schema)
