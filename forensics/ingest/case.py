"""A case: every input of one incident loaded into one DuckDB database."""

from __future__ import annotations

import atexit
import re
import shlex
import weakref
from dataclasses import dataclass, field
from pathlib import Path

import queries

from forensics.ingest import load as ingest, runfolders, sources, window
from forensics.errors import ConfigError, InputError
from forensics.ingest.fields import FieldMap
from forensics.ingest.reading import ReadOptions
from forensics.ingest.refusal import no_send_message, seen_in_sample
from forensics.ingest.vocabulary import Vocabulary

DEFAULT_MEMORY_LIMIT = "1GB"
SPILL_PREFIX = "mailmortem-spill-"
SMALL_CASE_BYTES = 64 * 2**20
GZIP_RATIO = 8  # a log compresses about this much: what a .gz input weighs once read


@dataclass
class Case:
    con: object  # duckdb.DuckDBPyConnection with views events, skipped and table sends
    inputs: list[ingest.InputSummary]
    unread: list[dict] = field(default_factory=list)  # files and folders left out under --skip-unreadable
    reading: ingest.Reading = ingest.Reading()  # --envelope, --tz, --year
    window: window.Cut | None = None  # --since/--until as applied, and what they left out
    saved: bool = False  # kept in a database file (--save): its tables are for `mailmortem sql`
    options: ReadOptions = ReadOptions()  # how the logs were read: repeated by every next command printed
    # exports among the LOGS: {"path" (as shown), "provider", "file" (as read: standard input's copy)}
    provider_exports: list[dict] = field(default_factory=list)
    vocabulary: Vocabulary = field(default_factory=Vocabulary)  # which key was read as which field, and why

    @property
    def records(self) -> int:
        return sum(i.records for i in self.inputs)


def connect(database: str | None = None, memory_limit: str | None = None, input_bytes: int = 0):
    """A DuckDB connection with a bounded memory limit that spills to a private temp folder.

    Without `database`, a case read from more than SMALL_CASE_BYTES of logs still lives in a file (in
    that folder, removed at exit): tables in a database file are stored compressed (~6x smaller than
    DuckDB's in-memory tables) and can be paged out, which keeps a 10M-line case within the memory
    limit. Smaller cases stay in memory, where they build faster.
    """
    import duckdb

    if database and Path(database).exists():
        Path(database).unlink()  # --save writes a fresh case, never mixes two
    limit = _checked_size(memory_limit or DEFAULT_MEMORY_LIMIT)
    spill = runfolders.make(SPILL_PREFIX)
    try:
        in_file = database or (str(spill / "case.duckdb") if input_bytes > SMALL_CASE_BYTES else ":memory:")
        con = duckdb.connect(in_file, config=_config(limit, spill))
    except duckdb.Error as exc:
        runfolders.remove(spill)
        raise ConfigError(f"--memory-limit {memory_limit!r}: {str(exc).splitlines()[0]}") from None
    # spilled pages and an unsaved case are never worth keeping; a weak reference lets a finished case
    # close as soon as nobody holds it (a saved case can then be opened read-only in the same process)
    atexit.register(_discard, weakref.ref(con), spill)
    return con


def reopened(con):
    """The same database file opened again on a new connection, with the same memory limit and spill folder; `con`
    is closed (its pending changes checkpointed). DuckDB's heap of a connection that runs many small statements
    grows for as long as it is open, and is let go only when it closes (the watch's state: forensics/watch)."""
    import duckdb

    now = queries.one(con, "database_file")
    if not now["path"]:
        raise ValueError("only a connection to a database file can be opened again")
    con.close()
    fresh = duckdb.connect(now["path"], config=_config(now["memory_limit"], now["spill"]))
    atexit.register(_discard, weakref.ref(fresh), Path(now["spill"]))
    return fresh


def discard(con) -> None:
    """Close a connection made by connect and remove its private folder (its database file, if any, with it)."""
    import duckdb

    try:
        spill = queries.one(con, "spill_folder")["folder"]
    except duckdb.ConnectionException:  # closed already: its folder goes at exit
        return
    _discard(lambda: con, Path(spill))


def _config(limit: str, spill) -> dict:
    """A connection's DuckDB settings: its memory limit, and its private folder to spill to."""
    return {"memory_limit": limit, "temp_directory": str(spill), "preserve_insertion_order": True}


def _discard(con_ref, spill: Path) -> None:
    con = con_ref()
    if con is not None:
        try:
            con.close()
        except Exception:  # closing after an error: the folder goes either way
            pass
    runfolders.remove(spill)


def _checked_size(value: str) -> str:
    if not re.fullmatch(r"\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*", value, re.IGNORECASE):
        raise ConfigError(f"--memory-limit {value!r}: expected a size such as 512MB or 2GB")
    return value.strip()


def load_case(paths, *, syntax: str | None = None, field_map: FieldMap | dict | None = None,
              strict: bool = False, database: str | None = None, memory_limit: str | None = None,
              progress: ingest.Progress | None = None, skip_unreadable: bool = False,
              reading: ingest.Reading | None = None, limits: window.Window = window.Window(),
              options: ReadOptions | None = None, require_sends: bool = False) -> Case:
    """Read logs (files, folders, globs, .gz, `-`) into DuckDB and build events and sends. A file or folder
    that cannot be read is an error, or with `skip_unreadable` left out and listed in `Case.unread`.
    `reading` forces an envelope and says how to read times without a zone or a year; `limits` (--since,
    --until) keeps one window of time, and a window without a send is refused; so are records of which none was
    recognised as a send (`require_sends`: what the commands that look for duplicates ask). `options` (what the
    commands pass) says all of that at once, in place of the keywords before `database`.
    A provider's export among the LOGS is not read as a log: it is listed in `Case.provider_exports`."""
    options = options or _options(syntax, field_map, reading, limits, strict=strict, memory_limit=memory_limit,
                                  skip_unreadable=skip_unreadable)
    unreadable = sources.Unreadable(skip=options.skip_unreadable)
    resolved, exports = _apart(sources.resolve(list(paths), unreadable))
    if not resolved:
        raise InputError(_no_logs(unreadable.found, exports))
    con = connect(database, options.memory_limit, sum(_input_bytes(s) for s in resolved))
    field_map, reading = options.how_read()
    inputs, cut, read_as = ingest.load(con, resolved, syntax=options.syntax, field_map=field_map,
                                       strict=options.strict, progress=progress, keep_raw=database is not None,
                                       reading=reading, limits=options.window)
    case = Case(con, inputs, unreadable.found, reading, cut, saved=database is not None, options=options,
                provider_exports=exports, vocabulary=read_as)
    if case.records == 0:
        raise InputError(_nothing_read(inputs) + ("." + seen_in_sample(read_as) if read_as.keys else ""))
    if cut:
        window.check_kept(con, cut)
    if require_sends and not queries.one(con, "any_send")["found"]:  # never "No duplicates" on records not understood
        raise InputError(no_send_message(read_as, case.records))
    return case


def _options(syntax, field_map, reading, limits, *, strict, memory_limit, skip_unreadable) -> ReadOptions:
    reading = reading or ingest.Reading()
    given = field_map if isinstance(field_map, FieldMap) else FieldMap(dict(field_map or {}))
    return ReadOptions(syntax=syntax, fields=dict(given.overrides), events=dict(given.events), infer=given.infer,
                       envelope=reading.envelope,
                       tz=None if reading.tz == "UTC" else reading.tz, year=reading.year, window=limits,
                       strict=strict, memory_limit=memory_limit, skip_unreadable=skip_unreadable)


def _apart(resolved: list[sources.Source]) -> tuple[list[sources.Source], list[dict]]:
    """The logs, and the provider exports among them (forensics.providers.files.provider_of)."""
    from forensics.providers.files import provider_of

    logs, exports = [], []
    for source in resolved:
        provider = provider_of(source)
        if provider:
            exports.append({"path": source.label, "provider": provider, "file": source.path})
        else:
            logs.append(source)
    return logs, exports


def _no_logs(unread: list[dict], exports: list[dict]) -> str:
    if exports and not unread:
        named = " ".join(f"--provider-export {shlex.quote(e['path'])}" for e in exports[:3])
        return (f"no logs among the inputs, only provider history ({_exports_named(exports)}); to diagnose it "
                f"alone run: mailmortem diagnose {named}")
    return f"nothing could be read: {_listed(unread)}"


def _exports_named(exports: list[dict]) -> str:
    return "; ".join(f"{e['path']} ({e['provider']})" for e in exports[:3]) + (" …" if len(exports) > 3 else "")


def _listed(unread: list[dict]) -> str:
    return "; ".join(f"{u['path']} ({u['reason']})" for u in unread[:3]) + (" …" if len(unread) > 3 else "")


def _input_bytes(source: sources.Source) -> int:
    size = Path(source.path).stat().st_size
    return size * GZIP_RATIO if source.gzipped else size


def _nothing_read(inputs: list[ingest.InputSummary]) -> str:
    if len(inputs) == 1 and inputs[0].lines == 0:
        return f"{inputs[0].path}: file is empty, nothing to diagnose"
    names = ", ".join(i.path for i in inputs[:3]) + (" …" if len(inputs) > 3 else "")
    notes = [i.note for i in inputs if i.note]
    if notes and len(notes) == len([i for i in inputs if i.lines]):
        return "no mail-send records found. " + "; ".join(notes[:3])
    return f"no mail-send records found in {names} (check --syntax or map fields with --field)"
