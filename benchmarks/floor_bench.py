"""The floor under issue 5's speed targets: the least work any `diagnose` built on DuckDB or polars must do.

Each skeleton only reads the fields diagnose classifies on (the vocabulary keys present in the file) and
counts them — no typed table, no classification, no output — except the JSON Lines one that also builds the
typed table and runs one duplicate GROUP BY, because reading JSON alone fits under its target. Each runs in
a child process (wall time and peak RSS of its own), next to the issue's targets for the whole of diagnose,
computed from the same baselines `diagnose_bench.py` measures (the runbook's grep pipeline, the hand-written
DuckDB query), on the cases `diagnose_bench.py --generate-only` built.

    .venv/bin/python benchmarks/floor_bench.py --workdir /tmp/mm-bench --size 10M --formats logfmt,jsonl,gz

A skeleton slower than the target means no diagnose in these engines can meet that target on this machine.
The figures are printed and written to --out, by default a new benchmarks/results/floor-<UTC time>.md
(gitignored).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import diagnose_bench as bench  # noqa: E402

LINES = ("read_csv({path}, delim = '\\x01', quote = '', escape = '', header = false, columns = {{'line': 'VARCHAR'}}, "
         "auto_detect = false, strict_mode = false, null_padding = true, max_line_size = 8000000, buffer_size = 32000000)")
TOKENS = ("read_csv({path}, delim = ' ', quote = '', escape = '', header = false, columns = {columns}, "
          "auto_detect = false, strict_mode = false, null_padding = true, max_line_size = 8000000, buffer_size = 32000000)")
VALUE = '("(?:[^"\\\\]|\\\\.)*"|[^\\s"]*)'
TOKEN_COLUMNS = 24
SKELETONS = {
    "logfmt": ("lines", "duckdb-regex", "duckdb-tokens", "polars-regex"),
    "gz": ("lines", "duckdb-regex", "duckdb-tokens"),
    "jsonl": ("json-fields", "json-groupby", "json-table-groupby"),
}
TITLES = {
    "lines": "DuckDB reads every line (nothing parsed)",
    "duckdb-regex": "DuckDB, one regex per field (diagnose's way), fields counted",
    "duckdb-tokens": "DuckDB, space-tokenised read_csv + prefix pick per field, counted (wrong on quoted values "
                     "with spaces: a lower bound)",
    "polars-regex": "polars streaming, one str.extract per field, counted",
    "json-fields": "DuckDB read_json with the fields as columns, counted",
    "json-groupby": "DuckDB read_json straight into one duplicate GROUP BY (hash of the dedupe key, min <> max "
                    "msg id), no table",
    "json-table-groupby": "read_json into a table (typed timestamps), then one duplicate GROUP BY (count DISTINCT)",
}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", type=Path, default=Path("/tmp/mm-bench"))
    p.add_argument("--size", type=bench.parse_size, default=bench.parse_size("10M"))
    p.add_argument("--formats", type=lambda s: s.split(","), default=["logfmt", "jsonl", "gz"])
    p.add_argument("--memory-limit", default="1GB", help="DuckDB's limit in the skeletons (diagnose's default)")
    p.add_argument("--out", type=Path, help="write the figures to this file "
                   "(default: benchmarks/results/floor-<UTC time>.md)")
    return p.parse_args(argv)


def field_keys(path: Path, fmt: str) -> list[str]:
    """The vocabulary keys the file uses (from lines spread over it; the head of a .gz)."""
    from forensics.ingest.fields import FieldMap

    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            sample = [line for _, line in zip(range(50_000), f)]
    else:
        sample = bench.sample_lines(path)
    if fmt == "jsonl":
        present = {key for line in sample if line.strip() for key in json.loads(line)}
    else:
        present = {m.group(1) for line in sample for m in re.finditer(r"(?:^| )([^\s=\"]+)=", line)}
    return sorted(key for key in present if FieldMap().canonical_of(key))


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _counted(keys: list[str], inner: str) -> str:
    return "SELECT " + ", ".join(f'count("{k}")' for k in keys) + f" FROM ({inner})"


def skeleton_sql(name: str, path: str, keys: list[str], con) -> str:
    lines = LINES.format(path=_quoted(path))
    if name == "lines":
        return f"SELECT count(line) FROM {lines}"
    if name == "duckdb-regex":
        picks = ", ".join(f"CASE WHEN contains(l, ' {k}=') THEN regexp_extract(l, ' {re.escape(k)}={VALUE}', 1) END"
                          f' AS "{k}"' for k in keys)
        return _counted(keys, f"SELECT {picks} FROM (SELECT ' ' || line AS l FROM {lines})")
    if name == "duckdb-tokens":
        columns = "{" + ", ".join(f"'c{i}': 'VARCHAR'" for i in range(TOKEN_COLUMNS)) + "}"
        tokens = TOKENS.format(path=_quoted(path), columns=columns)
        order = _column_order(con, tokens, keys)
        picks = ", ".join("CASE " + " ".join(f"WHEN starts_with(c{i}, '{k}=') THEN c{i}[{len(k) + 2}:]"
                                             for i in order[k]) + f' END AS "{k}"' for k in keys)
        return _counted(keys, f"SELECT {picks} FROM {tokens}")
    columns = "{" + ", ".join(f"{_quoted(k)}: 'VARCHAR'" for k in keys) + "}"
    source = f"read_json({_quoted(path)}, format = 'newline_delimited', columns = {columns})"
    if name == "json-fields":
        return _counted(keys, f"SELECT * FROM {source}")
    raise ValueError(name)


def _column_order(con, tokens: str, keys: list[str]) -> dict[str, list[int]]:
    """Per key, the token columns in the order of how often the key sits there in the first lines."""
    cells = ", ".join(f"c{i}" for i in range(TOKEN_COLUMNS))
    rows = con.execute(f"SELECT k, i, count(*) FROM (SELECT unnest(range({TOKEN_COLUMNS})) AS i, unnest([{cells}]) AS c "
                       f"FROM (SELECT * FROM {tokens} LIMIT 20000)), (SELECT unnest($keys::VARCHAR[]) AS k) "
                       f"WHERE starts_with(c, k || '=') GROUP BY ALL ORDER BY k, count(*) DESC",
                       {"keys": keys}).fetchall()
    order: dict[str, list[int]] = {k: [] for k in keys}
    for key, column, _ in rows:
        order[key].append(column)
    return {k: seen + [i for i in range(TOKEN_COLUMNS) if i not in seen] for k, seen in order.items()}


def run_skeleton(name: str, fmt: str, path: str, memory_limit: str) -> str:
    keys = field_keys(Path(path), fmt)
    if name == "polars-regex":
        import polars as pl

        frame = pl.scan_csv(path, has_header=False, separator="\x01", quote_char=None, new_columns=["line"],
                            schema_overrides={"line": pl.String})
        picks = [pl.col("line").str.extract(rf"(?:^|\s){re.escape(k)}={VALUE}", 1).alias(k) for k in keys]
        return str(frame.select(picks).select(pl.all().count()).collect(engine="streaming").row(0))
    import duckdb

    con = duckdb.connect(config={"memory_limit": memory_limit, "preserve_insertion_order": True})
    if name == "json-groupby":
        return str(_json_groupby(con, path, keys))
    if name == "json-table-groupby":
        return str(_json_table_groupby(con, path, keys))
    return str(con.execute(skeleton_sql(name, path, keys, con)).fetchone())


def _json_picks(keys: list[str]) -> dict[str, str]:
    """The file's key for each field a duplicate GROUP BY needs."""
    from forensics.ingest.fields import FieldMap

    canonical_of = FieldMap().canonical_of
    pick = {c: next((k for k in keys if canonical_of(k) == c), None) for c in ("ts", "campaign", "step", "recipient",
                                                                       "msg_id")}
    if None in pick.values():
        raise SystemExit(f"this JSON Lines file lacks a field the GROUP BY needs: {pick}")
    return pick


def _json_groupby(con, path: str, keys: list[str]) -> int:
    pick = _json_picks(keys)
    columns = "{" + ", ".join(f"{_quoted(k)}: 'VARCHAR'" for k in keys) + "}"
    return con.execute(f'SELECT count(*) FROM (SELECT hash("{pick["campaign"]}", "{pick["step"]}", '
                       f'lower("{pick["recipient"]}")) AS person FROM read_json({_quoted(path)}, format = '
                       f"'newline_delimited', columns = {columns}) WHERE \"{pick['msg_id']}\" IS NOT NULL "
                       f'GROUP BY person HAVING min("{pick["msg_id"]}") <> max("{pick["msg_id"]}"))').fetchone()[0]


def _json_table_groupby(con, path: str, keys: list[str]) -> int:
    pick = _json_picks(keys)
    columns = "{" + ", ".join(f"{_quoted(k)}: 'VARCHAR'" for k in keys) + "}"
    con.execute(f"CREATE TABLE e AS SELECT * REPLACE (\"{pick['ts']}\"::TIMESTAMPTZ AS \"{pick['ts']}\") "
                f"FROM read_json({_quoted(path)}, format = 'newline_delimited', columns = {columns})")
    return con.execute(f'SELECT count(*) FROM (SELECT "{pick["campaign"]}", "{pick["step"]}", '
                       f'lower("{pick["recipient"]}") FROM e WHERE "{pick["msg_id"]}" IS NOT NULL '
                       f'GROUP BY ALL HAVING count(DISTINCT "{pick["msg_id"]}") > 1)').fetchone()[0]


def measure(case: bench.Case, memory_limit: str) -> list[tuple[str, bench.Run]]:
    runs = []
    for name in SKELETONS[case.fmt]:
        bench.log(f"  {name} ...")
        run = bench.run_captured([sys.executable, __file__, "--skeleton", name, case.fmt, str(case.path),
                                  memory_limit])
        bench.log(f"  {name}: {run.wall:.1f}s {run.rss_mb:,.0f} MB -> {run.output[:120]}")
        runs.append((name, run))
    return runs


def rows_for(case: bench.Case, grep: bench.Run, duck: bench.Run, runs) -> list[str]:
    if case.fmt == "logfmt":
        target, why = min(0.5 * grep.wall, 1.5 * duck.wall), "min(0.5× grep, 1.5× DuckDB)"
    else:
        target, why = 1.5 * duck.wall, "1.5× DuckDB"
    rows = []
    for name, run in runs:
        seconds = bench.fmt_s(run)
        verdict = (f"{run.wall / target:.1f}× the target" + (" — over it with nothing classified"
                                                               if run.wall > target else " — under it"))
        rows.append(f"| {case.fmt} | {case.lines:,} | {TITLES[name]} | {seconds} | {run.rss_mb:,.0f} | "
                    f"{target:.1f} = {why} | {verdict if run.ok else '–'} |")
    return rows


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--skeleton"]:
        print(run_skeleton(*argv[1:5]))
        return 0
    args = parse_args(argv)
    out = bench.results_file("floor", args.out)
    started, load_before, commit = time.perf_counter(), os.getloadavg(), bench.revision()
    rows = ["| format | lines | skeleton | wall s | RSS MB | target for all of diagnose, s | skeleton vs target |",
            "|---|---:|---|---:|---:|---|---|"]
    baselines = []
    for fmt in args.formats:
        case = bench.load_case(bench.case_dir(args.workdir, fmt, args.size))
        if case is None:
            raise SystemExit(f"no {fmt} case of {bench.label(args.size)} in {args.workdir}: "
                             "run diagnose_bench.py --generate-only first")
        bench.warm(case)
        bench.log(f"{fmt} {case.lines:,} lines: grep pipeline and hand-written DuckDB ...")
        grep, duck = bench.run_grep(case), bench.run_duckdb(case)
        baselines.append(f"{fmt}: grep pipeline {bench.fmt_s(grep)} s, hand-written DuckDB {bench.fmt_s(duck)} s")
        rows += rows_for(case, grep, duck, measure(case, args.memory_limit))
    head = ("# The floor under diagnose: skeletons against the targets\n\n"
            f"Measured {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z} at commit {commit} on {bench.machine()}; "
            f"load average {load_before[0]:.2f} at start, {os.getloadavg()[0]:.2f} at end; whole run "
            f"{(time.perf_counter() - started) / 60:.1f} min; DuckDB memory limit {args.memory_limit}.\n\n"
            f"Command: `python benchmarks/floor_bench.py {' '.join(argv)}`\n\nBaselines in the same run: "
            + "; ".join(baselines) + ".\n\n")
    table = head + "\n".join(rows) + "\n"
    print(table)
    bench.write_results(table, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
