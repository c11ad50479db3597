"""What taking envelopes off costs, in instructions: envelope_bench.py's comparison counted by valgrind.

    .venv/bin/python benchmarks/envelope_instructions.py [--lines 100K] [--syntax jsonl]
                                                         [--envelopes cloud-logging,elastic,...|all] [--parser sql|c]

The same files as envelope_bench.py (the simulator's records, plain and wrapped in each envelope), each read once
through forensics.ingest.case.load_case in a child process on one DuckDB thread under `valgrind --tool=callgrind`,
which counts the instructions executed: a figure the machine's load does not move, where envelope_bench.py's CPU
times drift by more than a few hundredths between minutes. Each file's count is less that of the same read of its
first 20 lines (starting the interpreter, importing, DuckDB's setup), and a row's ratio is the wrapped file's net
count over the plain file's. Two reads run at a time. Needs valgrind; a 100,000-line read takes a minute or two
under it. Prints a Markdown table; not a test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.envelope_bench import inner_lines, parse_size, takes  # noqa: E402
from forensics.simulate import envelopes as wrap  # noqa: E402

SMALL = 20  # lines of the read whose count is taken off each file's: the fixed cost of a read


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", type=parse_size, default=100_000, help="lines per file (default 100K)")
    p.add_argument("--syntax", default="jsonl", help="inner syntaxes (default jsonl)")
    p.add_argument("--envelopes", default="all", help="envelopes, or all (default all)")
    p.add_argument("--parser", choices=("sql", "c"), default="sql", help="the parser path of every read (default sql)")
    p.add_argument("--count-child", type=Path, help=argparse.SUPPRESS)  # the read valgrind counts
    return p.parse_args(argv)


def count_child(path: Path) -> None:
    """One read of `path` as diagnose reads it, on one DuckDB thread (a count that does not depend on scheduling)."""
    from forensics.ingest import case
    from forensics.ingest.readers import logfmt, runtime
    from forensics.ingest.load import Reading

    made = case.connect

    def one_thread(*args, **kwargs):
        con = made(*args, **kwargs)
        con.execute("SET threads = 1")
        return con

    case.connect = one_thread
    runtime.guard_shrinking_files()
    assert case.load_case([str(path)], reading=Reading(year=2026)).records > 0


def counted(path: Path, parser: str) -> int:
    """Instructions of one read of `path` (callgrind's total)."""
    out = path.parent / (path.name + ".callgrind")
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
                    "--count-child", str(path)], check=True, capture_output=True,
                   env={**os.environ, "MAILMORTEM_PARSER": parser})
    try:
        return next(int(line.split()[1]) for line in out.read_text().splitlines()
                    if line.startswith(("summary:", "totals:")))
    finally:
        out.unlink()


def files(folder: Path, syntax: str, names: list[str], count: int) -> dict[str, tuple[Path, Path]]:
    """(the file, its first SMALL lines) for the plain records and each envelope of `names` that takes them."""
    lines = inner_lines(folder, syntax, count)
    made = {}
    for name in ["plain", *[name for name in names if takes(syntax, name)]]:
        pair = []
        for size in (count, SMALL):
            base = f"{name}-{syntax}-{size}"
            path = folder / (f"{base}/000000" if name == "cloudwatch-export" else f"{base}.log")
            path.parent.mkdir(exist_ok=True)
            body = lines[:size]
            path.write_text("\n".join(body) + "\n" if name == "plain" else wrap.wrap(name, body), encoding="utf-8")
            pair.append(path)
        made[name] = tuple(pair)
    return made


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.count_child:
        count_child(args.count_child)
        return 0
    names = list(wrap.NAMES) if args.envelopes == "all" else args.envelopes.split(",")
    rows = ["| inner syntax | envelope | lines | net instructions (M) | wrapped / plain |", "|---|---|---:|---:|---:|"]
    print(f"parser: {args.parser}\n" + "\n".join(rows), flush=True)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as pool:
        for syntax in args.syntax.split(","):
            made = files(Path(tmp), syntax, names, args.lines)
            counts = dict(zip(made, pool.map(lambda pair: [counted(p, args.parser) for p in pair], made.values())))
            plain = counts["plain"][0] - counts["plain"][1]
            for name, (big, small) in counts.items():
                rows.append(f"| {syntax} | {name} | {args.lines:,} | {(big - small) / 1e6:,.0f} | "
                            f"{(big - small) / plain:.2f} |")
                print(rows[-1], flush=True)
    print("\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
