"""The compiled logfmt tokenizer side by side with the SQL path it falls back to, in one run.

    python benchmarks/tokenizer_bench.py [--lines 1M] [--workdir /tmp/mm-tokenizer-bench] [--out FILE]

One logfmt case from diagnose_bench's generator (the simulator's `mixed` kind, cached in the workdir). Every
row runs each parser (MAILMORTEM_PARSER=sql, then =c) as a subprocess on a warm page cache, and measures wall
time, CPU time (user + system) and peak RSS:

- parse: the file staged into typed columns (forensics.ingest.readers.logfmt.read), nothing else;
- diagnose: `mailmortem diagnose FILE` end to end (table output), and `--format json`;

and checks that both parsers give the same answer. The machine may be shared: `uptime` is printed beside the
figures. The Markdown table is printed and written to --out (default benchmarks/results/tokenizer-<time>.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import diagnose_bench as bench  # noqa: E402 - the case generator and the measuring of one command

PARSE_ONLY = """
import sys
import queries
from forensics.ingest import case, sources
from forensics.ingest.readers import logfmt, runtime
from forensics.ingest.fields import FieldMap
source = sources.source_of(sys.argv[1])
con = case.connect(input_bytes=int(sys.argv[2]))
for block in ("ingest_macros", "envelope_macros", "address_duckdb_macro"):
    queries.script(con, block)
queries.script(con, "create_files", staged="staged_0")
logfmt.read(con, source, "staged_1", sources.head_bytes(source), FieldMap(), keep_raw=False,
            compiled=runtime.compiled("logfmt"))
print(con.execute("SELECT count(*), count(*) FILTER (WHERE problem IS NULL), "
                  "sum(hash(ts, event, worker, recipient, msg_id, campaign, step, error)) FROM staged_1").fetchone())
"""


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=bench.parse_size, default=1_000_000)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/mm-tokenizer-bench"))
    parser.add_argument("--out", type=Path)
    return parser.parse_args(argv)


def env_for(parser: str) -> dict:
    return {**os.environ, "MAILMORTEM_PARSER": parser}


def measured(argv: list[str], env: dict) -> bench.Run:
    """bench.run_captured, with the command's CPU seconds (user + system, all its threads) as `cpu`: on a
    shared machine they say more than wall time."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        out.seek(0)
        run = bench.Run(time.perf_counter() - start, usage.ru_maxrss / 1024, out.read().decode(errors="replace"),
                        os.waitstatus_to_exitcode(status) == 0)
    run.cpu = usage.ru_utime + usage.ru_stime
    return run


def parse_only(case: bench.Case, parser: str) -> bench.Run:
    run = measured([sys.executable, "-c", PARSE_ONLY, str(case.path), str(case.bytes)], env_for(parser))
    run.output = run.output.splitlines()[-1] if run.output else ""  # DuckDB's progress bar comes before it
    return run


def diagnose(case: bench.Case, parser: str, json_output: bool) -> bench.Run:
    run = measured([bench.mailmortem(), "diagnose", str(case.path), *(["--format", "json"] if json_output else [])],
                   env_for(parser))
    run.output = hashlib.sha256(run.output.encode()).hexdigest()  # compared, not shown
    return run


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def row(name: str, sql: bench.Run, c: bench.Run) -> str:
    same = "yes" if sql.ok and c.ok and sql.output == c.output else "NO"
    return (f"| {name} | {bench.fmt_s(sql)} | {bench.fmt_s(c)} | {sql.wall / c.wall:.2f}× | "
            f"{sql.cpu:.1f} | {c.cpu:.1f} | {sql.cpu / c.cpu:.2f}× | {sql.rss_mb:,.0f} / {c.rss_mb:,.0f} | {same} |")


def main(argv=None) -> None:
    args = parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    lpp = bench.lines_per_person(args.workdir)
    case = bench.ensure_case(args.workdir, "logfmt", args.lines, 1_000_000, lpp)
    version = subprocess.run([bench.mailmortem(), "--version"], capture_output=True, text=True).stdout.split("\n")[1]
    lines = [f"logfmt, {case.lines:,} lines, {case.bytes / 1e6:,.0f} MB; {version}; "
             f"{os.cpu_count()} cores; {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC",
             f"before: {uptime()}", "",
             "| step | SQL path s | C tokenizer s | SQL / C | SQL CPU s | C CPU s | SQL / C (CPU) | "
             "peak RSS MB (SQL / C) | same answer |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    steps = [("parse only", lambda p: parse_only(case, p)),
             ("diagnose (table)", lambda p: diagnose(case, p, False)),
             ("diagnose --format json", lambda p: diagnose(case, p, True))]
    for name, step in steps:
        bench.warm(case)
        sql, c = step("sql"), step("c")
        lines.append(row(name, sql, c))
        bench.log(lines[-1])
    lines += ["", f"after: {uptime()}"]
    text = "\n".join(lines) + "\n"
    print(text)
    out = args.out or bench.RESULTS / f"tokenizer-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


if __name__ == "__main__":
    main()
