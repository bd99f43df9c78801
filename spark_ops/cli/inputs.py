"""Input paths and formats: local or remote paths, the format of a file or
directory, and Spark readers for them."""

from __future__ import annotations

import os
import re

from ..names import spelled
from .errors import CLIError

FORMATS = ("csv", "parquet", "json")
_EXTENSIONS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet",
               ".json": "json", ".jsonl": "json", ".ndjson": "json"}
_COMPRESSION = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".xz")

#: A Hadoop file system URI's scheme (hdfs:, s3a:, abfss:, ...).  Two
#: characters at least: ``C:`` is a local path's drive, not a scheme.  Store
#: URLs follow the stores' own rules, not this one.
_URI_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:")


def local_path(path: str) -> str | None:
    """The local file system path of ``path``, or None for remote URIs (hdfs:, s3a:, ...)."""
    if path.startswith("file:"):
        from urllib.parse import unquote, urlsplit

        return os.path.abspath(unquote(urlsplit(path).path))
    if _URI_SCHEME.match(path):
        return None
    return os.path.abspath(os.path.expanduser(path))


def spark_path(path: str) -> str:
    """``path`` as Spark should see it: local paths absolute, as ``file:``
    paths, because Spark's JVM resolves relative paths against the directory
    it started in, which need not be this process's working directory."""
    local = local_path(path)
    return path if local is None else "file:" + local


def visible_files(directory: str) -> list[str]:
    """The files Spark reads in ``directory``: not hidden, not ``_``-prefixed, no checksums."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        found += [os.path.join(root, f) for f in sorted(files)
                  if not f.startswith((".", "_")) and not f.endswith(".crc")]
    return found


def check_input(path: str, *, directory: bool = False) -> str | None:
    """Fail clearly if a local input is missing or unreadable; its local path."""
    local = local_path(path)
    if local is None:
        return None
    if not os.path.exists(local):
        raise CLIError(f"input {path} does not exist")
    if directory and not os.path.isdir(local):
        raise CLIError(f"input {path} is not a directory (stream reads the files arriving in a directory)")
    readable = os.access(local, os.R_OK) and (not os.path.isdir(local) or os.access(local, os.X_OK))
    if not readable:
        raise CLIError(f"cannot read input {path}: permission denied")
    if os.path.isdir(local):
        for f in visible_files(local):
            if not os.access(f, os.R_OK):
                raise CLIError(f"cannot read input file {f}: permission denied")
    return local


def format_of(path: str, local: str | None, given: str | None) -> str:
    """``given``, else the format the file names tell (compression suffixes aside)."""
    if given:
        return given
    names = [path]
    if local is not None and os.path.isdir(local):
        names = visible_files(local)
    for name in names:
        base = name.lower()
        for ext in _COMPRESSION:
            if base.endswith(ext):
                base = base[: -len(ext)]
        fmt = _EXTENSIONS.get(os.path.splitext(base)[1])
        if fmt:
            return fmt
    raise CLIError(f"cannot tell the format of {path} from its file names; pass --format csv|parquet|json")


def reader(reader, fmt: str, *, streaming: bool, options=(), schema=None):
    """``reader`` (``spark.read`` or ``spark.readStream``) for ``fmt``: CSV with
    a header line, its column types inferred in batch unless ``schema`` (a
    ``StructType``) gives them; ``options``: ``(name, value)`` pairs passed
    to Spark's reader after these (``--option``), so they can override them."""
    reader = reader.format(fmt)
    if fmt == "csv":
        # enforceSchema off: a schema's columns are matched to the header by name (an error if they differ),
        # not laid over the file's columns by position
        reader = reader.option("header", "true").option("enforceSchema", "false")
        if not streaming and schema is None:
            reader = reader.option("inferSchema", "true")
    for name, value in options:
        reader = reader.option(name, value)
    return reader if schema is None else reader.schema(schema)


def load(spark, fmt: str, path: str, options=(), schema=None):
    """The batch DataFrame of the files at ``path`` (:func:`reader`).  A
    failure here is the input's (a file not in ``fmt``, unreadable, corrupt):
    a :class:`CLIError` naming the path, the format and Spark's cause."""
    from .errors import failure_message

    try:
        return reader(spark.read, fmt, streaming=False, options=options, schema=schema).load(spark_path(path))
    except CLIError:
        raise
    except Exception as e:  # noqa: BLE001 - Spark's reader raises Py4J and captured JVM errors
        raise CLIError(f"cannot read {path} as {fmt}: {failure_message(e)[0]}; --format names the input's "
                       "format") from e


def inferred_schema(spark, fmt: str, path: str, options, keys, time: str | None = None):
    """The schema Spark infers from the files at ``path``, a CSV's key
    columns as ``STRING``: a key is its text ("007" and "7" are two hosts,
    which inference would read as one number).  A CSV's ``time`` column
    inferred as text (a text among numbers or timestamps) takes the type
    most of its texts parse as (:func:`time_text_type`): the window then
    parses it row by row, a text that does not parse being a bad row."""
    from pyspark.sql.types import StringType, StructField, StructType

    schema = load(spark, fmt, path, options).schema
    if fmt != "csv":
        return schema
    keys = spelled(list(keys), schema.names)
    time = spelled([time], schema.names)[0] if time is not None else None
    fields = [StructField(f.name, StringType(), f.nullable) if f.name in keys else f for f in schema.fields]
    if time in schema.names and isinstance(schema[time].dataType, StringType):
        kind = time_text_type(load(spark, fmt, path, options, StructType(fields)), time, path)
        fields = [StructField(f.name, kind, f.nullable) if f.name == time and kind is not None else f
                  for f in fields]
    return StructType(fields)


def time_text_type(df, time: str, path: str | None = None):
    """The type most texts of a batch ``df``'s string ``time`` column parse
    as: ``DoubleType`` (seconds) or ``TimestampType``, ``None`` if none
    parses (one job).  ``path``: the input whose types are being inferred,
    an error if it has no rows (a CSV's header alone gives only text)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, TimestampType

    text = F.col(f"`{time.replace('`', '``')}`")
    found = df.select(F.count(F.lit(1)), F.count(text.try_cast("double")),
                      F.count(text.try_cast("timestamp"))).first()
    if found[0] == 0 and path is not None:
        raise CLIError(f"input {path} has no rows, so there are no column types to infer; pass --schema "
                       "'col TYPE, ...'")
    if max(found[1], found[2]) == 0:
        return None
    return DoubleType() if found[1] >= found[2] else TimestampType()


def _where(path: str) -> str:
    """``path`` resolved: local paths through symlinks, others as Spark sees them; no trailing slash."""
    local = local_path(path)
    return (os.path.realpath(local) if local is not None else spark_path(path)).rstrip("/")


def check_apart(input_path: str, path: str, option: str = "--output") -> None:
    """``path`` (``option``'s directory) neither is, holds nor lies in the
    input: replacing or adding to it would delete or add input files, and
    reading a directory that holds it would read what the job wrote."""
    a, b = _where(input_path), _where(path)
    if a == b or a.startswith(b + "/") or b.startswith(a + "/"):
        raise CLIError(f"{option} {path} and --input {input_path} overlap (writing {option} would delete or add "
                       f"to the input); give an {option} outside the input")


def check_writable(path: str, option: str = "--output") -> None:
    """Fail before Spark starts if a local ``path`` cannot be made: its
    nearest existing ancestor is a file, or not writable."""
    local = local_path(path)
    if local is None:
        return
    parent = os.path.dirname(local.rstrip("/")) or "/"
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if os.path.exists(local) and not os.path.isdir(local):
        raise CLIError(f"cannot write {option} {path}: it is a file; give a directory")
    if not os.path.isdir(parent):
        raise CLIError(f"cannot write {option} {path}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CLIError(f"cannot write {option} {path}: permission denied in {parent}")


def parse_schema(text: str):
    """``--schema``'s DDL (``'host STRING, ts TIMESTAMP, mem DOUBLE'``) as a ``StructType``."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    from .errors import failure_message

    try:
        schema = _parse_datatype_string(text)
    except Exception as e:  # noqa: BLE001
        raise CLIError(f"bad --schema {text!r}: {failure_message(e)[0]}") from None
    if not isinstance(schema, StructType):
        raise CLIError(f"bad --schema {text!r}: give columns, e.g. 'host STRING, ts TIMESTAMP, mem DOUBLE'")
    return schema
