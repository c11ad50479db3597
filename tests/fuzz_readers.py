"""Fuzz the compiled readers against the SQL path: seeded, bounded, every syntax and every envelope.

    .venv/bin/python -m tests.fuzz_readers --seed 7 --cases 200 [--out DIR] [--max-seconds S]
    .venv/bin/python -m tests.fuzz_readers --replay DIR/seed-7-case-31

Run from the checkout's root. Case k of a seed is a file of logfmt or JSON Lines records (lines of
sample_logs/ and hostile ones), bare or wrapped in one of the envelopes forensics.simulate.envelopes writes
(each of NAMES, one entry per line, and each of DOCUMENTS as its export's JSON document), mutated before and
after wrapping: bytes flipped, lines cut short, quotes, braces, escapes, NUL, CR, invalid UTF-8 and over-long
tokens put in, spans deleted or doubled, pieces of other lines spliced in. The cases take the (syntax, envelope,
document) triples in turn, so any run of as many cases as there are triples reads each once; the rest of a case
is drawn from its own generator (seed and k), so a case is the same whatever else the run does.

Each case is read on the SQL path (MAILMORTEM_PARSER=sql) and on the compiled path (the C readers, in ranges of
a drawn size), and where the C unwrapper takes the envelope, once more with DuckDB taking it off: the events,
skips, file summaries and staged rows must be equal (tests/test_tokenizer_properties.py's `read`). A
difference or an exception is a finding: the case's file and a meta.json (seed, case, what differed) are kept
in --out as seed-S-case-K/, and the run exits 1. Each case is written to --out/pending/ before it is read, so
that when the process dies (a sanitizer report aborts it) the file that killed it is there. Prints one line of
figures: cases, seconds, findings.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from forensics.ingest.readers import logfmt, runtime, unwrap
from forensics.simulate.envelopes import DOCUMENTS, JSON_ONLY, LOGFMT_ONLY, NAMES, wrap
from tests.test_envelopes import file_name
from tests.test_tokenizer_properties import read

ROOT = Path(__file__).resolve().parent.parent
SYNTAXES = {"logfmt": ("*.log", "*.log.gz"), "jsonl": ("*.jsonl", "*.jsonl.gz")}
# lines no sample holds: records at the edges of what each reader takes itself
HOSTILE = {
    "logfmt": ['ts=2026-11-28T09:00:00Z event=send email="a b@c.co" msg_id=<m1@x> error="retry lead=x to=y"',
               'event=send email=\u00a0<Ann@X.CO>\u3000 msg_id=" <m2@x> " k="unterminated',
               'evt=sent to=a@b.co message-id=<m3@x> step=1 x="\\"" y=\\\\ \u2028=z é=\u0301',
               "2026-02-30T09:00:00Z event=send email=a@b.co", "\ufeffts=1764320400 event=sent to=A@B.CO"],
    "jsonl": ['{"ts":"2026-11-28T09:00:00Z","evt":"send","email":"a@b.co","msg_id":"<m1@x>","n":-0}',
              '{"timestamp":"2026-11-28 09:00:00.5+05:30","event":"sent","to":"\\u00e9@x.co","meta":{"a":[1,2.50,1e5]}}',
              '{"evt":"send","email":"P@X.Co","evt":"dup","error":"\\ud83d\\ude00 \\u0000"}',
              '{"a":' * 70 + "1" + "}" * 70, '{"ts": 1764320400123, "recipient": "\\u2028a@b.co", "x": null}'],
}
TOKENS = [b'"', b"\\", b"{", b"}", b"[", b"]", b":", b",", b"=", b" ", b"\t", b"\x00", b"\r", b"\r\n", b"\n",
          b"\\u", b"\\ud800", b"\\udc00", b"\\u0000", b'\\"', b"\xc3", b"\xff", b"\xe2\x80\xa8", b"\xef\xbb\xbf",
          b"\xc2\xa0", b"<", b">", b"@", b"-0", b"1e999", b"NaN", b"ts=", b'"ts":', b"2026-11-28T09:00:00Z"]
LONG = [b"x" * 300, b"x" * 4100, b"x" * 16_400, b"x" * 70_000, b"9" * 400, b"visibility_timeouts" * 30,
        b"{" * 80, b"[" * 80, b"\\n" * 3000, b'"' + b"a" * 20_000]
RANGES = [64, 300, 4096, runtime.RANGE_BYTES]


@dataclass
class Case:
    seed: int
    index: int
    syntax: str
    envelope: str | None  # None: the bare records
    document: bool
    gz: bool = False
    range_bytes: int = runtime.RANGE_BYTES
    mutations: list[str] = field(default_factory=list)
    body: bytes = b""

    def name(self) -> str:
        base = file_name(self.envelope) if self.envelope else f"case.{'log' if self.syntax == 'logfmt' else 'jsonl'}"
        return base + (".gz" if self.gz else "")


def triples() -> list[tuple[str, str | None, bool]]:
    """Every (syntax, envelope, document) a file can be: bare, each envelope that can hold the syntax, and each
    JSON document form."""
    out = []
    for syntax in SYNTAXES:
        shut_out = JSON_ONLY if syntax == "logfmt" else LOGFMT_ONLY
        names = [name for name in NAMES if name not in shut_out]
        out += [(syntax, None, False)] + [(syntax, n, False) for n in names] + [(syntax, n, True) for n in DOCUMENTS]
    return out


def corpus() -> dict[str, list[bytes]]:
    """Each syntax's lines: the sample logs' own and the hostile ones."""
    lines = {}
    for syntax, patterns in SYNTAXES.items():
        found = [line for pattern in patterns for path in sorted((ROOT / "sample_logs").rglob(pattern))
                 for line in _lines_of(path)]
        lines[syntax] = found + [line.encode() for line in HOSTILE[syntax]]
    return lines


def _lines_of(path: Path) -> list[bytes]:
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return data.splitlines()


# ---- mutations: each takes (rng, bytes, donor lines) and names itself ----

def _flip(rng, data, _donors):
    at = rng.randrange(len(data))
    return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:], f"flip@{at}"


def _cut(rng, data, _donors):
    at = rng.randrange(len(data) + 1)
    return data[:at], f"cut@{at}"


def _insert(rng, data, _donors):
    token, times = rng.choice(LONG) if rng.random() < 0.15 else rng.choice(TOKENS), rng.choice([1, 1, 2, 3])
    at = rng.randrange(len(data) + 1)
    return data[:at] + token * times + data[at:], f"insert {token[:12]!r} ({len(token)} bytes) x{times}@{at}"


def _delete(rng, data, _donors):
    at = rng.randrange(len(data))
    end = min(len(data), at + rng.choice([1, 2, 5, 20, 200]))
    return data[:at] + data[end:], f"delete@{at}:{end}"


def _double(rng, data, _donors):
    at = rng.randrange(len(data))
    end = min(len(data), at + rng.choice([1, 4, 30, 300]))
    return data[:end] + data[at:end] + data[end:], f"double@{at}:{end}"


def _splice(rng, data, donors):
    donor = rng.choice(donors)
    start = rng.randrange(len(donor) + 1)
    piece = donor[start:start + rng.choice([3, 20, 100, 10_000])]
    at = rng.randrange(len(data) + 1)
    return data[:at] + piece + data[at:], f"splice{len(piece)}@{at}"


MUTATIONS = [_flip, _flip, _cut, _insert, _insert, _insert, _delete, _double, _splice]


def mutate(rng: random.Random, data: bytes, donors: list[bytes], times: int, log: list[str]) -> bytes:
    for _ in range(times):
        if data:
            data, said = rng.choice(MUTATIONS)(rng, data, donors)
        else:
            data, said = _insert(rng, data, donors)
        log.append(said)
    return data


def make_case(seed: int, index: int, lines: dict[str, list[bytes]]) -> Case:
    syntax, envelope, document = triples()[index % len(triples())]
    rng = random.Random(f"{seed}:{index}")
    case = Case(seed, index, syntax, envelope, document, gz=rng.random() < 0.1, range_bytes=rng.choice(RANGES))
    donors = lines["jsonl"] + lines["logfmt"]
    records = [mutate(rng, rng.choice(lines[syntax]), donors, rng.choice([0, 0, 1, 1, 2, 4]), case.mutations)
               for _ in range(rng.randint(1, 30))]
    body = _wrapped(rng, case, records)
    body = mutate(rng, body, donors, rng.choice([0, 0, 1, 2, 3]), case.mutations)
    case.body = gzip.compress(body, mtime=0) if case.gz else body
    return case


def _wrapped(rng: random.Random, case: Case, records: list[bytes]) -> bytes:
    """The records as the platform writes them (a last one perhaps never finished), or bare with line endings of
    one kind or mixed."""
    if case.envelope is None:
        endings = rng.choice([[b"\n"], [b"\r\n"], [b"\r"], [b"\n", b"\r\n", b"\r"]])
        body = b"".join(record + rng.choice(endings) for record in records)
        return body.rstrip(b"\r\n") if rng.random() < 0.3 else body
    texts = [record.decode("utf-8", "replace") for record in records]
    last = texts.pop() if len(texts) > 1 and not case.document and rng.random() < 0.2 else ""
    return wrap(case.envelope, texts, last=last, document=case.document).encode("utf-8", "replace")


# ---- reading both ways ----

def readings(path: Path, case: Case) -> dict[str, object]:
    """The file read each way this case has: SQL, compiled, and compiled after DuckDB's unwrapping."""
    ways = {"sql": lambda: read(path, "sql"), "compiled": lambda: read(path, "c", case.range_bytes)}
    if case.envelope in unwrap.KINDS and unwrap._unwrap is not None:
        ways["compiled after DuckDB's unwrapping"] = lambda: _without_c_unwrapper(path, case.range_bytes)
    return {way: _outcome(reading) for way, reading in ways.items()}


def _without_c_unwrapper(path: Path, range_bytes: int):
    kept, runtime.BUILT["unwrap"] = runtime.BUILT["unwrap"], None
    try:
        return read(path, "c", range_bytes)
    finally:
        runtime.BUILT["unwrap"] = kept


def _outcome(reading):
    try:
        return reading()
    except Exception as exc:  # anything but a refusal (which `read` returns) is a finding
        return ("exception", f"{type(exc).__name__}: {exc}")


PARTS = ["events", "skips", "file summaries", "staged rows"]


def differences(results: dict[str, object]) -> list[str]:
    """What each reading says otherwise than the SQL path (or that it raised)."""
    said = [f"{way} raised {result[1]}" for way, result in results.items()
            if isinstance(result, tuple) and result and result[0] == "exception"]
    sql = results["sql"]
    for way, result in results.items():
        if way != "sql" and not said and result != sql:
            parts = [p for at, p in enumerate(PARTS) if len(result) == len(sql) == 4 and result[at] != sql[at]]
            said.append(f"{way} differs from sql: {', '.join(parts) or 'outcome'}")
    return said


# ---- a run ----

def run_case(case: Case, out: Path) -> list[str]:
    """Read one case (written to out/pending first); a finding's case is kept as out/seed-S-case-K."""
    pending = out / "pending"
    shutil.rmtree(pending, ignore_errors=True)
    pending.mkdir(parents=True)
    path = pending / case.name()
    path.write_bytes(case.body)
    (pending / "meta.json").write_text(json.dumps(_meta(case), indent=1), encoding="utf-8")
    found = differences(readings(path, case))
    if found:
        kept = out / f"seed-{case.seed}-case-{case.index}"
        shutil.rmtree(kept, ignore_errors=True)
        pending.rename(kept)
        (kept / "meta.json").write_text(json.dumps({**_meta(case), "findings": found}, indent=1), encoding="utf-8")
    else:
        shutil.rmtree(pending)
    return found


def _meta(case: Case) -> dict:
    meta = {k: v for k, v in asdict(case).items() if k != "body"}
    return {**meta, "file": case.name(), "replay": "python -m tests.fuzz_readers --replay <this directory>"}


def fuzz(seed: int, cases: int, out: Path, max_seconds: float | None = None) -> dict:
    """Run cases 0..cases-1 of the seed (fewer when max_seconds runs out); the figures of the run."""
    lines, start, findings, ran = corpus(), time.monotonic(), {}, 0
    for index in range(cases):
        if max_seconds is not None and time.monotonic() - start > max_seconds:
            break
        case = make_case(seed, index, lines)
        found = run_case(case, out)
        if found:
            findings[f"seed-{seed}-case-{index}"] = found
        ran += 1
    kinds = {triple for triple in triples()[:ran]}
    return {"seed": seed, "cases": ran, "triples": f"{len(kinds)} of {len(triples())}",
            "seconds": round(time.monotonic() - start, 1), "findings": findings}


def replay(directory: Path) -> list[str]:
    meta = json.loads((directory / "meta.json").read_text(encoding="utf-8"))
    case = Case(**{k: meta[k] for k in ("seed", "index", "syntax", "envelope", "document", "gz", "range_bytes")})
    return differences(readings(directory / meta["file"], case))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cases", type=int, help="how many cases (default: each syntax/envelope form once)")
    parser.add_argument("--out", type=Path, help="where findings are kept (default: a new temporary directory)")
    parser.add_argument("--max-seconds", type=float, help="stop starting cases after this long")
    parser.add_argument("--replay", type=Path, help="read one kept case again and say what differs")
    args = parser.parse_args(argv)
    if args.replay:
        found = replay(args.replay)
        print("\n".join(found) or "no difference")
        return 1 if found else 0
    out = args.out or Path(tempfile.mkdtemp(prefix="mm-fuzz-"))
    figures = fuzz(args.seed, args.cases or len(triples()), out, args.max_seconds)
    for name, found in figures["findings"].items():
        print(f"FINDING {out / name}: {'; '.join(found)}", file=sys.stderr)
    print(f"fuzz_readers: seed {figures['seed']}, {figures['cases']} cases ({figures['triples']} syntax/envelope "
          f"forms), {figures['seconds']} s, {len(figures['findings'])} findings (kept in {out})")
    return 1 if figures["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
