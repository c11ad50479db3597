"""What taking envelopes off costs: reading N wrapped lines against reading the same records unwrapped.

    .venv/bin/python benchmarks/envelope_bench.py [--lines 1M] [--syntax logfmt,jsonl]
                                                  [--envelopes docker-json,cri,...|all] [--runs 2] [--parser sql|c]

The records are the project's simulator's (`mixed` kind, one file, noise and all), repeated until there are
--lines of them; each envelope's file is those lines as forensics.simulate.envelopes delivers them. Both the
plain and the wrapped file go through the same ingest (forensics.ingest.case.load_case: detection, the
envelope's unwrapping, the same logfmt or JSON Lines parser, sends); the time of that, best of
--runs in this process on a warm page cache (each file is flushed to disk and read once untimed first; the plain
file and each wrapped one are read in turn, so each row's plain figure is of the same minutes), is compared, as
wall time and as CPU time (every thread of the process). A ratio of 1.25 is 25 % over the plain read. The last
column is the median of the rounds' own CPU ratios (each wrapped read against the plain read just before it), which a
machine whose speed drifts over minutes moves least.
--parser sets MAILMORTEM_PARSER for both reads: sql, the default (the SQL path, which every reading has), or
c (the compiled readers: a plain logfmt file read by the tokenizer against the logfmt lines inside each
envelope read by it, a plain JSON Lines file read by the compiled JSON reader against the JSON records inside
each envelope read by it, which DuckDB hands them vector by vector; logfmt and JSON records in the line
envelopes the C unwrapper takes, forensics.ingest.readers.unwrap.KINDS, are unwrapped in C beside the tokenizer
or the JSON reader instead).
The process installs the SIGBUS handler the CLI installs (runtime.guard_shrinking_files), so each file is read as
`diagnose` reads it (mapped, not read whole into memory by the line-ending check). Classification is not timed: it
reads the same tables either way. Prints a Markdown table; not a test.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Both reads take one parser path (--parser; the SQL path unless MAILMORTEM_PARSER says otherwise).
os.environ.setdefault("MAILMORTEM_PARSER", "sql")

from forensics.ingest.readers import runtime  # noqa: E402
from forensics.ingest.case import load_case  # noqa: E402
from forensics.ingest.load import Reading  # noqa: E402
from forensics.simulate import envelopes as wrap  # noqa: E402
from forensics.simulate.run import simulate  # noqa: E402

DEFAULT = ("docker-json", "cri", "journald", "syslog", "python-logging", "loki", "cloud-logging",
           "cloudwatch-export")


def parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", type=parse_size, default=1_000_000, help="lines per file (default 1M)")
    p.add_argument("--syntax", default="logfmt,jsonl", help="inner syntaxes (default logfmt,jsonl)")
    p.add_argument("--envelopes", default=",".join(DEFAULT), help=f"envelopes, or all (default {','.join(DEFAULT)})")
    p.add_argument("--runs", type=int, default=2, help="runs of each read; the best counts (default 2)")
    p.add_argument("--workdir", type=Path, default=None, help="where the files go (default: a temp folder)")
    p.add_argument("--parser", choices=("sql", "c"), default=os.environ["MAILMORTEM_PARSER"],
                   help="the parser path of both reads (default sql, or MAILMORTEM_PARSER)")
    return p.parse_args(argv)


def inner_lines(folder: Path, syntax: str, count: int) -> list[str]:
    """The simulator's lines of one file, repeated up to `count` (the last, unfinished line left out)."""
    result = simulate("mixed", 4000, folder / f"sim-{syntax}", seed=1, syntax=syntax, split_workers=False)
    lines = result.files[0].read_text(encoding="utf-8").split("\n")[:-1]
    return (lines * (count // len(lines) + 1))[:count]


def takes(syntax: str, name: str) -> bool:
    """Whether envelope `name` can wrap records of `syntax` (some platforms carry only one of them)."""
    return not ((syntax == "jsonl" and name in wrap.LOGFMT_ONLY) or (syntax == "logfmt" and name in wrap.JSON_ONLY))


def timed_read(path: Path, runs: int) -> tuple[float, float]:
    """(wall, CPU) seconds, best of `runs`: CPU time (all of DuckDB's threads) is what a busy machine
    changes least, so its ratio is the one to trust when other work shares the cores."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(runs):
        gc.collect()
        started, cpu = time.perf_counter(), time.process_time()
        case = load_case([str(path)], reading=Reading(year=2026))
        best, best_cpu = min(best, time.perf_counter() - started), min(best_cpu, time.process_time() - cpu)
        assert case.records > 0
        case.con.close()
        del case
    return best, best_cpu


def settle(path: Path) -> None:
    """A file just written, flushed to disk and read once untimed: its reads then all find it in the page cache,
    and none competes with the kernel writing it back (in one run, files read right after they were written cost
    up to 40 % more CPU than when read again minutes later)."""
    os.sync()
    timed_read(path, 1)  # warm: imports, DuckDB's extensions, the page cache


def bench(folder: Path, syntax: str, names: list[str], count: int, runs: int) -> list[str]:
    lines = inner_lines(folder, syntax, count)
    plain = folder / f"plain.{syntax}"
    plain.write_text("\n".join(lines) + "\n", encoding="utf-8")
    settle(plain)
    rows = []
    for name in names:
        if not takes(syntax, name):
            continue
        path = folder / (f"{name}-{syntax}/000000" if name == "cloudwatch-export" else f"{name}.{syntax}.log")
        path.parent.mkdir(exist_ok=True)
        path.write_text(wrap.wrap(name, lines), encoding="utf-8")
        settle(path)
        (base, base_cpu), (took, cpu), paired = interleaved(plain, path, runs)
        rows.append(f"| {syntax} | {name} | {count:,} | {base:.2f} | {took:.2f} | {took / base:.2f} | "
                    f"{base_cpu:.2f} | {cpu:.2f} | {cpu / base_cpu:.2f} | {paired:.2f} |")
        print(rows[-1], flush=True)
        path.unlink()
    return rows


def interleaved(plain: Path, wrapped: Path, runs: int) -> tuple[tuple[float, float], tuple[float, float], float]:
    """The best (wall, CPU) of `runs` reads of each file, the plain and the wrapped one read in turn: what the
    machine's speed does over minutes (the same read moved by 15 % between runs there) then moves both alike.
    Third, the median over the rounds of each round's CPU ratio (wrapped / the plain read just before it): the best
    of each side can pair a fast minute of one with a slow minute of the other, the ratio of one round cannot."""
    reads = [(timed_read(plain, 1), timed_read(wrapped, 1)) for _ in range(runs)]
    best = tuple(tuple(min(read[side][at] for read in reads) for at in (0, 1)) for side in (0, 1))
    return best[0], best[1], statistics.median(read[1][1] / read[0][1] for read in reads)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ["MAILMORTEM_PARSER"] = args.parser
    # as the CLI does: with the SIGBUS handler in place the line-ending check maps each file instead of reading it
    # whole into memory (repair._ending_chunks), so the reads timed here are the ones `diagnose` makes
    runtime.guard_shrinking_files()
    print(f"parser: {args.parser}", flush=True)
    names = list(wrap.NAMES) if args.envelopes == "all" else args.envelopes.split(",")
    header = ["| inner syntax | envelope | lines | plain s | wrapped s | wrapped / plain | plain CPU s | wrapped CPU s "
              "| CPU wrapped / plain | median of the rounds' CPU ratios |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    print("\n".join(header), flush=True)
    rows = []
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for syntax in args.syntax.split(","):
            rows += bench(Path(tmp), syntax, names, args.lines, args.runs)
    print("\n" + "\n".join(header + rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
