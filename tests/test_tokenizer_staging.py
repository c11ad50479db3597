"""What the compiled tokenizer hands DuckDB to stage a logfmt file: a line's text only where it may be kept, and
the keys of the file's first lines sampled from a copy of its head (not by reading the whole file)."""

from __future__ import annotations

import duckdb
import pytest

import queries
from forensics.ingest.readers import logfmt, runtime, sql
from forensics.ingest.case import load_case
from forensics.ingest.fields import FieldMap
from forensics.ingest.sources import Source

needs_c = pytest.mark.skipif(logfmt._logfmt is None, reason="the compiled tokenizer was not built")

LINES = [b"ts=2026-11-28T09:00:00Z event=send to=a@x.co msg_id=m1",  # a record: no text needed
         b"",  # blank
         b"no pairs here",
         b"ts=yesterday event=send to=b@x.co msg_id=m2",  # a time left to SQL, which may not read it
         b"ts=2026-11-28T09:00:01Z worker=w1",  # no event and no msg_id
         b"ts=2026-11-28T09:00:02Z event=\xe3\x80\x80 msg_id=m3",  # an event trim() empties, but a msg_id
         b"ts=2026-11-28T09:00:03Z event=\xe3\x80\x80"]  # neither


def _line_texts(body: bytes, keep_lines: bool) -> list[str | None]:
    keys = sql.tokenizer_keys({"ts", "event", "to", "msg_id", "worker"}, FieldMap())
    batches = [runtime.batch(rows, problem, cols, ts)
               for rows, _flags, problem, cols, ts in logfmt._logfmt.tokenize(body, 0, len(body), keys, 1,
                                                                                  keep_lines)]
    return [text for batch in batches for text in batch.column("line").to_pylist()]


@needs_c
def test_a_line_s_text_comes_only_where_the_line_may_be_skipped():
    body = b"\n".join(LINES) + b"\n"
    assert _line_texts(body, keep_lines=False) == [None, None, "no pairs here", LINES[3].decode(), LINES[4].decode(),
                                                   None, LINES[6].decode()]
    assert _line_texts(body, keep_lines=True) == [line.decode() or None for line in LINES]


@pytest.mark.slow
@needs_c
def test_a_saved_case_keeps_every_record_s_text_as_the_sql_path_does(tmp_path, monkeypatch):
    path = tmp_path / "mail.log"
    path.write_bytes(b"\n".join(LINES) + b"\n")
    raws = []
    for parser in ("sql", "c"):
        monkeypatch.setenv(runtime.ENV, parser)
        case = load_case([str(path)], database=str(tmp_path / f"{parser}.duckdb"))
        raws.append(case.con.execute("SELECT line_no, raw FROM events ORDER BY line_no").fetchall())
        case.con.close()
    assert raws[0] == raws[1] and [raw for _, raw in raws[1]] == [LINES[0].decode(), LINES[5].decode()]


@needs_c
def test_the_head_sample_holds_the_keys_of_the_first_lines_as_the_whole_file_s_does(tmp_path, monkeypatch):
    monkeypatch.setattr(sql, "SAMPLE_CHUNK", 4096)  # the head is read in many pieces
    first = [f"ts=2026-11-28T09:00:00Z event=send email=p{n}@x.co msg_id=m{n}" for n in range(sql.SAMPLE_LINES)]
    path = tmp_path / "mail.log"
    path.write_text("\r\n".join(first + ["ts=2026-11-28T09:00:01Z event=send to=late@x.co message_id=late"]) + "\r\n")
    con = duckdb.connect()
    queries.script(con, "ingest_macros")
    source = Source(str(path), "mail.log", False)
    from_head = sql.sampled_head(str(path), lambda sample: sql.sampled_keys(con, Source(sample, "x", False), b""),
                                 str(tmp_path))
    assert from_head == sql.sampled_keys(con, source, b"") == {"ts", "event", "email", "msg_id"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mail.log"]  # the copy of the head is gone


@needs_c
def test_a_head_too_large_to_copy_is_not_sampled_from_a_copy(tmp_path, monkeypatch):
    monkeypatch.setattr(sql, "SAMPLE_MOST", 1000)
    path = tmp_path / "mail.log"
    path.write_text("ts=2026-11-28T09:00:00Z event=send to=a@x.co msg_id=m1\n" * 100)
    assert sql.sampled_head(str(path), lambda sample: pytest.fail("sampled"), str(tmp_path)) is None


_SHRINKS_UNDER_THE_MAP = """
import mmap, os, sys
from forensics.ingest.readers import runtime
runtime.guard_shrinking_files()
with open(sys.argv[1], "r+b") as handle:
    mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    os.truncate(sys.argv[1], 0)  # logrotate's copytruncate, while the file is read
    print(mapped[mmap.PAGESIZE * 2])
"""


@needs_c
def test_a_log_that_shrinks_while_it_is_read_ends_the_run_with_one_line_not_a_bus_error(tmp_path):
    import subprocess
    import sys

    log = tmp_path / "mail.log"
    log.write_bytes(b"ts=2026-11-28T09:10:00Z evt=sent worker=w1 msg_id=m1\n" * 2000)
    result = subprocess.run([sys.executable, "-c", _SHRINKS_UNDER_THE_MAP, str(log)], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr == ("Error: an input file shrank while it was being read (rotated or truncated?); "
                             "copy the logs and run again on the copy\n")
    assert result.stdout == ""
