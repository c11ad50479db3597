"""Hops: how many times following one plain logfmt file from `diagnose` to its printed headline crosses from one of
the project's Python files into another.

    .venv/bin/python benchmarks/hops.py [FILE]      # default: a simulated parallel-worker logfmt file

`diagnose FILE` runs once untraced (imports, the compiled readers' first load), then once under `sys.setprofile`.
Every call into a project file (forensics/, mailmortem/, remediation/, queries/) whose nearest calling project
frame is in another file is a hop, counted once per (from file, to file, to function): a loop that calls the same
helper a thousand times is one hop, a path that goes out and back through a second function is two. A call from
queries/ into a room above it is not a hop: the runner imports nothing above it, so such a call is DuckDB pulling a
reader's Arrow stream, on the thread running the statement or on its own (which the trace does not see), as DuckDB
pleases. Printed: the
hops, the files they touch, the hops inside forensics/ingest and the trips into queries/ (hops whose target is
there), then the hops themselves. Not a test: issue 37's before/after figure.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ROOMS = ("forensics", "mailmortem", "remediation", "queries")


def project_file(filename: str) -> str | None:
    try:
        rel = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    return str(rel) if rel.parts[0] in ROOMS else None


def trace(args: list[str]) -> set[tuple[str, str, str]]:
    from click.testing import CliRunner

    from mailmortem.cli import main

    CliRunner().invoke(main, args)  # untraced: imports and first loads
    hops: set[tuple[str, str, str]] = set()

    def profile(frame, event, _arg):
        if event != "call":
            return
        here = project_file(frame.f_code.co_filename)
        if here is None:
            return
        caller = frame.f_back
        while caller is not None and project_file(caller.f_code.co_filename) is None:
            caller = caller.f_back
        there = project_file(caller.f_code.co_filename) if caller is not None else None
        if there and there.startswith("queries/") and not here.startswith("queries/"):
            return  # queries/ imports nothing above it: DuckDB pulling a reader's Arrow stream while it runs a statement
        if there is not None and there != here:
            hops.add((there, here, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        result = CliRunner().invoke(main, args)
    finally:
        sys.setprofile(None)
    if result.exit_code not in (0, 3):
        sys.exit(f"error: diagnose exited {result.exit_code}: {result.output[-300:]}")
    return hops


def sample_file(folder: Path) -> Path:
    from click.testing import CliRunner

    from mailmortem.cli import main

    out = folder / "case"
    CliRunner().invoke(main, ["simulate", "--kind", "parallel-worker", "--people", "60", "--seed", "37",
                              "--syntax", "logfmt", "--single-file", "--no-noise", "--out", str(out)])
    logs = [p for p in out.iterdir() if p.suffix == ".log"]
    if len(logs) != 1:
        sys.exit(f"error: the simulator wrote {len(logs)} log files, not one")
    return logs[0]


def main(argv: list[str]) -> int:
    os.environ.setdefault("NO_COLOR", "1")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(argv[0]) if argv else sample_file(Path(tmp))
        hops = trace(["diagnose", str(path), "--no-config"])
    files = {f for hop in hops for f in hop[:2]}
    ingest = [h for h in hops if h[0].startswith("forensics/ingest") and h[1].startswith("forensics/ingest")]
    queries = [h for h in hops if h[1].startswith("queries/")]
    print(f"hops: {len(hops)}  files: {len(files)}  inside forensics/ingest: {len(ingest)}  into queries/: {len(queries)}")
    for there, here, name in sorted(hops):
        print(f"  {there} -> {here}:{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
