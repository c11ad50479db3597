"""Backfill throughput into PostgreSQL for N generated SendGrid events (JSON Lines).

    python benchmarks/backfill_bench.py [--dsn URL] [--events 1000000]

Generates processed + delivered events (every 4th message also gets a delivered event that
collapses onto its send), then times: read (DuckDB over the JSON Lines), load (summary,
dedupe, COPY into a new sent_log in one transaction), the end-to-end rate, and a re-run
(every row already present). Each run uses a scratch database it drops afterwards.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path


def generate(path: Path, events: int) -> int:
    """Write `events` SendGrid events as JSON Lines with polars (no Python loop per line)."""
    import polars as pl

    n = pl.int_range(0, events, eager=True)
    # every 4th event is a "delivered" for the previous message: it collapses onto that send
    frame = pl.DataFrame({"n": n}).with_columns(
        pl.when(pl.col("n") % 4 == 3).then(pl.lit("delivered")).otherwise(pl.lit("processed")).alias("event"),
        pl.when(pl.col("n") % 4 == 3).then(pl.col("n") - 1).otherwise(pl.col("n")).alias("m"),
    ).select(
        pl.format("user{}@example.com", pl.col("m") % (events // 2 + 1)).alias("email"),
        (pl.lit(1764400000) + pl.col("n") // 100).alias("timestamp"),
        pl.col("event"),
        pl.format("ev{}", pl.col("n")).alias("sg_event_id"),
        pl.format("M{}.filter0001.1.1.0", pl.col("m")).alias("sg_message_id"),
        pl.format("c-{}", pl.col("m") % 50).alias("campaign"),
        pl.lit("1").alias("step"),
    )
    frame.write_ndjson(path)
    return frame.filter(pl.col("event") == "processed").height


STEPS = {  # module -> functions timed by --profile (each named query block runs inside one of them)
    "forensics.providers.files": ["read_export"],
    "forensics.providers.reader": ["_lines_table", "_provider_rows", "_check_recognised", "collapse"],
    "remediation.sentlog_backfill": ["summarize_export"],
    "remediation.sentlog": ["_copy_rows", "_compare"],
    "queries": ["run"],
}


def profile_steps() -> dict:
    """Wrap the steps of a read and a backfill with timers; returns {step: seconds}, filled as they run."""
    import functools
    import importlib

    spent: dict = {}

    def timed(name, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                key = name
                if name in ("run", "_copy_rows"):  # the query block is an argument
                    key = f"{name} {next(a for a in args if isinstance(a, str) and not a.startswith(('post', 'duck')))}"
                if name == "_provider_rows":
                    key = f"{name} {args[1]}"
                spent[key] = spent.get(key, 0.0) + time.perf_counter() - start
        return wrapper

    for module_name, names in STEPS.items():
        module = importlib.import_module(module_name)
        for name in names:
            setattr(module, name, timed(name, getattr(module, name)))
    return spent


def _scratch(dsn: str):
    """Create a scratch database; returns (url, drop)."""
    import uuid

    import psycopg
    from psycopg import sql

    name = "mm_bench_" + uuid.uuid4().hex[:8]
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))

    def drop():
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

    return f"{dsn.rpartition('/')[0]}/{name}", drop


def run_once(dsn: str, path: Path) -> dict:
    """Read, then backfill into a new sent_log of a scratch database, then re-run (every row already there)."""
    import queries
    from forensics.providers import read_events
    from remediation import sentlog
    from remediation.store import open_store

    url, drop = _scratch(dsn)
    try:
        t1, c1 = time.perf_counter(), time.process_time()
        read = read_events([str(path)])
        t2, c2 = time.perf_counter(), time.process_time()
        store = open_store(url)
        backend = queries.run(store.conn, "sent_log_pg_backend_pid").fetchone()[0]
        p2 = _cpu_seconds(backend)
        c2b = time.process_time()
        summary = sentlog.backfill_exports(store, read)
        t3, c3, p3 = time.perf_counter(), time.process_time(), _cpu_seconds(backend)
        again = sentlog.backfill_exports(store, read)
        t4 = time.perf_counter()
        rows = sentlog.count_rows(store)
        store.close()
    finally:
        drop()
    return {"read": t2 - t1, "load": t3 - t2, "rerun": t4 - t3, "summary": summary, "again": again, "rows": rows,
            "cpu_read": c2 - c1, "cpu_load": c3 - c2b, "cpu_pg": None if p2 is None else p3 - p2}


def _cpu_seconds(pid: int) -> float | None:
    """CPU time of a local PostgreSQL backend (None when the server is elsewhere)."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1, help="repeat and report the median run (by end-to-end time)")
    parser.add_argument("--profile", action="store_true", help="time each step and query block (summed over runs)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    spent = profile_steps() if args.profile else None

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sendgrid.jsonl"
        t0 = time.perf_counter()
        expected = generate(path, args.events)
        generated = time.perf_counter() - t0
        runs = [run_once(args.dsn, path) for _ in range(args.runs)]
    for run in runs:
        summary, again = run["summary"], run["again"]
        assert summary["inserted"] == expected == run["rows"], (summary["inserted"], expected, run["rows"])
        assert (again["inserted"], again["already_present"]) == (0, expected), again
    runs.sort(key=lambda r: r["read"] + r["load"])
    if len(runs) > 1:
        print("runs (end to end): " + ", ".join(f"{r['read'] + r['load']:.2f}s" for r in runs) + "; median below")
    run = runs[len(runs) // 2]
    read, load, total = run["read"], run["load"], run["read"] + run["load"]
    print(f"generated {args.events:,} events in {generated:.1f}s; {run['summary']['sends_found']:,} sends")
    print(f"read:  {read:.2f}s  ({args.events / read:,.0f} events/s)")
    print(f"load:  {load:.2f}s  ({expected / load:,.0f} rows/s into PostgreSQL: summary, dedupe, COPY into a new "
          f"sent_log, indexes built after)")
    print(f"total: {total:.2f}s  ({args.events / total:,.0f} events/s end to end)")
    print(f"re-run: {run['rerun']:.2f}s  (0 inserted, {expected:,} already present: COPY to a stage + anti-join)")
    pg = "" if run["cpu_pg"] is None else f" + {run['cpu_pg']:.2f}s in the PostgreSQL backend"
    print(f"cpu:   read {run['cpu_read']:.2f}s, load {run['cpu_load']:.2f}s in this process (DuckDB threads included)"
          f"{pg}; wall time above it means the machine was busy")
    if spent:
        print(f"profile (seconds over {args.runs} run(s), first load and re-run; steps nest, slowest first):")
        for step, seconds in sorted(spent.items(), key=lambda kv: -kv[1]):
            if seconds >= 0.01:
                print(f"  {seconds:7.2f}  {step}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
