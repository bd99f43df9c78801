"""What ``mta-spark stream`` keeps beside Spark's files in its checkpoint
location (``mta-spark.json``): the input schema the query started with and
its name in the store.  Spark's file source infers nothing once a query
runs, and a schema inferred again at a restart from files that arrived
since could change the output's column types (Parquet files the sink cannot
read back together); a name taken again from the path as typed would miss
the windows when the same location is reached by another path."""

from __future__ import annotations

import hashlib
import json
import os

from . import inputs
from .errors import CLIError

#: The file in the checkpoint location (Spark reads only its own subdirectories there).
FILE = "mta-spark.json"


class Checkpoint:
    """The checkpoint location ``location`` (local or any Hadoop file system)."""

    def __init__(self, spark, location: str):
        self.location = location
        self._jvm = spark._jvm
        path = self._jvm.org.apache.hadoop.fs.Path(inputs.spark_path(location))
        self._fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
        self._dir = self._fs.makeQualified(path)
        self._file = self._jvm.org.apache.hadoop.fs.Path(self._dir, FILE)

    def kept(self) -> dict:
        """What an earlier run kept here ({} for none)."""
        try:
            if not self._fs.exists(self._file):
                return {}
            stream = self._fs.open(self._file)
            try:
                return json.loads(bytes(stream.readAllBytes()).decode("utf-8"))
            finally:
                stream.close()
        except Exception as e:  # noqa: BLE001 - Py4J errors and a file that is not JSON
            raise CLIError(f"cannot read {self._file.toString()} in --checkpoint {self.location}: "
                           f"{str(e).splitlines()[0] if str(e) else type(e).__name__}; it holds the schema and "
                           "name the query started with (restore it, or start a new query with a new --checkpoint "
                           "and --output)") from None

    def started(self) -> bool:
        """Whether a query ran here (Spark's log of offsets or its query id exists)."""
        return any(self._fs.exists(self._jvm.org.apache.hadoop.fs.Path(self._dir, name))
                   for name in ("offsets", "metadata"))

    def keep(self, record: dict) -> None:
        """Write ``record`` (written whole beside, then renamed: never half a file)."""
        path = self._jvm.org.apache.hadoop.fs.Path
        tmp = path(self._dir, f".{FILE}.tmp")
        try:
            out = self._fs.create(tmp, True)
            try:
                out.write(bytearray(json.dumps(record, indent=1).encode("utf-8")))
            finally:
                out.close()
            if self._fs.exists(self._file):
                self._fs.delete(self._file, False)
            if not self._fs.rename(tmp, self._file):
                raise OSError(f"renaming {tmp.toString()} failed")
        except Exception as e:  # noqa: BLE001 - Py4J errors
            raise CLIError(f"cannot write --checkpoint {self.location}: "
                           f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None

    def names(self) -> list[str]:
        """The query's possible names in the store, by its location: resolved
        (symlinks, trailing slashes, a qualified URI), then as the location
        was typed: the name of a query whose checkpoint keeps none."""
        local = inputs.local_path(self.location)
        resolved = os.path.realpath(local) if local is not None else self._dir.toString().rstrip("/")
        typed = local if local is not None else self.location
        return list(dict.fromkeys(_name(p) for p in (resolved, typed)))


def _name(location: str) -> str:
    return "stream-" + hashlib.sha1(location.encode()).hexdigest()[:12]


def schema_change(kept, given, columns, location: str) -> str | None:
    """How ``given`` (a StructType) changes the type of one of ``columns``
    (those in the output, lower case) from ``kept``'s, as an error; or None."""
    old = {f.name.lower(): f.dataType for f in kept.fields}
    for f in given.fields:
        before = old.get(f.name.lower())
        if f.name.lower() in columns and before is not None and before != f.dataType:
            was, now = before.simpleString().upper(), f.dataType.simpleString().upper()
            return (f"--schema gives {f.name!r} {now}, but the query in --checkpoint {location} started with "
                    f"{f.name!r} {was} (its --output holds that type): keep '{f.name} {was}' in --schema, or "
                    "start a new query with a new --checkpoint and --output")
    return None
