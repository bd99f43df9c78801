"""The window job that ``run`` and ``stream`` share: its arguments checked
without Spark, and ``sliding_window`` over the input's window columns."""

from __future__ import annotations

from ..spec import SlidingWindowError, WindowSpec
from .errors import CLIError
from .options import aggregation_names


def window_spec(args) -> WindowSpec:
    """Check the window arguments (aggregations, size) without Spark."""
    ready = aggregation_names()
    names = [a.strip() for a in args.agg.split(",") if a.strip()]
    if not names:
        raise CLIError(f"--agg needs at least one aggregation, e.g. --agg max,mean; choose from {', '.join(ready)}")
    unknown = [a for a in names if a.lower() not in ready]
    if unknown:
        raise CLIError(f"unknown aggregation{'s' * (len(unknown) > 1)} {', '.join(map(repr, unknown))} "
                       f"in --agg; choose from {', '.join(ready)}")
    try:
        return WindowSpec.build(key=args.key, time=args.time, value=args.value, aggs=args.agg,
                                range=args.range, rows=args.rows, on_bad_row=args.on_bad_row)
    except SlidingWindowError as e:
        raise CLIError(str(e)) from None


def describe(spec: WindowSpec) -> str:
    size = f"range {spec.range} s" if spec.range is not None else f"newest {spec.rows} rows"
    return f"{', '.join(n for n, _, _ in spec.aggs)} over {size} per {spec.key}"


def windows(df, args, spec: WindowSpec, store: str | None, name: str | None):
    """``sliding_window`` over the key, time and value columns only, returning
    them plus the aggregation columns (and ``rejected`` when flagging)."""
    from pyspark.sql import functions as F

    from ..api import sliding_window

    fields = {f.name: f.dataType for f in df.schema.fields}
    missing = [c for c in (args.key, args.time, args.value) if c not in fields]
    if missing:
        raise CLIError(f"no column {', '.join(repr(c) for c in missing)} in the input; it has "
                       f"{', '.join(fields) or 'no columns'}")
    outputs = [n for n, _ in spec.output_columns]
    clash = sorted({args.key, args.time, args.value} & set(outputs))
    if clash:
        raise CLIError(f"input column {', '.join(map(repr, clash))} has the name of an output column; "
                       "rename it in the input")
    keep = list(dict.fromkeys([args.key, args.time, args.value]))
    df = df.select(*[F.col(f"`{c}`") for c in keep])
    try:
        out = sliding_window(df, key=args.key, time=args.time, value=args.value, aggs=args.agg,
                             range=args.range, rows=args.rows, store=store, on_bad_row=args.on_bad_row,
                             name=name, buffer_size=args.buffer_size, cache_size=args.cache_size,
                             engine=args.engine, expire_after=getattr(args, "expire_after", None))
    except SlidingWindowError as e:
        raise CLIError(str(e)) from None
    return out.select(*[F.col(f"`{c}`") for c in keep + outputs])
