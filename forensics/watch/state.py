"""The watch's DuckDB state: each poll's chunks of new lines read by the loader `diagnose` reads files with (on a
scratch connection, into its events and skipped views), then added to the state (queries/watch.sql), which says
what changed: new duplicated people, workers seen for the first time or restarted, the poll's sends. Of the
sends kept before, a poll reads only the rows an index of their hashes points to (forensics.watch.keys): the same
send or the same person as one of its own.

Each chunk is written to a file of its own in a folder of the run's own (forensics.ingest.runfolders, removed
however the run ends) and read once; the followed logs themselves are never read whole. A file's syntax and
envelope, once read, are forced on its later chunks (a chunk of three lines, or of a stack trace alone, would
otherwise be detected on its own)."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import queries
from forensics.ingest import case as cases, runfolders, window
from forensics.ingest import load as ingest
from forensics.ingest.envelopes import NONE as NO_ENVELOPE, Reading
from forensics.ingest.fields import FieldMap
from forensics.ingest.sources import Source
from forensics.watch.follow import Chunk, csv_header
from forensics.watch.keys import RowIndex

CHUNKS_PREFIX = "mailmortem-watch-"
# each connection's DuckDB memory limit unless --memory-limit says. The state's is lower: naming kinds reads the whole
# state, and what classify holds beyond it is spilled rather than kept, so that its peak grows far more slowly with
# the state (it still grows: docs/benchmarks.md, watch)
SCRATCH_MEMORY, STATE_MEMORY = "256MB", "96MB"
# the state's memory limit for a moment after kinds are named (State.release): what classify read is let go of
RELEASED_MEMORY = "16MB"
# a poll's new lines are added to the state this many bytes at a time at most (a chunk cut at a line's end): a
# backlog read at once (--since all over several files, a stream piped in whole) would otherwise be looked up and
# compared in one statement, beyond the state's memory limit
TAKE_BYTES = 2 * 2**20


@dataclass
class Options:
    """How to read (as diagnose): --syntax, the field map, --envelope/--tz/--year, --memory-limit, and the time
    before which records are left out (--since DURATION|TIME; None: every line read counts)."""

    syntax: str | None = None
    field_map: FieldMap = field(default_factory=FieldMap)
    reading: Reading = Reading()
    memory_limit: str | None = None
    since: window.Bound | None = None
    strict: bool = False


@dataclass
class Changes:
    """What one poll's chunks changed: new duplicated people, worker news, and the poll's sends per worker."""

    duplicates: list[dict] = field(default_factory=list)
    workers: list[dict] = field(default_factory=list)
    sends: list[dict] = field(default_factory=list)


class State:
    def __init__(self, options: Options):
        self.options = options
        options.field_map.keys_seen = set()  # each poll reads with the keys the polls before it saw (FieldMap)
        self.scratch = self._scratch()
        # the state grows with the watch: kept in a database file (in the connection's private spill folder, removed
        # at exit), stored compressed and paged out, so that memory stays flat however long the watch runs
        self.con = _ready(cases.connect(None, options.memory_limit or STATE_MEMORY,
                                        input_bytes=cases.SMALL_CASE_BYTES + 1))
        self.folder = runfolders.make(CHUNKS_PREFIX)
        self.shapes: dict[str, tuple[str, str | None]] = {}  # file → (syntax, envelope) its first chunk was read as
        self.created = False
        # the rows of watch_sends by person and by send (their runs past a size are files of the run folder)
        self.person_rows, self.send_rows = RowIndex(self.folder, "person-rows"), RowIndex(self.folder, "send-rows")
        self.kept = 0  # rows of watch_sends: the next one added is this rowid
        self.workers: set[tuple] = set()  # the (worker, incarnation) pairs of watch_workers
        self.reported = np.empty(0, np.uint64)  # the person hashes of watch_people, sorted
        self._warm()

    def _scratch(self):
        """The connection the loader reads each poll's chunks on: in memory, on one thread."""
        scratch = cases.connect(None, self.options.memory_limit or SCRATCH_MEMORY)
        queries.run(scratch, "watch_one_thread")
        return scratch

    def _warm(self) -> None:
        """Make the loader's macros (and import what a poll needs) before the watch begins, not at its first line."""
        import pyarrow  # noqa: F401 - imported by _add, whose first import is slow

        empty = self.folder / "empty.log"
        empty.write_bytes(b"")
        ingest.load(self.scratch, [Source(str(empty), str(empty), False)], reading=self.options.reading)
        empty.unlink()

    def take(self, chunks: list[Chunk]) -> Changes:
        """Read the chunks into the state and say what changed."""
        changes = Changes()
        for batch in _batches(chunks, TAKE_BYTES):
            for group in self._groups(batch).values():
                self._read(group, changes)
        return changes

    def _groups(self, chunks: list[Chunk]) -> dict[tuple, list[Chunk]]:
        """Chunks read in one load: those of files whose shape is known, per shape; those of new files together."""
        groups: dict[tuple, list[Chunk]] = {}
        for chunk in chunks:
            groups.setdefault(self.shapes.get(chunk.label, (None, None)), []).append(chunk)
        return groups

    def _read(self, chunks: list[Chunk], changes: Changes) -> None:
        """One load of the chunks (through the loader, the same reading as diagnose), added to the state in one
        statement per table. Plain chunks of files already read (no envelope, no CSV header) are read as one file:
        the loader's cost is per file, and a folder of one log per worker would pay it for each at every poll."""
        shape = self.shapes.get(chunks[0].label)
        joined = shape is not None and shape[1] == NO_ENVELOPE and not any(c.prefix for c in chunks)
        pieces = self._written([chunks] if joined else [[c] for c in chunks])
        syntax, envelope = shape or (self.options.syntax, None)
        reading = self.options.reading if envelope is None else dataclasses.replace(self.options.reading,
                                                                                    envelope=envelope)
        try:
            inputs, _cut, _read_as = ingest.load(self.scratch, [Source(p, p, False) for p in pieces], syntax=syntax,
                                                 field_map=self.options.field_map, reading=reading,
                                                 strict=self.options.strict, limits=window.Window(self.options.since),
                                                 again=True)
            for (path, spans), summary in zip(pieces.items(), inputs):
                if summary.records and len(spans) == 1:
                    self.shapes.setdefault(spans[0][2].label, (summary.syntax, summary.envelope or NO_ENVELOPE))
            self._add(pieces, changes, skipped=any(summary.skipped for summary in inputs))
        finally:  # the pieces' files; their folders are used again by the next poll's pieces (made once, not each poll)
            for path in pieces:
                Path(path).unlink(missing_ok=True)

    def _written(self, groups: list[list[Chunk]]) -> dict[str, list[tuple[int, int, Chunk]]]:
        """Each group of chunks written as one file: its path → (first line, last line, chunk) of each chunk in it.
        A file alone is written under its own path inside a folder of its own: what an envelope reads from a path
        (Docker's container id, a pod's name) is read from it as from the file itself."""
        pieces, numbers = {}, itertools.count(1)
        for group in groups:
            folder = self.folder / str(next(numbers))
            path = folder / (group[0].label.lstrip("/") if len(group) == 1 else "joined.log")
            path.parent.mkdir(parents=True, exist_ok=True)
            spans, first = [], 1
            with open(path, "wb") as handle:
                for chunk in group:
                    handle.write(chunk.prefix + chunk.data)
                    lines = (chunk.prefix + chunk.data).count(b"\n")
                    spans.append((first, first + lines - 1, chunk))
                    first += lines
            pieces[str(path)] = spans
        return pieces

    def _add(self, pieces: dict[str, list[tuple[int, int, Chunk]]], changes: Changes, skipped: bool = True) -> None:
        """The loaded chunks added to the state; `skipped`: whether the loader counted skipped lines among them
        (when it did not, the skipped view is empty: neither copied nor inserted, once the state exists)."""
        import pyarrow as pa

        spans = [(path, *span) for path, of_file in pieces.items() for span in of_file]
        files = pa.table({"chunk": [p for p, *_ in spans], "first_line": [f for _, f, _, _ in spans],
                          "last_line": [last for _, _, last, _ in spans], "source": [c.label for *_, c in spans],
                          "lines_before": [c.lines_before - (1 if c.prefix else 0) for *_, c in spans]})
        self.con.register("watch_chunk_files", files)
        events = self.scratch.sql("SELECT * FROM events").to_arrow_table()
        self.con.register("watch_chunk_events", events)
        skipped = skipped or not self.created
        if skipped:
            self.con.register("watch_chunk_skipped", self.scratch.sql("SELECT * FROM skipped").to_arrow_table())
        if not self.created:
            queries.script(self.con, "watch_create_state")
            self.created = True
        queries.script(self.con, "watch_take_chunk")
        if skipped:
            queries.run(self.con, "watch_take_skipped")
            self.con.unregister("watch_chunk_skipped")
        news = self._worker_news(events)
        for name in ("watch_chunk_files", "watch_chunk_events"):
            self.con.unregister(name)
        if self._add_sends():
            found = queries.rows(self.con, "watch_duplicate_rows")
            self.reported = np.union1d(self.reported, np.array([row.pop("person") for row in found], np.uint64))
            changes.duplicates += found
        if news:
            changes.workers += queries.rows(self.con, "watch_worker_rows")
        changes.sends += queries.rows(self.con, "watch_sends_by_worker")

    def _worker_news(self, events) -> bool:
        """watch_worker_news, run only when it can find something: a record names a worker and incarnation not held
        yet, or logs a start (a poll of known workers' sends spares its statements)."""
        import pyarrow.compute as pc

        named = events.filter(pc.fill_null(pc.not_equal(events.column("worker"), ""), False))
        pairs = set(zip(named.column("worker").to_pylist(), named.column("incarnation").to_pylist()))
        if pairs <= self.workers and not pc.any(pc.equal(named.column("event"), "start")).as_py():
            return False
        queries.script(self.con, "watch_worker_news")
        self.workers |= pairs
        return True

    def _add_sends(self) -> bool:
        """The poll's new sends kept and its new duplicated people found, reading of the sends kept before only the
        rows the index points to (forensics/watch/keys.py); whether it looked for new duplicated people."""
        import pyarrow as pa

        persons, sends, reported = self._candidate_keys()
        copies = self.send_rows.rows(sends).astype("int64")
        # of people reported already, no kept send is read: a person sent to over and over (a retry loop) would
        # otherwise cost a read of every send kept to them at each new one
        unreported = persons[~reported]
        people = self.person_rows.rows(unreported).astype("int64")
        self.con.register("watch_copy_rows", pa.table({"rid": copies}))
        self.con.register("watch_person_rows", pa.table({"rid": people}))
        # a new duplicate is a person not reported yet whom the index points to kept sends of, or who is named twice
        # in the poll: without either, watch_new_duplicates would find no one
        duplicates = bool(len(people)) or len(np.unique(unreported)) < len(unreported)
        try:
            queries.script(self.con, "watch_add_sends" if len(copies) else "watch_add_fresh_sends")
            if duplicates:
                queries.script(self.con, "watch_new_duplicates")
        finally:
            self.con.unregister("watch_copy_rows")
            self.con.unregister("watch_person_rows")
        if len(copies):
            added = queries.arrow(self.con, "watch_added_keys", {"first_row": self.kept})
            rows, persons, sends = (added.column(c).to_numpy() for c in ("rid", "person", "send"))
        else:  # every candidate was appended, in order: the rows from `kept` on (watch_sends is never deleted from)
            rows = np.arange(self.kept, self.kept + len(sends), dtype=np.int64)
        if len(rows):
            self.person_rows.add(persons, rows)
            self.send_rows.add(sends, rows)
            self.kept = int(rows.max()) + 1
        return duplicates

    def _candidate_keys(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The person and send hashes of the poll's candidate sends, in the order they are added, and whether each
        person was reported already. Two candidates sharing a send hash, or one whose person hash is of someone
        reported, is rare: the statements that compare them exactly are run only then (the same send or person has
        the same hash, so that without either they would change nothing)."""
        keys = queries.arrow(self.con, "watch_candidate_keys")
        sends, persons = keys.column("send").to_numpy(), keys.column("person").to_numpy()
        repeated = len(np.unique(sends)) < len(sends)
        if repeated:
            queries.run(self.con, "watch_first_of_each_send")
        reported = np.isin(persons, self.reported).any()
        if reported:
            queries.run(self.con, "watch_mark_reported")
        if repeated or reported:  # rows deleted or marked: read again
            keys = queries.arrow(self.con, "watch_candidate_keys")
        return tuple(keys.column(c).to_numpy() for c in ("person", "send", "reported"))

    def kind_changes(self, con=None) -> list[dict]:
        """Classify the whole state as diagnose would; the duplicated people whose kind is new or changed. `con`: a
        cursor of the state's own (kinds_in_background), whose TEMP tables are its own."""
        con = con or self.con
        if not self.created:
            return []
        self.as_case(con)
        from forensics import classify

        classify.classify(con)
        queries.script(con, "watch_kind_changes")
        return queries.rows(con, "watch_kind_rows")

    def kinds_in_background(self, done: Callable[[list[dict] | Exception, float], None]) -> threading.Thread:
        """kind_changes on a cursor of the state in a thread: classify reads everything read so far, and the polls
        go on meanwhile (it reads a snapshot; they only add rows). `done(changes, seconds)` is called from it, with
        the CPU time the thread took (the state's connection runs on one thread: the caller's), not the time it
        waited for a busy machine."""
        def classify_apart() -> None:
            began = time.thread_time()
            cursor = self.con.cursor()
            try:
                queries.macros(cursor)  # TEMP macros are the connection's own
                found = self.kind_changes(cursor)
            except Exception as exc:  # noqa: BLE001 - handed to the loop, which raises it
                found = exc
            finally:
                cursor.close()
            done(found, time.thread_time() - began)  # once the cursor is closed: the loop may then reopen the state

        thread = threading.Thread(target=classify_apart, daemon=True)
        thread.start()
        return thread

    def release(self) -> None:
        """Let go of the state's blocks DuckDB keeps cached once read (by classify, which reads the whole state):
        cached up to the memory limit, they would keep the watch's memory growing with the state until it is a
        limit's worth. Between polls, after a classification: nothing else reads the state meanwhile."""
        import duckdb

        try:
            queries.run(self.con, "watch_memory_limit", limit=RELEASED_MEMORY)
        except duckdb.Error:  # more is held than the lower limit: what could be let go of, was
            pass
        finally:
            queries.run(self.con, "watch_memory_limit", limit=(self.options.memory_limit or STATE_MEMORY).strip())

    def reopen(self) -> None:
        """The state's connection closed and opened again on its file (forensics.ingest.case.reopened): DuckDB's heap
        of a connection running a poll's statements grows for as long as it is open (docs/benchmarks.md, watch). The
        loader's scratch connection, whose heap grows as well, is made anew with it. Between polls, with no
        classification running (it reads through a cursor of this connection)."""
        self.con = _ready(cases.reopened(self.con))
        cases.discard(self.scratch)
        self.scratch = self._scratch()
        self._warm()

    def as_case(self, con=None) -> None:
        """events, skipped, files and sends over the state, as a loaded case has them."""
        queries.script(con or self.con, "watch_case_views")
        queries.script(con or self.con, "build_sends")
        queries.script(con or self.con, "send_ids")

    def inputs(self, lines: dict[str, int]) -> list[ingest.InputSummary]:
        """What was read of each followed file (`lines`: lines read of each), for the summary."""
        counts = {r["source"]: r for r in queries.rows(self.con, "watch_input_counts")} if self.created else {}
        summaries = []
        for label, read in lines.items():
            row = counts.get(label, {})
            syntax, envelope = self.shapes.get(label, (self.options.syntax or "unknown", None))
            summaries.append(ingest.InputSummary(label, syntax, read, row.get("records", 0), row.get("skipped", 0),
                                                 list(row.get("first_skipped") or []),
                                                 envelope=None if envelope == NO_ENVELOPE else envelope))
        return summaries

    def diagnosis(self, lines: dict[str, int], unread: list[dict], logs: list[str] = ()) -> dict | None:
        """The diagnose document of what the watch read (None when it read no record); its next commands read
        `logs`."""
        if not self.created:
            return None
        from forensics.findings import build_document

        self.as_case()
        case = cases.Case(self.con, self.inputs(lines), unread, self.options.reading)
        return build_document(case, include_affected=False, logs=logs) if case.records else None

    def close(self) -> None:
        """The state's connections closed and every folder of the watch's own removed (the database file with them)."""
        for con in (self.scratch, self.con):
            cases.discard(con)
        runfolders.remove(self.folder)


def _ready(con):
    """The state's connection as a poll uses it: one thread, and the project's macros."""
    queries.run(con, "watch_one_thread")
    queries.macros(con)
    return con


def _batches(chunks: list[Chunk], size: int):
    """The chunks in order, in batches of at most `size` bytes (a chunk larger than that cut at lines' ends; a line
    longer than `size` kept whole)."""
    batch, held = [], 0
    for chunk in chunks:
        for piece in _pieces(chunk, size):
            if batch and held + len(piece.data) > size:
                yield batch
                batch, held = [], 0
            batch.append(piece)
            held += len(piece.data)
    if batch:
        yield batch


def _pieces(chunk: Chunk, size: int):
    """The chunk cut after the last line end within each `size` bytes (the first line end after them, for a longer
    line), each piece numbered from the lines before it."""
    data, before, piece = chunk.data, chunk.lines_before, chunk
    # a file's first lines: the pieces after the first are read under its CSV header, as the follower's later chunks
    later = dataclasses.replace(chunk, prefix=csv_header(data)) if before == 0 and not chunk.prefix else chunk
    while len(data) > size:
        cut = (data.rfind(b"\n", 0, size) + 1) or (data.find(b"\n", size) + 1)
        if not cut or cut == len(data):
            break
        yield dataclasses.replace(piece, data=data[:cut], lines_before=before)
        before += data.count(b"\n", 0, cut)
        data, piece = data[cut:], later
    yield dataclasses.replace(piece, data=data, lines_before=before)
