"""The window job that ``run`` and ``stream`` share: its arguments checked
without Spark, and ``sliding_window`` over the input's window columns."""

from __future__ import annotations

from .. import aggregations as aggregations_
from ..names import missing_columns, spelled, trimmed
from ..spec import SlidingWindowError, WindowSpec, split_columns
from .errors import CLIError, cli_remedy
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
    slide = getattr(args, "slide", None)
    try:  # the spec refuses a store with a slide before Spark starts; any other --store is checked with the input
        return WindowSpec.build(key=split_columns(args.key), time=args.time, value=value_columns(args), aggs=names,
                                range=args.range, rows=args.rows, on_bad_row=args.on_bad_row,
                                frame=args.frame, slide=slide, store=args.store if slide is not None else None,
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


#: Columns a text column's parse carries through the window (dropped after): the text of
#: each column read as text (its position among them appended), and the file.
_TEXT, _FILE = "__mta_value_text", "__mta_value_file"
_PROBLEM = "__mta_problem"


def _reason(time: bool, data_type, text):
    """Why ``text`` (a column) did not parse as ``data_type``, naming it and its file."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType, TimestampType

    from .. import rows

    def reason(kind):
        return F.format_string(rows.text_not_parsed("time" if time else "value", kind), text, F.col(_FILE))

    if isinstance(data_type, IntegralType):  # a number, not whole, or no number at all
        return F.when(text.try_cast("double").isNotNull(), reason("an integer")).otherwise(reason("a number"))
    return reason("a timestamp" if isinstance(data_type, TimestampType) else "a number")


def text_columns(schema, fmt: str, args):
    """A CSV's numeric value columns and its time column (a number or, unless
    ``--option timestampFormat`` says how to read it, a timestamp) read as
    text, and per such column its type: Spark's CSV reader turns a text that
    does not parse into a null, which would be flagged as one; ``windows``
    parses them and flags such a row naming the text and its file.  With
    ``--watermark`` the time stays as read (Spark's watermark needs it
    typed).  Returns the schema to read with and ``{column: type}``."""
    from pyspark.sql.types import NumericType, StringType, StructField, StructType, TimestampType

    if fmt != "csv":
        return schema, {}
    formatted = any(name.lower() == "timestampformat" for name, _ in getattr(args, "option", ()))
    timed = (NumericType,) if formatted else (NumericType, TimestampType)
    names = set(value_columns(args))
    types = {f.name: f.dataType for f in schema.fields
             if f.name in names and isinstance(f.dataType, NumericType)
             or f.name == args.time and getattr(args, "watermark", None) is None and isinstance(f.dataType, timed)}
    fields = [StructField(f.name, StringType(), f.nullable) if f.name in types else f for f in schema.fields]
    return StructType(fields), types


def _parsed(fields: dict, args, types: dict) -> dict:
    """The columns ``windows`` parses, in the order the window checks them,
    each with its type: value columns read as text (double unless ``types``
    says), and the time column if ``types`` names it."""
    from pyspark.sql.types import DoubleType, StringType

    return {c: types.get(c) or DoubleType() for c in dict.fromkeys([args.time, *value_columns(args)])
            if isinstance(fields[c], StringType) and (c in types or c != args.time)}


def typed(df, args, types=None):
    """``df`` with the columns ``windows`` parses as their types (no job):
    what the window sees, for :func:`spark_ops.api.choose_engine`."""
    from ..plan import column

    for c, data_type in _parsed({f.name: f.dataType for f in df.schema.fields}, args, types or {}).items():
        df = df.withColumn(c, column(c).try_cast(data_type))
    return df


def windows(df, args, spec: WindowSpec, store: str | None, name: str | None, types=None):
    """``sliding_window`` over the key, time and value columns (every input
    column with ``--keep-columns``), returning them plus the aggregation
    columns (and ``rejected`` when flagging).

    A value column read as text (a CSV column with a value that is not a
    number, or read as text by :func:`text_columns`; ``types``: per column
    the type to parse it into, a value column's default double), and a time
    column ``types`` names, are parsed here: with ``--on-bad-row flag`` a
    row whose text does not parse is flagged naming the text and its file
    and the rest are kept; otherwise the first such row is an error naming
    them (in streaming, the micro-batch fails on it)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from .. import rows
    from ..api import sliding_window
    from ..names import clashes
    from ..plan import column

    types = types or {}
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
    # the time and value columns read as text (in the order the window checks them), each with the column
    # carrying its text, and the reason of a text that does not parse
    parsed = _parsed(fields, args, types)
    texts = {c: f"{_TEXT}{i}" for i, c in enumerate(parsed)}
    unparsed = {c: F.col(t).isNotNull() & column(c).isNull() for c, t in texts.items()}
    # a record the reader could not parse (Spark's PERMISSIVE mode: its text in this column, the rest null)
    corrupt = df.sparkSession.conf.get("spark.sql.columnNameOfCorruptRecord", "_corrupt_record")
    corrupt = corrupt if isinstance(fields.get(corrupt), StringType) and corrupt not in window_columns else None
    malformed = F.format_string(rows.MALFORMED, F.trim(column(corrupt)), F.col(_FILE)) if corrupt else None
    # why a row is bad: malformed, or per null the window would see, the first column whose text does not parse
    explains = {null: F.coalesce(*[F.when(unparsed[c], _reason(c == args.time, parsed[c], F.col(texts[c])))
                                   for c in named if c in texts], F.lit(None).cast("string"))
                for null, named in ((rows.NULL_TIME, [args.time]), (rows.NULL_VALUE, value_names))}
    problem = F.coalesce(*([F.when(column(corrupt).isNotNull(), malformed)] if corrupt else []), *explains.values())
    extra = []
    if texts or corrupt:
        df = df.withColumn(_FILE, F.input_file_name())
        for c, t in texts.items():
            text = column(c)
            df = df.withColumn(t, text).withColumn(c, text.try_cast(parsed[c]))
        if args.on_bad_row != "flag" and not df.isStreaming:
            bad = (df.filter(problem.isNotNull())
                     .select(problem.alias(_PROBLEM), *[column(c) for c in (*spec.keys, args.time, *value_names)],
                             *texts.values()).first())
            if bad is not None:
                # the parsed value where there is one, else the text that does not parse
                seen = {c: bad[texts[c]] if c in texts and bad[c] is None else bad[c]
                        for c in (args.time, *value_names)}
                key = tuple(bad[c] for c in spec.keys) if isinstance(spec.key, tuple) else bad[spec.key]
                shown = [seen[c] for c in value_names]
                raise CLIError(cli_remedy(str(rows.rejected(spec, bad[_PROBLEM], key, seen[args.time],
                                                            tuple(shown) if spec.value_fields else shown[0]))))
        extra = [*texts.values(), _FILE, *([corrupt] if corrupt and corrupt not in keep else [])]
    if args.time not in texts and isinstance(fields[args.time], StringType):
        raise CLIError(f"time column {args.time!r} is string, not a number of seconds, a timestamp or a date: "
                       f"give its type, --schema '..., {args.time} {_time_type(df, args.time)}, ...'")
    df = df.select(*[column(c) for c in keep + extra])
    # a stream can only say which text did not parse if the window flags the row: error mode
    # then fails the micro-batch (uncommitted, so nothing is lost) on the first flagged row
    # (--slide has no input row to flag: a text that does not parse is then a null, an error,
    # or with --on-bad-row flag a row left out of the windows and counted)
    raise_flagged = bool(texts or corrupt) and args.on_bad_row != "flag" and df.isStreaming and spec.slide is None
    try:
        out = sliding_window(df, key=list(spec.keys), time=args.time,
                             value=value_names if spec.value_fields else value_names[0],
                             aggs=aggregations(args.agg), range=args.range, rows=args.rows, store=store,
                             on_bad_row="flag" if raise_flagged else args.on_bad_row,
                             name=name, buffer_size=args.buffer_size, cache_size=args.cache_size,
                             engine=args.engine, expire_after=getattr(args, "expire_after", None),
                             frame=args.frame, slide=spec.slide, ties=spec.ties)
    except SlidingWindowError as e:
        from ..periodic import CAST_TIME

        # mta-spark casts nothing: a CSV or JSON input's types are what --schema says
        raise CLIError(str(e).replace(CAST_TIME, "read it as a timestamp or a double for --slide (CSV or JSON "
                                      f"input: --schema '..., {args.time} TIMESTAMP, ...')")) from None
    if (texts or corrupt) and spec.slide is None and (args.on_bad_row == "flag" or raise_flagged):
        # the window saw a null: say why it was one (a malformed record: whatever it saw missing)
        rejected = F.col("rejected")
        cases = [(column(corrupt).isNotNull() & rejected.isNotNull(), malformed)] if corrupt else []
        cases += [((rejected == null) & reason.isNotNull(), reason) for null, reason in explains.items()]
        fixed = F.when(*cases[0])
        for case in cases[1:]:
            fixed = fixed.when(*case)
        out = out.withColumn("rejected", fixed.otherwise(rejected))
    if raise_flagged:
        # the parsed value where there is one, else the text that does not parse
        named = [*spec.keys, args.time, *value_names]
        shown = [F.coalesce(column(c).cast("string"), _shown(F.col(texts[c]), StringType())) if c in texts
                 else _shown(column(c), fields[c]) for c in named]
        message = F.format_string(_rejected_template(spec), F.col("rejected"), *shown)
        out = out.filter(F.when(F.col("rejected").isNotNull(), F.raise_error(message)).isNull())
    if spec.slide is not None:  # one row per key and window
        from ..periodic import WINDOW_END

        keep = [*spec.keys, WINDOW_END]
    return out.select(*[column(c) for c in keep + outputs])


def _time_type(df, time: str) -> str:
    """The --schema type a text time column's texts parse as (one job, in batch)."""
    from pyspark.sql.types import DoubleType

    from .inputs import time_text_type

    kind = None if df.isStreaming else time_text_type(df, time)
    return "DOUBLE (seconds)" if isinstance(kind, DoubleType) else "TIMESTAMP" if kind else "TIMESTAMP or DOUBLE"


class _Slot:
    """A value whose repr is a placeholder: :func:`spark_ops.rows.rejected`'s
    message of slots is the rejected row's message as a template."""

    def __repr__(self) -> str:
        return "\0"


def _rejected_template(spec: WindowSpec) -> str:
    """The CLI's message of a rejected row (its reason, key, time and values)
    as a ``format_string`` template, in the shape the window's own has."""
    from .. import rows

    slot = _Slot()
    key = tuple(slot for _ in spec.keys) if isinstance(spec.key, tuple) else slot
    value = tuple(slot for _ in spec.value_fields) if spec.value_fields else slot
    text = cli_remedy(str(rows.rejected(spec, "\0", key, slot, value)))
    return text.replace("%", "%%").replace("\0", "%s")


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
