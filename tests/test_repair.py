"""The repaired copy (forensics.ingest.repair): invalid bytes U+FFFD, each line too long to read cut and noted by
its number as the readers number lines (LF, CRLF or a lone CR ends one), whatever the chunks the file is read in;
and the look that tells a file holding such a line, read a few bytes per window."""

from __future__ import annotations

import contextlib
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.ingest import repair
from forensics.ingest.readers import jsonl, logfmt
from forensics.ingest.sources import Source

_logfmt, _jsonl = logfmt._logfmt, jsonl._jsonl
PIECES = st.sampled_from([b"a", b"k=v ", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\xc3", b"\xff",
                          b"\xed\xa0\x80", b"\n", b"\r", b"\r\n", b"\xef\xbb\xbf", b"x" * 7, b"y" * 19])
FILES = st.lists(PIECES, max_size=60).map(b"".join)


@contextlib.contextmanager
def sizes(**values: int):
    """repair's sizes made small."""
    saved = {name: getattr(repair, name) for name in values}
    for name, value in values.items():
        setattr(repair, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(repair, name, value)


def lines_of(data: bytes) -> list[tuple[bytes, bytes]]:
    """(line, its end) of every line, ended as the readers end them."""
    parts = re.split(rb"(\r\n|\r|\n)", data)
    return [(parts[i], parts[i + 1] if i + 1 < len(parts) else b"") for i in range(0, len(parts), 2)]


def expected_copy(data: bytes, longest: int, kept: int) -> tuple[bytes, list[repair.LongLine]]:
    """What the copy should be, line by line over the whole text."""
    out, long_lines = [], []
    for number, (line, end) in enumerate(lines_of(data.decode("utf-8", "replace").encode()), start=1):
        if len(line) > longest:
            text = line[:kept].decode("utf-8", "ignore")
            long_lines.append(repair.LongLine(number, text))
            line = text.encode()
        out.append(line + end)
    return b"".join(out), long_lines


def copied(data: bytes, cut: bool = True) -> tuple[bytes, list[repair.LongLine]]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "a.log"
        path.write_bytes(data)
        copy, long_lines = repair.repaired_copy(Source(str(path), "a.log", False), folder, cut)
        return Path(copy.path).read_bytes(), long_lines


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(FILES, st.integers(20, 60), st.integers(1, 12), st.integers(1, 30))
def test_the_copy_cuts_every_line_too_long_and_keeps_every_other_byte_and_number(data, longest, kept, chunk):
    with sizes(MAX_LINE_BYTES=longest, KEPT_BYTES=kept, _CHUNK=chunk):
        assert copied(data) == expected_copy(data, longest, kept)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(FILES, st.integers(1, 5))
def test_a_copy_not_cut_only_repairs_the_bytes(data, chunk):
    with sizes(MAX_LINE_BYTES=20, KEPT_BYTES=4, _CHUNK=chunk):
        assert copied(data, cut=False) == (data.decode("utf-8", "replace").encode(), [])


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(FILES, st.integers(2, 40), st.integers(1, 9))
def test_a_file_is_said_to_hold_a_long_line_when_one_of_its_lines_is_longer_than_the_limit(data, longest, piece):
    with tempfile.TemporaryDirectory() as folder, sizes(MAX_LINE_BYTES=longest, _PIECE=piece):
        path = Path(folder) / "a.log"
        path.write_bytes(data)
        assert repair.has_long_line(str(path)) == any(len(line) > longest for line, _ in lines_of(data))


@pytest.mark.skipif(_logfmt is None or _jsonl is None, reason="the compiled readers were not built")
def test_the_compiled_readers_take_lines_up_to_the_same_limit():
    # a gzipped logfmt file is read by the compiled tokenizer as it is decompressed, never looked at by
    # has_long_line: a longer limit there would read as a record a line the other paths skip as too long
    assert _logfmt.MAX_LINE == _jsonl.MAX_LINE == repair.MAX_LINE_BYTES


@pytest.mark.slow
def test_a_line_of_the_limit_is_read_and_one_byte_more_is_cut(tmp_path):
    path = tmp_path / "a.log"
    for ending in (b"\n", b"\r\n", b"\r"):
        path.write_bytes(b"k=v" + ending + b"x" * repair.MAX_LINE_BYTES + ending + b"k=v" + ending)
        assert not repair.has_long_line(str(path))
        path.write_bytes(b"k=v" + ending + b"x" * (repair.MAX_LINE_BYTES + 1) + ending + b"k=v" + ending)
        assert repair.has_long_line(str(path))
        assert copied(path.read_bytes()) == (b"k=v" + ending + b"x" * repair.KEPT_BYTES + ending + b"k=v" + ending,
                                             [repair.LongLine(2, "x" * repair.KEPT_BYTES)])


def test_a_copy_made_to_stage_a_file_is_removed_however_the_staging_ends(tmp_path):
    """A copy of someone's log (here: LF endings for a file whose endings mix, then its repaired copy) is gone once
    the file is staged, and also when staging is interrupted (Ctrl-C) or fails: only the original remains."""
    import duckdb

    logs, copies = tmp_path / "logs", tmp_path / "copies"
    logs.mkdir()
    copies.mkdir()
    path = logs / "mixed.log"
    path.write_bytes(b"ts=1 event=send\r\nts=2 event=send\n")
    source = Source(str(path), "mixed.log", False)
    con = duckdb.connect()
    con.execute("CREATE TABLE staged (line_no BIGINT)")
    for ending in (None, KeyboardInterrupt, ValueError):
        with contextlib.suppress(KeyboardInterrupt, ValueError):
            with repair.staging(con, source, "staged", lambda: str(copies), document=False,
                                enveloped=False) as stage:
                assert stage.found.source.path != str(path) and Path(stage.found.source.path).exists()
                stage.repair()
                assert stage.found.repaired and len(list(copies.iterdir())) == 1
                if ending is not None:
                    raise ending
        assert list(copies.iterdir()) == [], ending
    assert path.exists()
