"""A case: every input of one incident loaded into one DuckDB database."""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from forensics import ingest, sources
from forensics.errors import ConfigError, InputError
from forensics.fields import FieldMap

DEFAULT_MEMORY_LIMIT = "1GB"


@dataclass
class Case:
    con: object  # duckdb.DuckDBPyConnection with tables parsed, events, skipped, sends
    inputs: list[ingest.InputSummary]

    @property
    def records(self) -> int:
        return sum(i.records for i in self.inputs)


def connect(database: str | None = None, memory_limit: str | None = None):
    """A DuckDB connection with a bounded memory limit that spills to a private temp folder."""
    import duckdb

    if database and Path(database).exists():
        Path(database).unlink()  # --save writes a fresh case, never mixes two
    spill = Path(tempfile.mkdtemp(prefix="mailmortem-spill-"))
    atexit.register(shutil.rmtree, spill, ignore_errors=True)  # spilled pages are never worth keeping
    config = {"memory_limit": _checked_size(memory_limit or DEFAULT_MEMORY_LIMIT),
              "temp_directory": str(spill), "preserve_insertion_order": True}
    try:
        return duckdb.connect(database or ":memory:", config=config)
    except duckdb.Error as exc:
        raise ConfigError(f"--memory-limit {memory_limit!r}: {str(exc).splitlines()[0]}") from None


def _checked_size(value: str) -> str:
    if not re.fullmatch(r"\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*", value, re.IGNORECASE):
        raise ConfigError(f"--memory-limit {value!r}: expected a size such as 512MB or 2GB")
    return value.strip()


def load_case(paths, syntax: str | None = None, field_map: FieldMap | dict | None = None,
              strict: bool = False, database: str | None = None, memory_limit: str | None = None,
              progress: ingest.Progress | None = None) -> Case:
    """Read logs (files, folders, globs, .gz, `-`) into DuckDB and build events and sends."""
    if isinstance(field_map, dict):
        field_map = FieldMap(field_map)
    resolved = sources.resolve(list(paths))
    con = connect(database, memory_limit)
    inputs = ingest.load(con, resolved, syntax=syntax, field_map=field_map, strict=strict, progress=progress,
                         keep_raw=database is not None)
    case = Case(con, inputs)
    if case.records == 0:
        raise InputError(_nothing_read(inputs))
    return case


def _nothing_read(inputs: list[ingest.InputSummary]) -> str:
    if len(inputs) == 1 and inputs[0].lines == 0:
        return f"{inputs[0].path}: file is empty, nothing to diagnose"
    names = ", ".join(i.path for i in inputs[:3]) + (" …" if len(inputs) > 3 else "")
    return f"no mail-send records found in {names} (check --syntax or map fields with --field)"
