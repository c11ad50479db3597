"""Time writing the affected list: the old path (Python objects) against the columnar writers, side by side.

    python benchmarks/output_bench.py [--size 1M] [--workdir /tmp/mm-output-bench] [--out FILE]

The case is diagnose_bench's simulated logfmt case of that size (`mixed` kind, seed 0; made and
cached in the workdir the same way, so a workdir of diagnose_bench can be reused). It is loaded
and classified once into a DuckDB file; then every (output, path) pair runs in a child process
of its own that opens that file read-only at diagnose's default 1 GB memory limit and writes the
affected list to a file in the workdir, on a warm page cache. Wall time and peak RSS (the
child's) are measured; both paths' files must be byte-identical.

Outputs (the affected list only, which is what grows with the case):
- `diagnose --format json`'s "affected" array (written around a small stub of the document head);
- `affected --format json`, `--format jsonl` and `--format csv`.

The old path is the code of commit 8f7fe88, kept here: DuckDB's to_json per person, fetched as
Python strings, json_safe per string, each written on its own; `affected` parsed every entry
back to dicts and wrote them with json.dumps / csv.writer. The new path is the one the commands
use: Arrow batches from DuckDB, text and escaping made by polars expressions, written by polars'
CSV writer (forensics/affected.py, mailmortem/output.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

OUTPUTS = ("diagnose-json", "affected-json", "affected-jsonl", "affected-csv")
STUB_HEAD = {"version": 1, "complete": True}


# --- the old path (commit 8f7fe88), verbatim in what it does ------------------------------------------------

# The old path's query (queries/classify.sql's affected_sends at 8f7fe88): one JSON object per duplicated person,
# built by DuckDB's to_json, for a batch of incidents at a time.
OLD_AFFECTED_SQL = """
SELECT to_json({
    'recipient': d.recipient, 'campaign': nullif(d.campaign, ''), 'step': nullif(d.step, ''),
    'kind': d.kind, 'cause': d.cause, 'incident': i.id,
    'sends': list({'ts': strftime(s.ts, '%Y-%m-%dT%H:%M:%S.%g') || 'Z', 'worker': s.worker,
                   'incarnation': s.incarnation, 'msg_id': s.msg_id, 'variant': s.variant, 'shard': s.shard}
                  ORDER BY s.ts, s.msg_id)})::VARCHAR AS affected
FROM dup_people d
JOIN incidents i ON i.kind = d.kind AND i.campaign = d.campaign AND i.step = d.step
     AND i.test_id IS NOT DISTINCT FROM CASE WHEN d.kind = 'ab-contamination' THEN d.test_id END
     AND list_contains($incident_ids::VARCHAR[], i.id)
JOIN sends s ON s.campaign = d.campaign AND s.step = d.step AND s.recipient = d.recipient
GROUP BY d.recipient, d.campaign, d.step, d.kind, d.cause, i.id
ORDER BY i.id, d.campaign, d.step, d.recipient
"""


def old_affected_json(con):
    from forensics.affected import _incident_batches
    import queries

    sizes = [(incident_id, people) for incident_id, people, *_ in queries.run(con, "incident_sizes").fetchall()]
    for ids in _incident_batches(sizes):
        cursor = con.execute(OLD_AFFECTED_SQL, {"incident_ids": ids})
        while rows := cursor.fetchmany(10_000):
            yield from (row[0] for row in rows)


def old_write_document(document, affected, out) -> None:
    from forensics.jsonfmt import to_json
    from forensics.textsafe import json_safe

    head = to_json({k: v for k, v in document.items() if k != "affected"})
    out.write(head[:-2] + ',\n  "affected": [')
    separator = "\n    "
    for text in affected:
        out.write(separator + json_safe(text))
        separator = ",\n    "
    out.write("]\n}\n" if separator == "\n    " else "\n  ]\n}\n")


def _flat(row: dict) -> dict:
    sends = row["sends"]
    return {**row, "sends": len(sends), "first_send": sends[0]["ts"], "last_send": sends[-1]["ts"],
            "workers": sorted({s["worker"] or "" for s in sends}), "msg_ids": [s["msg_id"] for s in sends]}


def old_path(con, output: str, out) -> None:
    from forensics.affected import CSV_COLUMNS
    from mailmortem.output import write_csv, write_json, write_jsonl

    if output == "diagnose-json":
        return old_write_document(STUB_HEAD, old_affected_json(con), out)
    rows = [json.loads(text) for text in old_affected_json(con)]
    if output == "affected-json":
        write_json(rows, out)
    elif output == "affected-jsonl":
        write_jsonl(rows, out)
    else:
        write_csv([_flat(r) for r in rows], CSV_COLUMNS, out)


def new_path(con, output: str, out) -> None:
    from forensics import affected
    from forensics.rowjson import COMPACT, INDENTED, ONE_LINE
    from mailmortem import output as writers

    frames = affected.frames(con)
    if output == "diagnose-json":
        writers.write_document(STUB_HEAD, affected.json_texts(frames, COMPACT), out)
    elif output == "affected-json":
        writers.write_json_array(affected.json_texts(frames, INDENTED, depth=1), out)
    elif output == "affected-jsonl":
        writers.write_json_lines(affected.json_texts(frames, ONE_LINE), out)
    else:
        writers.write_csv_frames(affected.csv_frames(frames), affected.CSV_COLUMNS, out)


def child(db: str, path: str, output: str, target: str) -> None:
    """One measured write, in its own process: prints wall seconds and peak RSS (MB) as JSON."""
    import duckdb

    con = duckdb.connect(db, read_only=True)
    con.execute("SET memory_limit = '1GB'")
    con.execute("SET temp_directory = ?", [str(Path(target).parent / "spill")])
    started = time.perf_counter()
    with open(target, "w", encoding="utf-8") as out:
        (old_path if path == "old" else new_path)(con, output, out)
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


# --- the driver ---------------------------------------------------------------------------------------------

def prepare(workdir: Path, size: int) -> tuple[Path, int, int]:
    """The case's DuckDB file (loaded and classified once), its line count and its affected people."""
    import diagnose_bench as bench

    case = bench.ensure_case(workdir, "logfmt", size, bench.parse_size("1M"), bench.lines_per_person(workdir))
    db = workdir / f"output-{bench.label(size)}.duckdb"
    if not db.exists():
        from forensics import classify
        from forensics.ingest.case import load_case

        started = time.perf_counter()
        loaded = load_case([str(case.path)], database=str(db) + ".part")
        classify.classify(loaded.con, save=True)  # dup_people and sends as tables, as a saved case has them
        loaded.con.close()
        os.replace(str(db) + ".part", db)
        bench.log(f"loaded and classified {case.lines:,} lines in {time.perf_counter() - started:.0f}s")
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    people = con.execute("SELECT count(*) FROM dup_people").fetchall()[0][0]
    con.close()
    return db, case.lines, people


def measure(db: Path, path: str, output: str, target: Path) -> dict:
    argv = [sys.executable, __file__, "--child", path, output, str(db), str(target)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            sha.update(chunk)
    return sha.hexdigest()


def run(args) -> str:
    import diagnose_bench as bench

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    db, lines, people = prepare(workdir, bench.parse_size(args.size))
    commit = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    rows = []
    for output in OUTPUTS:
        files = {p: workdir / f"{output}.{p}.out" for p in ("old", "new")}
        runs = {p: measure(db, p, output, files[p]) for p in ("old", "new")}
        same = digest(files["old"]) == digest(files["new"])
        mb = files["new"].stat().st_size / 1e6
        old, new = runs["old"], runs["new"]
        rows.append(f"| {output} | {people:,} | {mb:,.0f} | {old['seconds']:.1f} | {new['seconds']:.1f} | "
                    f"{old['seconds'] / new['seconds']:.1f}× | {old['rss_mb']:,.0f} | {new['rss_mb']:,.0f} | "
                    f"{'yes' if same else 'NO'} |")
        bench.log(rows[-1])
        for f in files.values():
            f.unlink()
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = os.getloadavg()
    return "\n".join([
        f"Writing the affected list of the logfmt case of {lines:,} lines ({people:,} affected people), "
        f"measured {when} at commit {commit}, load average {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.",
        "", "| output | people | MB | old path s | new path s | old / new | old RSS MB | new RSS MB | identical |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|", *rows])


def main(argv=None) -> None:
    if argv is None and sys.argv[1:2] == ["--child"]:
        return child(sys.argv[4], sys.argv[2], sys.argv[3], sys.argv[5])
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1M", help="lines of the simulated case (1M: ~170K affected people)")
    parser.add_argument("--workdir", default="/tmp/mm-output-bench")
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args(argv)
    table = run(args)
    print(table)
    if args.out:
        Path(args.out).write_text(table + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
