"""How the classification grows with a case: CPU time of build_sends and of each classification block.

    python benchmarks/classify_bench.py [--sizes 1M,10M] [--bench /work/bench] [--workdir /tmp/mm-classify]
                                        [--runs N] [--memory-limit 1GB] [--floor] [--out FILE]

Each case (BENCH/logfmt-SIZE/mail-send.log) is staged once: `mailmortem diagnose LOG --save CASE`, cached in
the workdir (delete it to stage again, e.g. after changing the ingest). Then, for each run, a fresh process
opens the saved case with diagnose's connection settings (memory limit, private spill folder,
insertion order kept), builds the `sends` view again over the saved `events` and runs what diagnose runs on
them: the classification (forensics.classify), the summary and the candidates at two addresses. Every query
block reports its CPU time (MAILMORTEM_PROFILE, all threads of the process); the process's peak RSS comes
from wait4. The sizes take turns run by run (1M, 10M, 1M, 10M, ...: a drift of the machine's speed weighs on
both alike), and the median CPU per block over the runs is printed per size, with each block's growth from the
smallest size to the largest beside the growth of the lines (issue 15 item 2: every block that takes at least
0.5 s at the largest size grows no faster than 1.05 x the lines).

With --floor, each run times instead what any classification of the duplicated people must do at least, on the
state classify_dup_sends starts from (their sends, coded, and the people, from classify_codes), each statement
once and alone: scan their sends, copy them, join them to the people, group them by person, number each
person's sends in time order, and join them on a unique integer. No block of the classification can grow more
slowly than the operators it is made of.

The figures (a Markdown table) are printed and written to --out, by default benchmarks/results/classify-<UTC
time>.md (gitignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PROFILE_LINE = re.compile(r"^profile: (\S+) ([0-9.]+) cpu ([0-9.]+)$")
ALLOWED_GROWTH = 1.05  # of the lines' growth, for blocks that take at least MATTERS_S at the largest size
MATTERS_S = 0.5
SHOWN_S = 0.05  # blocks and statements (BLOCK#n) below this at every size are left out of the table


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,10M", help="bench cases, comma-separated (BENCH/logfmt-SIZE)")
    parser.add_argument("--bench", type=Path, default=Path("/work/bench"), help="folder of the bench cases")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/mm-classify"), help="where staged cases are kept")
    parser.add_argument("--runs", type=int, default=1, help="timed runs per size (the median CPU is reported)")
    parser.add_argument("--memory-limit", default="1GB", help="DuckDB memory limit (diagnose's default: 1GB)")
    parser.add_argument("--floor", action="store_true",
                        help="time DuckDB's operators on the duplicated people's sends instead of the blocks")
    parser.add_argument("--out", type=Path, help="write the figures here (default: benchmarks/results/classify-*.md)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # a staged case: run the blocks once
    return parser.parse_args(argv)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the timed process: build sends, classify, summary -------------------------------------

# The floor: what classifying the duplicated people costs at least, operator by operator, on their coded sends
# (mm_repeated_sends) and the people (mm_people) as classify_codes leaves them. Each statement returns one row.
FLOOR = {
    "floor:scan": "SELECT sum(sid) + sum(w) FROM mm_repeated_sends",
    "floor:copy": "CREATE OR REPLACE TEMP TABLE floor_copy AS "
                  "SELECT cs, sid, w, inc, ts, sh, attempt, t, v, r, c FROM mm_repeated_sends",
    "floor:join_people": "SELECT count(*), sum(p.p) FROM mm_repeated_sends s "
                         "JOIN mm_people p ON p.cs = s.cs AND p.recipient = s.recipient",
    "floor:join_integer": "SELECT count(*) FROM floor_copy a JOIN floor_copy b USING (sid)",
    "floor:group_people": "SELECT count(*) FROM (SELECT cs, recipient, count(*) FROM mm_repeated_sends GROUP BY ALL)",
    "floor:number_sends": "SELECT max(n) FROM (SELECT row_number() OVER "
                          "(PARTITION BY cs, recipient ORDER BY ts, msg_id) AS n FROM mm_repeated_sends)",
}


def child(case: Path, memory_limit: str, floor: bool = False) -> None:
    """Run what diagnose runs after reading the logs, on a saved case (its incidents table is made again);
    with `floor`, the operators of FLOOR instead of the classification."""
    import duckdb

    import queries
    from forensics import classify

    with tempfile.TemporaryDirectory(prefix="mm-classify-spill-") as spill:
        config = {"memory_limit": memory_limit, "temp_directory": spill, "preserve_insertion_order": True}
        con = duckdb.connect(str(case), config=config)
        queries.script(con, "ingest_macros")
        print(f"lines: {con.execute('SELECT count(*) FROM events').fetchone()[0]}", file=sys.stderr)
        queries.script(con, "build_sends")
        if floor:
            floor_run(con)
        else:
            classify.classify(con)
            classify.summary(con)
            queries.rows(con, "candidates_at_two_addresses")
        con.close()


def floor_run(con) -> None:
    """classify_codes' state, then each FLOOR statement once, reported as a profile line of its own."""
    import queries
    from forensics import classify

    classify.code_identities(con)
    queries.script(con, "classify_codes")
    for name, statement in FLOOR.items():
        started, cpu = time.perf_counter(), time.process_time()
        con.execute(statement).fetchall()
        print(f"profile: {name} {time.perf_counter() - started:.3f} cpu {time.process_time() - cpu:.3f}",
              file=sys.stderr, flush=True)


# --- staging and measuring ------------------------------------------------------------------

def staged(args, size: str) -> Path:
    """The saved case of one bench size, staged by `mailmortem diagnose --save` if not yet in the workdir."""
    case = args.workdir / f"case-{size}.duckdb"
    if not case.exists():
        log_file = args.bench / f"logfmt-{size}" / "mail-send.log"
        log(f"staging {log_file} into {case}")
        args.workdir.mkdir(parents=True, exist_ok=True)
        mailmortem = str(Path(sys.executable).with_name("mailmortem"))
        subprocess.run([mailmortem, "diagnose", str(log_file), "--save", str(case), "--format", "json"],
                       stdout=subprocess.DEVNULL, check=True)
    return case


def timed_run(case: Path, memory_limit: str, floor: bool = False) -> tuple[dict[str, float], int, float]:
    """CPU seconds per block (or FLOOR statement), lines of the case, and the process's peak RSS in MB."""
    env = {**os.environ, "MAILMORTEM_PROFILE": "" if floor else "1"}
    argv = [sys.executable, __file__, "--child", str(case), "--memory-limit", memory_limit]
    argv += ["--floor"] if floor else []
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = proc.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"timed run failed on {case}:\n{err[-3000:]}")
    cpu: dict[str, float] = {}
    lines = 0
    for line in err.splitlines():
        found = PROFILE_LINE.match(line)
        if found:
            cpu[found[1]] = cpu.get(found[1], 0.0) + float(found[3])
        elif line.startswith("lines: "):
            lines = int(line.split()[1])
    return cpu, lines, usage.ru_maxrss / 1024


def measured(args, sizes: list[str]) -> dict[str, tuple[dict[str, float], int, float]]:
    """Each size's median CPU per block, lines and peak RSS. The sizes take turns, run by run (1M, 10M, 1M,
    10M, ...), so a machine whose speed drifts over minutes weighs on every size alike."""
    cases = {size: staged(args, size) for size in sizes}
    runs: dict[str, list] = {size: [] for size in sizes}
    for number in range(1, args.runs + 1):
        for size in sizes:
            cpu, lines, rss = timed_run(cases[size], args.memory_limit, args.floor)
            runs[size].append((cpu, lines, rss))
            log(f"{size} run {number}: {sum(v for k, v in cpu.items() if '#' not in k):.1f} s CPU, peak RSS {rss:.0f} MB")
    results = {}
    for size, done in runs.items():
        medians = {block: statistics.median(run[0].get(block, 0.0) for run in done) for block in done[0][0]}
        results[size] = (medians, done[0][1], max(run[2] for run in done))
    return results


def table(sizes: list[str], results: dict) -> str:
    small, large = sizes[0], sizes[-1]
    line_growth = results[large][1] / results[small][1]
    head = f"| block | " + " | ".join(f"CPU s {s}" for s in sizes) + f" | growth {small}→{large} | ok |"
    rows = [head, "|" + "---|" * (len(sizes) + 3)]
    blocks = sorted(results[large][0], key=lambda b: -results[large][0][b])
    for block in blocks:
        cpu = [results[s][0].get(block, 0.0) for s in sizes]
        if max(cpu) < SHOWN_S and not block.startswith("floor:"):
            continue
        growth = cpu[-1] / cpu[0] if cpu[0] else float("inf")
        matters = "#" not in block and cpu[-1] >= MATTERS_S
        verdict = ("yes" if growth <= ALLOWED_GROWTH * line_growth else "NO") if matters else ""
        rows.append(f"| {block} | " + " | ".join(f"{c:.2f}" for c in cpu) + f" | {growth:.1f}x | {verdict} |")
    rows.append("")
    rows.append(f"lines {small}→{large}: {results[small][1]:,} → {results[large][1]:,} records "
                f"({line_growth:.1f}x; allowed per block: {ALLOWED_GROWTH * line_growth:.1f}x); peak RSS "
                + ", ".join(f"{s} {results[s][2]:.0f} MB" for s in sizes))
    return "\n".join(rows)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args.child, args.memory_limit, args.floor)
        return 0
    sizes = args.sizes.split(",")
    results = measured(args, sizes)
    text = table(sizes, results)
    print(text)
    out = args.out or RESULTS / f"classify-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
