"""A gzipped logfmt file is tokenized as it is decompressed (logfmt.stage_gzipped over
gzstream.gunzipped_chunks), and reads exactly as the plain file does; whatever it cannot read that way (a
damaged stream, a dirty file, mixed line endings) goes through a decompressed copy, which names a damaged one."""

from __future__ import annotations

import contextlib
import gzip
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from forensics.errors import InputError
from forensics.ingest import gzstream
from forensics.ingest.readers import logfmt
from forensics.ingest.case import load_case
from tests.test_tokenizer_properties import SETTINGS, log_file, needs_c, parser, read

LINE = "ts=2026-11-28T09:00:{s:02d}Z event=send worker=w{w} email=a{n}@b.c msg_id=m{m}\n"


def lines(count: int, ending: str = "\n") -> bytes:
    return "".join(LINE.format(s=n % 60, w=n % 3, n=n, m=n % 700).replace("\n", ending)
                   for n in range(count)).encode()


def members(body: bytes, cuts: list[int]) -> bytes:
    """`body` as one gzip member per piece between `cuts` (how `cat a.gz b.gz` and rotating loggers write)."""
    bounds = [0, *sorted(cuts), len(body)]
    return b"".join(gzip.compress(body[a:b]) for a, b in zip(bounds, bounds[1:]))


@contextlib.contextmanager
def chunks_of(size: int):
    before = gzstream.CHUNK_BYTES
    gzstream.CHUNK_BYTES = size
    try:
        yield
    finally:
        gzstream.CHUNK_BYTES = before


@contextlib.contextmanager
def streamed_reads():
    """What each stage_gzipped call gave (None: it left the file to the decompressed copy)."""
    seen, stage = [], logfmt.stage_gzipped

    def spy(*args, **kwargs):
        seen.append(stage(*args, **kwargs))
        return seen[-1]

    logfmt.stage_gzipped = spy
    try:
        yield seen
    finally:
        logfmt.stage_gzipped = stage


def plain_and_gzipped(body: bytes, blob: bytes, chunk_bytes: int) -> tuple[tuple, tuple, list]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "case.log").write_bytes(body)
        (Path(tmp) / "case.log.gz").write_bytes(blob)
        plain = read(Path(tmp) / "case.log", "c")
        with chunks_of(chunk_bytes), streamed_reads() as streamed:
            gzipped = read(Path(tmp) / "case.log.gz", "c")
    if plain[0] == "refused":  # refused alike, naming the file it was given
        gzipped = (gzipped[0], gzipped[1].replace("case.log.gz", "case.log"), *gzipped[2:])
    return plain, gzipped, streamed


@needs_c
@pytest.mark.slow
@SETTINGS
@given(log_file(), st.lists(st.integers(0, 10_000), max_size=3), st.sampled_from([1, 7, 64, 4096, 2**24]),
       st.booleans())
def test_a_gzip_reads_as_its_plain_file_whatever_its_lines_members_and_chunks(body, cuts, chunk_bytes, padded):
    blob = members(body, [cut for cut in cuts if cut < len(body)]) + (bytes(5) if padded else b"")
    plain, gzipped, streamed = plain_and_gzipped(body, blob, chunk_bytes)
    event("streamed" if streamed and streamed[0] else "through a plain copy" if streamed else "empty or refused")
    assert gzipped == plain


@pytest.mark.slow
@needs_c
@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("chunk_bytes", [1, 50, 4096])
def test_chunks_cut_inside_lines_and_crlf_pairs_keep_every_line_and_number(ending, chunk_bytes):
    body = lines(300, ending) + b"ts=2026-11-28T09:00:09Z event=send email=a@b"  # cut off mid-write
    plain, gzipped, streamed = plain_and_gzipped(body, members(body, [len(body) // 3]), chunk_bytes)
    assert gzipped == plain and len(plain[0]) == 300 and plain[1][0][:2] == (301, "truncated last line "
                                                                                 "(no newline at end of file)")
    assert streamed and streamed[0] is not None  # read as it was decompressed, no plain copy


@pytest.mark.parametrize("size", [1, 2, 3, 10, 4096])
def test_line_chunks_end_at_line_ends_and_never_split_a_crlf(size):
    body = b"a=1\r\nbb=2\r\n\r\nc=3\rd=4\ne=5"
    for at in range(len(body) + 1):  # the decompressed pieces may end anywhere
        chunks = [data[:end] for data, end in gzstream._line_chunks(iter([body[:at], body[at:]]), size)]
        assert b"".join(chunks) == body
        for chunk, following in zip(chunks, chunks[1:]):
            assert chunk.endswith((b"\n", b"\r")) and not (chunk.endswith(b"\r") and following.startswith(b"\n"))


@pytest.mark.slow
@needs_c
def test_a_multi_member_gzip_with_an_empty_member_and_padding_is_streamed_whole(tmp_path):
    body = lines(5000)
    blob = gzip.compress(b"") + members(body, [100, 2500, len(body) - 1]) + bytes(10)
    plain, gzipped, streamed = plain_and_gzipped(body, blob, 4096)
    assert gzipped == plain and len(plain[0]) == 5000 and streamed[0] is not None


@pytest.mark.slow
@needs_c
def test_an_empty_gzip_reads_as_an_empty_file():
    plain, gzipped, streamed = plain_and_gzipped(b"", gzip.compress(b""), 64)
    assert gzipped == plain and plain[0] == "refused" and not streamed


@pytest.mark.slow
@needs_c
@pytest.mark.parametrize("damage", ["corrupt", "truncated", "trailing junk"])
def test_a_gzip_damaged_after_chunks_were_parsed_is_refused_by_name(tmp_path, damage):
    blob = gzip.compress(lines(30_000))
    at = len(blob) * 4 // 5  # well past the first chunks, and the key sample
    blob = {"corrupt": blob[:at] + bytes(32) + blob[at + 32:], "truncated": blob[:at],
            "trailing junk": blob + b"junk"}[damage]
    (tmp_path / "w1.log.gz").write_bytes(blob)
    reason = {"corrupt": "CRC check failed", "truncated": "Compressed file ended before the end-of-stream",
              "trailing junk": "Compressed file ended before the end-of-stream"}[damage]
    with parser("c"), chunks_of(4096), streamed_reads() as streamed, \
            pytest.raises(InputError, match=rf"w1\.log\.gz: unreadable gzip file \({reason}"):
        load_case([str(tmp_path / "w1.log.gz")])
    assert streamed == [None]  # the stream gave up; the decompressed copy named the damage
    assert not [t for t in threading.enumerate() if t.name == "mailmortem-gunzip"]


def test_the_decompressing_thread_stops_when_its_reader_does(tmp_path):
    (tmp_path / "a.log.gz").write_bytes(gzip.compress(lines(20_000)))
    with chunks_of(1024):
        chunks = gzstream.gunzipped_chunks(str(tmp_path / "a.log.gz"))
        next(chunks)
        chunks.close()
    assert not [t for t in threading.enumerate() if t.name == "mailmortem-gunzip"]


@pytest.mark.slow
@needs_c
def test_a_dirty_gzip_is_repaired_from_a_copy_as_the_plain_file_is(tmp_path):
    body = lines(25_000) + b"ts=2026-11-28T09:00:00Z event=send email=\xff\xfe@b.c msg_id=bad\n" + lines(10)
    plain, gzipped, streamed = plain_and_gzipped(body, gzip.compress(body), 4096)
    assert gzipped == plain and plain[2][0][4].startswith("utf-8 (repaired") and streamed == [None]


@needs_c
def test_no_sample_or_plain_copy_is_left(tmp_path, monkeypatch):
    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    (tmp_path / "a.log.gz").write_bytes(gzip.compress(lines(100)))
    with parser("c"), streamed_reads() as streamed:
        case = load_case([str(tmp_path / "a.log.gz")])
    folder = case.con.execute("SELECT current_setting('temp_directory')").fetchone()[0]
    assert streamed[0] is not None and case.inputs[0].records == 100
    assert not [p for root in (spill, Path(folder)) for p in root.rglob("mailmortem-*") if p.is_file()]
