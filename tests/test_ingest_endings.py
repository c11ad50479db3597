"""Files as people save them: a byte-order mark, no newline at the end, CR or CRLF line ends — every complete
record is read; only a last line that is not a whole record counts as truncated."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from forensics.findings import build_document
from forensics.ingest.case import load_case
from tests.test_tokenizer_properties import needs_c

SENDS = [("2026-11-28T09:10:00Z", "w1", "m1"), ("2026-11-28T09:11:00Z", "w2", "m2")]


def _lines(syntax: str) -> list[str]:
    if syntax == "logfmt":
        return [f"ts={ts} evt=sent worker={w} campaign=c step=1 recipient=a@x.co msg_id={m}" for ts, w, m in SENDS]
    if syntax == "jsonl":
        return [json.dumps({"ts": ts, "event": "sent", "worker": w, "campaign": "c", "step": "1",
                            "recipient": "a@x.co", "msg_id": m}) for ts, w, m in SENDS]
    return ["ts,event,worker,campaign,step,recipient,msg_id"] + [f"{ts},sent,{w},c,1,a@x.co,{m}" for ts, w, m in SENDS]


EXT = {"logfmt": "log", "jsonl": "jsonl", "csv": "csv"}
VARIANTS = {
    "bom": lambda lines: "\ufeff" + "\n".join(lines) + "\n",
    "no-final-newline": lambda lines: "\n".join(lines),
    "bom-and-no-final-newline": lambda lines: "\ufeff" + "\r\n".join(lines),
    "crlf": lambda lines: "\r\n".join(lines) + "\r\n",
    "lone-cr": lambda lines: "\r".join(lines) + "\r",
    "lone-cr-no-final": lambda lines: "\r".join(lines),
}


@pytest.mark.slow
@pytest.mark.parametrize("gz", [False, pytest.param(True, marks=pytest.mark.slow)])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("syntax", sorted(EXT))
def test_every_complete_record_is_read(tmp_path, syntax, variant, gz):
    data = VARIANTS[variant](_lines(syntax)).encode("utf-8")
    path = tmp_path / f"mail-send.{EXT[syntax]}{'.gz' if gz else ''}"
    path.write_bytes(gzip.compress(data) if gz else data)
    document = build_document(load_case([str(path)]))
    assert document["summary"]["duplicated_people"] == 1, document["inputs"]
    assert document["inputs"][0]["skipped"] == 0 and document["complete"] is True


@pytest.mark.slow
@pytest.mark.parametrize("syntax,cut", [("logfmt", 'ts=2026-11-28T09:12:00Z evt=sent worker=w3 campaign=c step=1 rec'),
                                        ("jsonl", '{"ts": "2026-11-28T09:12:00Z", "event": "sent", "recip'),
                                        ("csv", "2026-11-28T09:12:00Z,sent,w3,c")])
def test_a_last_line_cut_mid_record_is_truncated_and_lost(tmp_path, syntax, cut):
    path = tmp_path / f"mail-send.{EXT[syntax]}"
    path.write_text("\n".join(_lines(syntax) + [cut]), encoding="utf-8")
    case = load_case([str(path)])
    reasons = [r[0] for r in case.con.execute("SELECT reason FROM skipped").fetchall()]
    assert reasons == ["truncated last line (no newline at end of file)"]
    assert build_document(case)["complete"] is False


MIXED = {  # each line end, whatever its kind, ends one line
    "crlf-then-bare-cr": ["\r\n", "\r", "\r\n"],  # DuckDB's reader dropped the first byte after the CR
    "lf-then-crlf": ["\n", "\r\n", "\n"],  # it read the CRLF as two line ends: every later line number one off
    "crlf-bare-cr-before-non-ascii": ["\r\n", "\r", "\r\n"],  # it refused the file ("cannot read")
    "bare-cr-then-crlf-then-lf": ["\r", "\r\n", "\n"],
}


@pytest.mark.slow
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("parser", ["c", "sql"])
@pytest.mark.parametrize("variant", sorted(MIXED))
@pytest.mark.parametrize("syntax", ["logfmt", "jsonl"])
def test_a_file_of_mixed_line_ends_reads_every_record_at_its_line(tmp_path, monkeypatch, syntax, variant, parser, gz):
    monkeypatch.setenv("MAILMORTEM_PARSER", parser)
    lines = _lines(syntax) + [_lines(syntax)[0].replace("m1", "m3").replace("09:10", "09:12"), "not a record"]
    if variant.endswith("non-ascii"):
        lines[2] = lines[2].replace("a@x.co", "é@x.co")
        lines[2] = "é=1 " + lines[2] if syntax == "logfmt" else lines[2]
    data = "".join(line + end for line, end in zip(lines, MIXED[variant] + [MIXED[variant][0]])).encode()
    path = tmp_path / f"mail-send.{EXT[syntax]}{'.gz' if gz else ''}"
    path.write_bytes(gzip.compress(data) if gz else data)
    case = load_case([str(path)])
    assert case.con.execute("SELECT line_no, msg_id FROM events ORDER BY line_no").fetchall() == [
        (1, "m1"), (2, "m2"), (3, "m3")]
    assert [row[0] for row in case.con.execute("SELECT line_no FROM skipped").fetchall()] == [4]
    [(spill,)] = case.con.execute("SELECT current_setting('temp_directory')").fetchall()
    assert not list(Path(spill).glob("mailmortem-*")), "the copy is not kept once read"


@pytest.mark.slow
def test_many_files_of_mixed_line_ends_read_like_one(tmp_path):
    # more than MANY_FILES files go to DuckDB's reader in one statement: one whose line ends mix is read alone
    logs = []
    for n in range(20):
        line = f"ts=2026-11-28T09:{n:02d}:00Z evt=sent worker=w{n} campaign=c step=1 recipient=p{n}@x.co msg_id=m{n}"
        (tmp_path / f"{n:02d}.log").write_bytes((f"{line}\r\n{line.replace(f'm{n}', f'n{n}')}\r" + line.replace(
            f"m{n}", f"o{n}") + "\r\n").encode())
        logs.append(str(tmp_path / f"{n:02d}.log"))
    case = load_case(logs)
    assert case.con.execute("SELECT count(*), count(DISTINCT msg_id) FROM events").fetchone() == (60, 60)


_MAXRSS_GROWTH = """
import resource, sys
from forensics.ingest import repair
from forensics.ingest.readers import logfmt, runtime
if sys.argv[2] == "guarded":
    runtime.guard_shrinking_files()  # as the CLI does: the file is then mapped, not read
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
mixed = repair.mixes_line_endings(sys.argv[1])
print(mixed, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024, runtime.shrink_guarded())
"""


@pytest.mark.slow
@pytest.mark.parametrize("sigbus", [pytest.param("guarded", marks=needs_c), "default"])
def test_looking_at_a_large_file_s_line_ends_holds_only_a_range_of_it_in_memory(tmp_path, sigbus):
    # Every plain file is looked at: a 3.5 GB log mapped whole had put diagnose's peak RSS at 3.5 GB.
    import subprocess
    import sys

    log = tmp_path / "big.log"
    line = b"ts=2026-11-28T09:10:00Z evt=sent worker=w1 campaign=c step=1 recipient=a@x.co msg_id=m1\n"
    with open(log, "wb") as handle:
        for _ in range(32):
            handle.write(line * (8 * 2**20 // len(line)))  # 256 MB of LF lines
    result = subprocess.run([sys.executable, "-c", _MAXRSS_GROWTH, str(log), sigbus], capture_output=True,
                            text=True, check=True)
    mixed, grown_mb, mapped = result.stdout.split()
    assert mixed == "False"
    assert int(grown_mb) < 160  # the file is 256 MB; a range is 64 MB
    # under the CLI's handler the file is mapped, not copied into memory range by range (Python's getsignal had said
    # no handler, so every file had been read)
    assert mapped == str(sigbus == "guarded")


_SHRINKS_BETWEEN_CHUNKS = """
import os, sys
from forensics.ingest import repair
repair._ENDINGS_CHUNK = 4096
chunks = repair._ending_chunks(sys.argv[1])
first = next(chunks)
os.truncate(sys.argv[1], 0)  # logrotate's copytruncate, while the line ends are looked at
print(first[2] - first[1], len(list(chunks)))
"""


def test_without_a_sigbus_handler_a_log_shrinking_while_its_line_ends_are_looked_at_ends_the_look_early(tmp_path):
    # Without the compiled tokenizer nothing handles SIGBUS: a mapped file that shrinks killed the process with a
    # bare "Bus error". Read instead of mapped, the look ends early and the run says the file shrank (sources.inspect).
    import subprocess
    import sys

    log = tmp_path / "mail.log"
    log.write_bytes(b"ts=2026-11-28T09:10:00Z evt=sent worker=w1 msg_id=m1\r\n" * 2000)
    result = subprocess.run([sys.executable, "-c", _SHRINKS_BETWEEN_CHUNKS, str(log)], capture_output=True, text=True)
    assert (result.returncode, result.stdout, result.stderr) == (0, "4096 0\n", "")
