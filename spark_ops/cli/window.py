"""The window job that ``run`` and ``stream`` share: its arguments checked
without Spark, and ``sliding_window`` over the input's window columns."""

from __future__ import annotations

import functools

from .. import aggregations as aggregations_
from ..names import missing_columns, spelled, trimmed
from ..spec import SlidingWindowError, WindowSpec, split_columns
from .errors import CLIError
from .options import aggregation_names, aggregations


def value_columns(args) -> list[str]:
    """``--value``'s columns (one, or several separated by commas), by the
    rule ``--key`` and SQL's ``value =>`` share."""
    return split_columns(args.value)


def window_spec(args) -> WindowSpec:
    """Check the window arguments (columns, aggregations, size) without Spark."""
    ready = aggregation_names()
    names = aggregations(args.agg)
    if not names:
        raise CLIError(f"--agg needs at least one aggregation, e.g. --agg max,mean; choose from {', '.join(ready)}")
    unknown = aggregations_.unknown(names)
    if unknown:
        raise CLIError(f"unknown aggregation{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))} "
                       f"in --agg; choose from {', '.join(ready)}")
    try:
        return WindowSpec.build(key=split_columns(args.key), time=args.time, value=value_columns(args), aggs=names,
                                range=args.range, rows=args.rows, on_bad_row=args.on_bad_row,
                                frame=args.frame, slide=getattr(args, "slide", None),
                                ties=getattr(args, "ties", "input"))
    except SlidingWindowError as e:
        raise CLIError(str(e)) from None


def respelled(args, columns) -> WindowSpec:
    """The window of ``args`` with ``--key``, ``--time`` and ``--value`` as
    the input's ``columns`` spell them (Spark's names ignore case:
    :func:`spark_ops.names.spelled`, blanks around a name kept only where
    a column has them: :func:`spark_ops.names.trimmed`); ``args`` is updated
    to match, ``key`` and ``value`` becoming lists."""
    args.key = spelled(split_columns(args.key, columns), columns)
    args.time = spelled(trimmed(args.time, columns), columns)
    args.value = spelled(split_columns(args.value, columns), columns)
    return window_spec(args)


def describe(spec: WindowSpec) -> str:
    if spec.sizes:
        labels = ", ".join(label for label, _ in spec.sizes)
        size = f"ranges {labels}" if spec.range is not None else f"newest {labels} rows"
    else:
        size = f"range {spec.range} s" if spec.range is not None else f"newest {spec.rows} rows"
    if spec.peers:
        size += " (frame sql: [t - range, t], ties as peers)"
    if spec.slide is not None:
        size += f", every {spec.slide} s"
    if spec.ties == "any":
        size += ", rows of equal time in any order"
    return f"{', '.join(n for n, _, _ in spec.aggs)} over {size} per {', '.join(spec.keys)}"


#: Columns a text value column's parse carries through the window (dropped after): the
#: text of each value column read as text (its position among them appended), and the file.
_TEXT, _FILE = "__mta_value_text", "__mta_value_file"


def windows(df, args, spec: WindowSpec, store: str | None, name: str | None, value_type=None):
    """``sliding_window`` over the key, time and value columns (every input
    column with ``--keep-columns``), returning them plus the aggregation
    columns (and ``rejected`` when flagging).

    A value column read as text (a CSV column with a value that is not a
    number; ``value_type``: per such column the numeric type to parse it
    into, else double) is parsed here: with ``--on-bad-row flag`` a row
    whose text is not a number is flagged naming the text and its file and
    the rest are kept; otherwise the first such row is an error naming them
    (in streaming, the micro-batch fails on it)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from .. import rows
    from ..api import sliding_window
    from ..names import clashes
    from ..plan import column

    fields = {f.name: f.dataType for f in df.schema.fields}
    value_names = value_columns(args)
    window_columns = list(dict.fromkeys([*spec.keys, args.time, *value_names]))
    missing = [c for c in window_columns if c not in fields]
    if missing:
        raise CLIError(missing_columns(missing, list(fields)))
    outputs = [n for n, _ in spec.output_columns]
    if spec.slide is not None and getattr(args, "keep_columns", False):
        raise CLIError("--keep-columns keeps the input's columns beside each input row's output; --slide gives "
                       "one row per key and window instead: use one or the other")
    keep = list(fields) if getattr(args, "keep_columns", False) else window_columns
    clash = clashes(keep, outputs)
    if clash:
        raise CLIError(f"input column {', '.join(map(repr, clash))} has the name of an output column; "
                       "rename it in the input (Spark's names ignore case)")
    # the value columns read as text, each with the column carrying its text
    texts = {c: f"{_TEXT}{i}" for i, c in enumerate(c for c in value_names if isinstance(fields[c], StringType))}
    unparsed = {c: F.col(t).isNotNull() & column(c).isNull() for c, t in texts.items()}
    extra = []
    if texts:
        df = df.withColumn(_FILE, F.input_file_name())
        for c, t in texts.items():
            value = column(c)
            df = df.withColumn(t, value).withColumn(c, value.try_cast((value_type or {}).get(c) or "double"))
        if args.on_bad_row != "flag" and not df.isStreaming:
            any_unparsed = functools.reduce(lambda a, b: a | b, unparsed.values())
            bad = (df.filter(any_unparsed)
                     .select(_FILE, *[column(c) for c in (*spec.keys, args.time, *value_names)],
                             *texts.values()).first())
            if bad is not None:
                first = next(c for c in texts if bad[texts[c]] is not None and bad[c] is None)
                problem = rows.TEXT_NOT_A_NUMBER % (bad[texts[first]], bad[_FILE])
                key = tuple(bad[c] for c in spec.keys) if isinstance(spec.key, tuple) else bad[spec.key]
                shown = [bad[texts[c]] if c in texts else bad[c] for c in value_names]
                raise CLIError(str(rows.rejected(spec, problem, key, bad[args.time],
                                                 tuple(shown) if spec.value_fields else shown[0]))
                               .replace("pass on_bad_row='flag'", "pass --on-bad-row flag"))
        extra = [*texts.values(), _FILE]
    df = df.select(*[column(c) for c in keep + extra])
    # a stream can only say which text was not a number if the window flags the row: error mode
    # then fails the micro-batch (uncommitted, so nothing is lost) on the first flagged row
    # (--slide has no input row to flag: a value that is not a number is then a null value, an error,
    # or with --on-bad-row flag a row left out of the windows and counted)
    raise_flagged = bool(texts) and args.on_bad_row != "flag" and df.isStreaming and spec.slide is None
    try:
        out = sliding_window(df, key=list(spec.keys), time=args.time,
                             value=value_names if spec.value_fields else value_names[0],
                             aggs=aggregations(args.agg), range=args.range, rows=args.rows, store=store,
                             on_bad_row="flag" if raise_flagged else args.on_bad_row,
                             name=name, buffer_size=args.buffer_size, cache_size=args.cache_size,
                             engine=args.engine, expire_after=getattr(args, "expire_after", None),
                             frame=args.frame, slide=spec.slide, ties=spec.ties)
    except SlidingWindowError as e:
        raise CLIError(str(e)) from None
    if texts and spec.slide is None and (args.on_bad_row == "flag" or raise_flagged):
        # the window saw a null: say why it was one (the first value column whose text is not a number)
        reason = F.coalesce(*[F.when(unparsed[c], F.format_string(rows.TEXT_NOT_A_NUMBER, F.col(t), F.col(_FILE)))
                              for c, t in texts.items()])
        parsed = (F.col("rejected") == rows.NULL_VALUE) & reason.isNotNull()
        out = out.withColumn("rejected", F.when(parsed, reason).otherwise(F.col("rejected")))
    if raise_flagged:
        # the parsed value where there is one, else the text that is not a number
        named = [*spec.keys, args.time]
        shown = [_shown(column(c), fields[c]) for c in named] + [
            F.coalesce(column(c).cast("string"), _shown(F.col(texts[c]), StringType())) if c in texts
            else _shown(column(c), fields[c]) for c in value_names]
        where = ", ".join(f"{c}=%s" for c in [*named, *value_names])
        message = F.format_string(f"row rejected (%s): {where}; fix the input or pass --on-bad-row flag",
                                  F.col("rejected"), *shown)
        out = out.filter(F.when(F.col("rejected").isNotNull(), F.raise_error(message)).isNull())
    if spec.slide is not None:  # one row per key and window
        from ..periodic import WINDOW_END

        keep = [*spec.keys, WINDOW_END]
    return out.select(*[column(c) for c in keep + outputs])


def _shown(column, data_type):
    """``column`` as a rejected row's message shows a value (Python's repr
    for strings, numbers and None, as the window's own messages do)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    text = column.cast("string")
    if isinstance(data_type, StringType):
        text = F.concat(F.lit("'"), F.replace(column, F.lit("'"), F.lit("\\'")), F.lit("'"))
    return F.coalesce(text, F.lit("None"))


def observe_rejected(out, args):
    """With ``--on-bad-row flag`` (without ``--slide``, whose bad rows
    :mod:`spark_ops.excluded` counts): ``out`` counting its flagged rows as Spark
    observed metrics (no extra pass over the data), and the ``Observation``
    (batch; a streaming query reports them in its progress under
    :data:`OBSERVED`); else ``out`` and None."""
    if args.on_bad_row != "flag" or getattr(args, "slide", None) is not None:  # --slide: spark_ops.excluded counts
        return out, None
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    metrics = F.count(F.col("rejected")).alias("rejected")
    if out.isStreaming:
        return out.observe(OBSERVED, metrics), None
    observation = Observation(OBSERVED)
    return out.observe(observation, metrics), observation


#: The name of the observed metrics of a job's flagged rows.
OBSERVED = "mta_rejected_rows"
