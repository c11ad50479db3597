"""Backfill throughput into PostgreSQL for N generated SendGrid events (JSON Lines).

    python benchmarks/backfill_bench.py [--dsn URL] [--events 1000000]

Generates processed + delivered events (every 4th message also gets a delivered event that
collapses onto its send), then times: read (DuckDB over the JSON Lines), load (COPY + merge
in one transaction), and the end-to-end rate. Uses a scratch database it drops afterwards.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

    import psycopg
    from psycopg import sql

    from forensics.providers import read_events
    from remediation import sentlog
    from remediation.store import open_store

    scratch = "mm_bench_" + uuid.uuid4().hex[:8]
    base, _, _ = args.dsn.rpartition("/")
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(scratch)))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "sendgrid.jsonl"
            t0 = time.perf_counter()
            expected = generate(path, args.events)
            t1 = time.perf_counter()
            read = read_events([str(path)])
            t2 = time.perf_counter()
            store = open_store(f"{base}/{scratch}")
            summary = sentlog.backfill_exports(store, read)
            store.close()
            t3 = time.perf_counter()
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(scratch)))
    assert summary["inserted"] == expected, (summary["inserted"], expected)
    total = t3 - t1
    print(f"generated {args.events:,} events in {t1 - t0:.1f}s; {summary['sends_found']:,} sends")
    print(f"read:  {t2 - t1:.2f}s  ({args.events / (t2 - t1):,.0f} events/s)")
    print(f"load:  {t3 - t2:.2f}s  ({summary['inserted'] / (t3 - t2):,.0f} rows/s into PostgreSQL, COPY + merge)")
    print(f"total: {total:.2f}s  ({args.events / total:,.0f} events/s end to end)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
