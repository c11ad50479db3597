"""Time `mailmortem diagnose` against the runbook's grep pipeline and a hand-written DuckDB query.

    python benchmarks/diagnose_bench.py [--sizes 1M,3M,10M] [--workdir /tmp/mm-bench]
                                        [--formats logfmt,jsonl,gz] [--keep] [--out FILE]
    python benchmarks/diagnose_bench.py --against COMMIT [--runs N] [--sizes 1M] [--formats logfmt,jsonl] ...

For every (format, size) case it runs, each as a subprocess on a warm page cache, and
measures wall time, CPU time and peak RSS (os.wait4: the largest single process of the command):

- `mailmortem diagnose FILE` (the table people read) and `mailmortem diagnose FILE --format json`
  (stdout to a file in the workdir, so the summary can be scored against the simulator's
  truth.csv), both with a private temp folder (workdir/tmp) checked for spill folders left behind;
- the runbook's pipeline in the C locale:
  `grep -o 'KEY=[^ ]*' FILE | sort | uniq -c | awk '$1>1' | wc -l` (zcat | grep for .gz);
- a hand-written DuckDB duplicate query: line-based read_csv + regexp_extract of the
  message id + GROUP BY ... HAVING count(*) > 1 (read_json + GROUP BY for JSON Lines).

Cases come from the project's simulator (`mixed` kind, one file, no noise, seed 0) and are
cached in the workdir by format and size. The simulator holds its whole world in memory
(about 6 KB per person, ~2.6 lines per person), so cases larger than --tile-lines are built
from one simulated tile: copy k gets every identifier that ties sends together (worker,
campaign, shard, msg id, test id) prefixed with `t<k>-`, which makes the copies disjoint
incidents, and truth.csv is the union of the copies' truths. The .gz case is the logfmt
case of the same size compressed with gzip -6.

With --against COMMIT it times diagnose installed without the compiled tokenizer, now and at COMMIT, side
by side instead (benchmarks/against_commit.py says how).

The figures (Markdown tables) are printed and written to --out, by default a new
benchmarks/results/diagnose-<UTC time>.md (gitignored); docs/benchmarks.md is updated by hand.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FORMATS = ("logfmt", "jsonl", "gz")
# canonical fields whose values tie records into incidents; tiles make them disjoint
TILE_FIELDS = ("worker", "campaign", "shard", "msg_id", "test_id")
CALIBRATION_PEOPLE = 50_000
TIMEOUT = {"seconds": None}  # --timeout: a command running longer is stopped and reported as such
DIAGNOSE_EXTRA: list[str] = []  # --memory-limit passes through to diagnose
SEED = 0

# The baselines are the benchmark's subject, written the way an engineer would by hand.
DUCKDB_LINES_SQL = """
SELECT count(*) FROM (
  SELECT regexp_extract(line, $pattern, 1) AS msg_id
  FROM read_csv($path, columns = {'line': 'VARCHAR'}, header = false, delim = $delim,
                quote = '', escape = '', auto_detect = false)
  WHERE msg_id <> ''
  GROUP BY msg_id HAVING count(*) > 1)
"""
DUCKDB_JSON_SQL = """
SELECT count(*) FROM (
  SELECT "{key}" AS msg_id FROM read_json($path, format = 'newline_delimited')
  WHERE msg_id IS NOT NULL
  GROUP BY msg_id HAVING count(*) > 1)
"""


@dataclass
class Case:
    fmt: str
    target: int
    path: Path
    lines: int
    bytes: int
    truth: dict
    tiles: int
    msg_key: str


@dataclass
class Run:
    wall: float
    rss_mb: float
    output: str = ""
    ok: bool = True
    timed_out: bool = False
    error: str = ""
    cpu: float = 0.0  # user + system seconds of the command (all its threads and children)


@dataclass
class Result:
    case: Case
    load: float
    cat: Run
    grep: Run
    duckdb: Run
    diagnose: Run  # --format json, with the whole affected list
    table: Run | None = None  # the table output people read
    by_kind: dict = field(default_factory=dict)
    spill_left: int = 0  # mailmortem-spill-* folders left in the private temp folder after both runs
    incidents: int = 0
    commit: str = ""


# --- sizes and arguments ----------------------------------------------------------------

def parse_size(text: str) -> int:
    """'1M' -> 1_000_000, '250k' -> 250_000, '3000' -> 3000."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 1M, 250k)")
    scale = {"": 1, "k": 1_000, "m": 1_000_000}[match.group(2).lower()]
    return int(float(match.group(1)) * scale)


def label(size: int) -> str:
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}M"
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1M,3M,10M", help="target line counts, comma-separated")
    parser.add_argument("--formats", default=",".join(FORMATS), help="logfmt, jsonl, gz (logfmt gzipped)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/mm-bench"))
    parser.add_argument("--tile-lines", type=parse_size, default=1_000_000,
                        help="largest case simulated in one piece; bigger ones are tiled from it")
    parser.add_argument("--timeout", type=float, help="stop any one command after this many seconds")
    parser.add_argument("--memory-limit", help="pass --memory-limit to diagnose (default: its own default)")
    parser.add_argument("--keep", action="store_true", help="keep diagnose's JSON outputs in the workdir")
    parser.add_argument("--generate-only", action="store_true", help="only build (and cache) the cases")
    parser.add_argument("--out", type=Path, help="write the figures to this file "
                        "(default: benchmarks/results/diagnose-<UTC time>.md)")
    parser.add_argument("--against", metavar="COMMIT", help="instead of the baselines: diagnose installed "
                        "without the compiled tokenizer, now and at COMMIT, side by side (against_commit.py)")
    parser.add_argument("--runs", type=int, default=1, help="--against: runs per side (the fastest is reported)")
    args = parser.parse_args(argv)
    args.sizes = sorted(parse_size(s) for s in args.sizes.split(","))
    args.formats = [f.strip() for f in args.formats.split(",")]
    unknown = set(args.formats) - set(FORMATS)
    if unknown:
        parser.error(f"unknown format(s) {', '.join(sorted(unknown))}; choose from {', '.join(FORMATS)}")
    return args


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- running and measuring one command ---------------------------------------------------

def measure_popen(argv: list[str], stdout, env=None) -> Run:
    """Wall time and peak RSS of one command; reaped with wait4 so the rusage is its own."""
    import threading

    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, env=env, start_new_session=True)
    stopped = threading.Event()
    timer = threading.Timer(TIMEOUT["seconds"], _stop, (proc.pid, stopped)) if TIMEOUT["seconds"] else None
    if timer:
        timer.start()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if timer:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if stopped.is_set():
        log(f"STOPPED after {wall:.0f}s (--timeout): {' '.join(argv)[:200]}")
        shutil.rmtree(Path(tempfile.gettempdir()) / f"mailmortem-spill-{proc.pid}", ignore_errors=True)
    elif proc.returncode != 0:
        log(f"FAILED ({proc.returncode}): {' '.join(argv)[:200]}\n{err.decode(errors='replace')[-2000:]}")
    return Run(wall, usage.ru_maxrss / 1024, "", proc.returncode == 0, stopped.is_set(), _error_line(err),
               usage.ru_utime + usage.ru_stime)


def _error_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    found = next((line for line in reversed(lines) if line.startswith("Error:")), lines[-1] if lines else "")
    found = found.split("\\n")[0]  # DuckDB's messages carry escaped newlines and hints after the first
    return found[:160] + ("…" if len(found) > 160 else "")


def _stop(pid: int, stopped) -> None:
    stopped.set()
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_captured(argv: list[str], env=None) -> Run:
    """Run with stdout captured into a temporary file; output is its stripped text."""
    with tempfile.TemporaryFile() as out:
        run = measure_popen(argv, out, env)
        out.seek(0)
        run.output = out.read().decode(errors="replace").strip()
    return run


# --- generating cases --------------------------------------------------------------------

def mailmortem() -> str:
    return str(Path(sys.executable).with_name("mailmortem"))


def simulate(out: Path, people: int, syntax: str) -> None:
    if out.exists():
        shutil.rmtree(out)
    subprocess.run([mailmortem(), "simulate", "--kind", "mixed", "--people", str(people), "--out", str(out),
                    "--single-file", "--no-noise", "--seed", str(SEED), "--syntax", syntax],
                   check=True, stdout=subprocess.DEVNULL)


def lines_per_person(workdir: Path) -> float:
    """Measured once on a small simulation (line counts do not depend on the syntax)."""
    meta = workdir / "calibration.json"
    if meta.is_file():
        return json.loads(meta.read_text())["lines_per_person"]
    out = workdir / "calibration"
    simulate(out, CALIBRATION_PEOPLE, "logfmt")
    value = count_lines(out / "mail-send.log") / CALIBRATION_PEOPLE
    meta.write_text(json.dumps({"people": CALIBRATION_PEOPLE, "lines_per_person": value}))
    shutil.rmtree(out)
    return value


def count_lines(path: Path) -> int:
    return int(subprocess.run(["wc", "-l", str(path)], check=True, capture_output=True, text=True).stdout.split()[0])


def kinds() -> tuple[str, ...]:
    """The incident kinds in diagnose's order (forensics.kinds holds the one table)."""
    from forensics.kinds import KINDS

    return KINDS


def truth_by_kind(truth_csv: Path) -> dict:
    counts = dict.fromkeys(kinds(), 0)
    with open(truth_csv, encoding="utf-8") as f:
        next(f)
        for row in f:   # a few hundred thousand short rows, read once per case
            kind = row.rstrip("\n").split(",")[3]
            counts[kind] = counts.get(kind, 0) + 1
    return counts


def case_dir(workdir: Path, fmt: str, size: int) -> Path:
    return workdir / f"{fmt}-{label(size)}"


def load_case(directory: Path) -> Case | None:
    meta = directory / "case.json"
    if not meta.is_file():
        return None
    data = json.loads(meta.read_text())
    return Case(**{**data, "path": Path(data["path"])})


def save_case(directory: Path, case: Case) -> Case:
    data = {**case.__dict__, "path": str(case.path)}
    (directory / "case.json").write_text(json.dumps(data, indent=1))
    return case


def ensure_case(workdir: Path, fmt: str, size: int, tile_lines: int, lpp: float) -> Case:
    """The cached case for (format, size), generating it (and what it is built from) if missing."""
    directory = case_dir(workdir, fmt, size)
    cached = load_case(directory)
    if cached:
        return cached
    started = time.perf_counter()
    if fmt == "gz":
        case = gzip_case(directory, ensure_case(workdir, "logfmt", size, tile_lines, lpp))
    elif size <= tile_lines * 1.5:
        case = simulated_case(directory, fmt, size, lpp)
    else:
        tile = ensure_case(workdir, fmt, tile_lines, tile_lines, lpp)
        case = tiled_case(directory, tile, size)
    log(f"generated {fmt} {label(size)}: {case.lines:,} lines, {case.bytes / 1e6:,.0f} MB "
        f"in {time.perf_counter() - started:.0f}s")
    return save_case(directory, case)


def simulated_case(directory: Path, fmt: str, size: int, lpp: float) -> Case:
    syntax = "jsonl" if fmt == "jsonl" else "logfmt"
    people = max(20, round(size / lpp))
    log(f"simulating {fmt} {label(size)}: --people {people:,}")
    simulate(directory, people, syntax)
    path = directory / ("mail-send.jsonl" if fmt == "jsonl" else "mail-send.log")
    keys = detect_keys(path, fmt)
    return Case(fmt, size, path, count_lines(path), path.stat().st_size, truth_by_kind(directory / "truth.csv"),
                1, keys["msg_id"][0])


def gzip_case(directory: Path, plain: Case) -> Case:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / (plain.path.name + ".gz")
    log(f"gzip -6 {plain.path}")
    with open(path, "wb") as out:
        subprocess.run(["gzip", "-6", "-c", str(plain.path)], check=True, stdout=out)
    shutil.copy(plain.path.parent / "truth.csv", directory / "truth.csv")
    return Case("gz", plain.target, path, plain.lines, path.stat().st_size, plain.truth, plain.tiles,
                plain.msg_key)


# --- tiling: k disjoint copies of one simulated case -------------------------------------

def detect_keys(path: Path, fmt: str) -> dict[str, list[str]]:
    """Which aliases of the tie fields this file's dialect uses (from its first lines)."""
    from forensics.simulate.render import ALIASES

    sample = sample_lines(path)
    if fmt == "jsonl":
        present = {key for line in sample if line.strip() for key in json.loads(line)}
    else:
        present = {m.group(1) for line in sample for m in re.finditer(r"(?:^| )([\w@.-]+)=", line)}
    keys = {canon: [a for a in dict.fromkeys(ALIASES[canon]) if a in present] for canon in TILE_FIELDS}
    if not keys["msg_id"] or not keys["campaign"]:
        raise SystemExit(f"cannot find the msg id / campaign key in {path}: {sorted(present)}")
    return keys


def sample_lines(path: Path, spots: int = 64, per_spot: int = 400) -> list[str]:
    """Lines from evenly spread offsets of a plain file (keys such as test_id appear late)."""
    size, lines = path.stat().st_size, []
    with open(path, "rb") as f:
        for spot in range(spots):
            f.seek(size * spot // spots)
            if spot:
                f.readline()  # skip the partial line
            lines += [f.readline().decode("utf-8", "replace") for _ in range(per_spot)]
    return [line for line in lines if line.strip()]


def sed_script(keys: dict[str, list[str]], fmt: str, prefix: str) -> str:
    """GNU sed program that prefixes the values of the tie fields (after any quote or '<')."""
    rules = []
    for key in (k for names in keys.values() for k in names):
        if fmt == "jsonl":
            rules.append(f's/"{key}": "\\(<\\{{0,1\\}}\\)/"{key}": "\\1{prefix}/g')
        else:
            rules.append(f's/ {key}=\\(["<]\\{{0,2\\}}\\)/ {key}=\\1{prefix}/g')
    return ";".join(rules)


def tiled_case(directory: Path, tile: Case, size: int) -> Case:
    copies = max(1, math.ceil(size / tile.lines - 0.05))  # at least the size asked for, within 5%
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    keys = detect_keys(tile.path, tile.fmt)
    path = directory / tile.path.name
    log(f"tiling {copies} copies of {tile.path} (rewriting {', '.join(k for v in keys.values() for k in v)})")
    with open(path, "wb") as out:
        out.write(tile.path.read_bytes())
        for k in range(1, copies):
            out.flush()
            subprocess.run(["sed", sed_script(keys, tile.fmt, f"t{k}-"), str(tile.path)], check=True, stdout=out,
                           env={**os.environ, "LC_ALL": "C"})
    tile_truth(tile.path.parent / "truth.csv", directory / "truth.csv", copies)
    truth = {kind: n * copies for kind, n in tile.truth.items()}
    return Case(tile.fmt, size, path, count_lines(path), path.stat().st_size, truth, copies, tile.msg_key)


def tile_truth(source: Path, target: Path, copies: int) -> None:
    """truth.csv of the tiled case: the tile's rows once per copy, campaign (column 1) prefixed."""
    with open(target, "wb") as out:
        out.write(source.read_bytes())
        for k in range(1, copies):
            out.flush()
            subprocess.run(["sed", "-e", "1d", "-e", f"s/^/t{k}-/", str(source)], check=True, stdout=out)


# --- the three contenders -----------------------------------------------------------------

def grep_pipeline(case: Case) -> str:
    key = re.escape(case.msg_key)
    pattern = f'"{key}": *"[^"]*"' if case.fmt == "jsonl" else f"{key}=[^ ]*"
    source = f"zcat {shell_quote(case.path)} | grep -o '{pattern}'" if case.fmt == "gz" \
        else f"grep -o '{pattern}' {shell_quote(case.path)}"
    return f"{source} | sort | uniq -c | awk '$1>1' | wc -l"


def shell_quote(path: Path) -> str:
    import shlex

    return shlex.quote(str(path))


def run_grep(case: Case) -> Run:
    env = {**os.environ, "LC_ALL": "C"}
    return run_captured(["bash", "-o", "pipefail", "-c", grep_pipeline(case)], env)


def run_duckdb(case: Case) -> Run:
    return run_captured([sys.executable, __file__, "--duckdb-baseline", case.fmt, case.msg_key, str(case.path)])


def duckdb_baseline(fmt: str, key: str, path: str) -> int:
    """The hand-written duplicate query (run in a child process so its RSS is measured alone)."""
    import duckdb

    con = duckdb.connect()
    if fmt == "jsonl":
        return con.execute(DUCKDB_JSON_SQL.replace("{key}", key.replace('"', '""')), {"path": path}).fetchone()[0]
    params = {"path": path, "delim": "\x01", "pattern": f" {re.escape(key)}=([^ ]+)"}
    return con.execute(DUCKDB_LINES_SQL, params).fetchone()[0]


def run_diagnose(case: Case, out: Path, *fmt: str) -> Run:
    """diagnose with a private temp folder (workdir/tmp), so that folders left behind are its own."""
    env = {**os.environ, "TMPDIR": str(private_tmp(out.parent))}
    with open(out, "wb") as f:
        return measure_popen([mailmortem(), "diagnose", str(case.path), *fmt, *DIAGNOSE_EXTRA], f, env)


def private_tmp(workdir: Path) -> Path:
    folder = workdir / "tmp"
    folder.mkdir(exist_ok=True)
    return folder


def spill_left(workdir: Path) -> int:
    return len(list(private_tmp(workdir).glob("mailmortem-spill-*")))


def diagnosis_summary(path: Path) -> tuple[dict, int]:
    """summary.by_kind and the incident count from diagnose's JSON (the head before `affected` is small)."""
    with open(path, encoding="utf-8") as f:
        head = f.read(4 << 20)
    cut = head.find(',\n  "affected"')
    document = json.loads(head[:cut] + "}" if cut >= 0 else head)
    return document["summary"]["by_kind"], len(document["incidents"])


def warm(case: Case) -> Run:
    return run_captured(["bash", "-c", f"cat {shell_quote(case.path)} > /dev/null"])


def bench_case(case: Case, workdir: Path, keep: bool) -> Result:
    # the checkout may be shared with people committing while this runs: note the commit per case
    load, commit = os.getloadavg()[0], revision()
    cat = warm(case)
    log(f"{case.fmt} {label(case.target)}: cat {cat.wall:.2f}s; grep pipeline ...")
    grep = run_grep(case)
    log(f"  grep {grep.wall:.1f}s ({grep.output} dup ids); duckdb ...")
    duck = run_duckdb(case)
    log(f"  duckdb {duck.wall:.1f}s ({duck.output} dup ids); diagnose ...")
    out = workdir / f"diagnose-{case.fmt}-{label(case.target)}.json"
    table = run_diagnose(case, workdir / "diagnose-table.txt")
    log(f"  diagnose (table) {table.wall:.1f}s, {table.rss_mb:,.0f} MB RSS; --format json ...")
    diag = run_diagnose(case, out, "--format", "json")
    by_kind, incidents = diagnosis_summary(out) if diag.ok else ({}, 0)
    if not keep:
        out.unlink()
    log(f"  diagnose --format json {diag.wall:.1f}s, {diag.rss_mb:,.0f} MB RSS")
    return Result(case, load, cat, grep, duck, diag, table, by_kind=by_kind, incidents=incidents, commit=commit,
                  spill_left=spill_left(workdir))


# --- the report -----------------------------------------------------------------------------

def fmt_s(run: Run) -> str:
    return f"{run.wall:.1f}" if run.ok else f"> {run.wall:.0f} (stopped)" if run.timed_out \
        else f"failed after {run.wall:.0f}"


def ratio(a: Run, b: Run) -> str:
    return f"{'' if a.ok else '≥ '}{a.wall / b.wall:.2f}×" if b.ok else "–"


def timing_table(results: list[Result]) -> list[str]:
    rows = ["| format | lines | MB | diagnose (table) s | CPU s | RSS MB | diagnose --format json s | CPU s | RSS MB | "
            "grep pipeline s | DuckDB query s | table / grep | json / grep | table / DuckDB | cat s | load avg | commit |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        c, t = r.case, r.table or Run(0, 0, ok=False)
        rows.append(f"| {c.fmt} | {c.lines:,} | {c.bytes / 1e6:,.0f} | {fmt_s(t)} | {t.cpu:.1f} | {t.rss_mb:,.0f} | "
                    f"{fmt_s(r.diagnose)} | {r.diagnose.cpu:.1f} | {r.diagnose.rss_mb:,.0f} | {fmt_s(r.grep)} | "
                    f"{fmt_s(r.duckdb)} | {ratio(t, r.grep)} | {ratio(r.diagnose, r.grep)} | {ratio(t, r.duckdb)} | "
                    f"{r.cat.wall:.2f} | {r.load:.2f} | {r.commit} |")
    return rows


def fractions(r: Result) -> dict:
    return {k: (r.by_kind.get(k, 0) / r.case.truth[k] if r.case.truth.get(k) else None) for k in kinds()}


def classification_table(results: list[Result]) -> list[str]:
    names = kinds()
    rows = ["| format | lines | tiles | incidents per tile | " + " | ".join(names) + " |",
            "|---|---:|---:|---:|" + "---:|" * len(names)]
    for r in results:
        if not r.diagnose.ok:
            rows.append(f"| {r.case.fmt} | {r.case.lines:,} | {r.case.tiles} | – |" + " not finished |" * len(names))
            continue
        cells = []
        for kind, frac in fractions(r).items():
            found = r.by_kind.get(kind, 0)
            share = f"{frac:.3f}" if frac is not None else "–"
            cells.append(f"{found:,} / {r.case.truth.get(kind, 0):,} = {share}")
        rows.append(f"| {r.case.fmt} | {r.case.lines:,} | {r.case.tiles} | {r.incidents / r.case.tiles:g} | "
                    + " | ".join(cells) + " |")
    return rows


def growth(results: list[Result], fmt: str) -> tuple[Result, Result] | None:
    mine = [r for r in results if r.case.fmt == fmt]
    return (mine[0], mine[-1]) if len(mine) > 1 and mine[0].diagnose.ok else None


def bounded(target: str, run: Run, value: float, limit: float, measured: str) -> str:
    """One target row; a stopped or failed run gives a lower bound: 'not met' when above the limit."""
    if run.timed_out:
        verdict = "**not met**" if value > limit else "unknown (stopped)"
        return f"| {target} | ≥ {measured} (stopped after {run.wall:.0f} s) | {verdict} |"
    if not run.ok:
        return f"| {target} | ≥ {measured} (diagnose failed after {run.wall:.0f} s) | **not met** (failed) |"
    return f"| {target} | {measured} | {'**met**' if value <= limit else '**not met**'} |"


def target_rows(results: list[Result]) -> list[str]:
    """The targets of the lean-diagnose work, on the largest case of each format."""
    rows = ["| target | measured | verdict |", "|---|---|---|"]
    largest = {fmt: max((r for r in results if r.case.fmt == fmt), key=lambda r: r.case.lines, default=None)
               for fmt in FORMATS}
    limits = {"logfmt": [("table", "grep pipeline", 1.0), ("json", "grep pipeline", 2.0)],
              "jsonl": [("table", "DuckDB read_json + GROUP BY", 3.0)],
              "gz": [("table", "zcat \\| grep pipeline", 2.0)]}  # \| : a pipe inside a Markdown table
    for fmt, checks in limits.items():
        r = largest.get(fmt)
        if not r:
            continue
        for output, baseline, limit in checks:
            run = (r.table or Run(0, 0, ok=False)) if output == "table" else r.diagnose
            base = r.grep if "grep" in baseline else r.duckdb
            x = run.wall / base.wall
            rows.append(bounded(f"{fmt}: diagnose ({output}) ≤ {limit}× the {baseline}", run, x, limit,
                                f"{x:.2f}× at {r.case.lines:,} lines"))
        worst = max((r.table or r.diagnose, r.diagnose), key=lambda run: run.rss_mb)
        rows.append(bounded(f"{fmt}: peak RSS ≤ 2 GB", worst, worst.rss_mb, 2048,
                            f"{worst.rss_mb:,.0f} MB at {r.case.lines:,} lines"))
    left = sum(r.spill_left for r in results)
    rows.append(f"| no spill folder left behind | {left} left | {'**met**' if not left else '**not met**'} |")
    for fmt in FORMATS:
        pair = growth(results, fmt)
        if pair:
            small, large = pair
            factor, lines = large.diagnose.wall / small.diagnose.wall, large.case.lines / small.case.lines
            rows.append(bounded(f"{fmt}: diagnose --format json grows ≤ 1.05× linearly", large.diagnose,
                                factor, 1.05 * lines, f"{factor:.1f}× for {lines:.1f}× the lines "
                                f"({label(small.case.target)} → {label(large.case.target)})"))
    finished = [r for r in results if r.diagnose.ok]
    same = all(fractions(r) == fractions(finished[0]) and r.incidents * finished[0].case.tiles
               == finished[0].incidents * r.case.tiles for r in finished)
    rows.append(f"| classification identical at every size (per-kind share of truth, incidents per tile) | "
                f"{'identical' if same else 'differs (see table)'} | {'**met**' if same else '**not met**'} |")
    return rows


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    cpu = ""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "")
    except OSError:
        pass
    return f"{os.cpu_count()} cores ({cpu or platform.machine()}), {mem:.0f} GiB RAM, {platform.system()} {platform.release()}"


def revision() -> str:
    """The commit measured (and whether forensics/ or queries/ had uncommitted changes)."""
    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout

    commit = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    changed = [line[3:] for line in git("status", "--porcelain", "forensics", "queries").splitlines()]
    return commit + (f" (uncommitted changes in {', '.join(changed)})" if changed else "")


def report(results: list[Result], command: str, started: float, load_before: tuple, commit: str) -> str:
    lines = ["# `diagnose` against the grep pipeline and a hand-written DuckDB query", "",
             f"Measured {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z} (started at commit {commit}) on {machine()}; "
             f"load average {load_before[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end; "
             f"whole run {(time.perf_counter() - started) / 60:.1f} min.",
             "", f"Command: `{command}`", "", "## Timings (one run each, warm page cache)", ""]
    lines += timing_table(results)
    lines += [f"\n{r.case.fmt} {r.case.lines:,} lines: diagnose {'stopped by --timeout' if r.diagnose.timed_out else 'exited with'}"
              f" `{r.diagnose.error}`" for r in results if not r.diagnose.ok]
    lines += ["", "## Classification: diagnose's per-kind people / simulator truth", ""]
    lines += classification_table(results)
    lines += ["", "## Targets (issue 15, lean diagnose)", ""]
    lines += target_rows(results)
    return "\n".join(lines) + "\n"


def results_file(name: str, out: Path | None) -> Path:
    """Where a run's figures go: `out`, else a new benchmarks/results/NAME-<UTC time>.md. Never docs/:
    a run is one measurement, and docs/benchmarks.md is edited by hand from the ones worth keeping."""
    if out is None:
        return RESULTS / f"{name}-{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}.md"
    if (ROOT / "docs") in out.resolve().parents:
        raise SystemExit(f"--out {out}: benchmarks do not write into docs/; "
                         "copy the figures into docs/benchmarks.md by hand")
    return out


def write_results(text: str, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    log(f"figures written to {path}")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--duckdb-baseline"]:
        print(duckdb_baseline(*argv[1:4]))
        return 0
    args = parse_args(argv)
    out = results_file("against" if args.against else "diagnose", args.out)  # refused before hours of work
    TIMEOUT["seconds"] = args.timeout
    DIAGNOSE_EXTRA[:] = ["--memory-limit", args.memory_limit] if args.memory_limit else []
    sys.path.insert(0, str(ROOT))
    started, load_before, commit = time.perf_counter(), os.getloadavg(), revision()
    args.workdir.mkdir(parents=True, exist_ok=True)
    lpp = lines_per_person(args.workdir)
    log(f"{lpp:.3f} lines per person (mixed, logfmt, no noise)")
    cases = [ensure_case(args.workdir, fmt, size, args.tile_lines, lpp) for fmt in args.formats for size in args.sizes]
    if args.generate_only:
        return 0
    command = ("python benchmarks/diagnose_bench.py " + " ".join(argv)).strip()
    if args.against:
        from against_commit import against  # its own module, to keep this one readable

        table = against(args, cases, command)
    else:
        results = [bench_case(case, args.workdir, args.keep) for case in cases]
        table = report(results, command, started, load_before, commit)
    print(table)
    write_results(table, out)
    return 0


if __name__ == "__main__":
    # against_commit imports this file as `diagnose_bench`: let that be this module (one TIMEOUT), not a copy
    sys.modules.setdefault("diagnose_bench", sys.modules[__name__])
    sys.exit(main())
