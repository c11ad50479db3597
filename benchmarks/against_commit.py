"""`diagnose_bench.py --against COMMIT`: the fallback parser (no compiled tokenizer) against an earlier commit.

Issue 15 asks that a mailmortem installed without a C compiler be never slower than the commit the
tokenizer work started from. Both sides are real installs, each in its own venv under the workdir:

- COMMIT: a git worktree of it (WORKDIR/against-COMMIT/tree, reused), installed into
  WORKDIR/against-COMMIT/venv once;
- now: this checkout, installed into WORKDIR/fallback-now/venv afresh on every run (the checkout moves);

both with `CC=/bin/false pip install`, so the optional C extension is skipped as on a machine without a
compiler (the install is refused if forensics.ingest.readers._logfmt is importable afterwards), and both with the
dependency versions of the interpreter running the benchmark (pip freeze, as constraints), so the two
differ by mailmortem alone. For every case `mailmortem diagnose FILE` (table) and `--format json` run on
each side, on a warm page cache, the side that goes first alternating; wall, CPU (user + system) and peak
RSS come from diagnose_bench's wait4 measure, with --runs N the fastest of N runs per side, and the JSON summaries' people per kind are compared
(with each other and with the simulator's truth).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import diagnose_bench as bench

OUTPUTS = ("table", "json")


@dataclass
class Side:
    name: str      # as the table's columns say it: the commit, or "now"
    venv: Path

    def mailmortem(self) -> str:
        return str(self.venv / "bin" / "mailmortem")


@dataclass
class Pair:
    case: bench.Case
    output: str
    start: bench.Run
    now: bench.Run
    load: float
    people: str = "–"   # json rows: whether both sides found the same people per kind


# --- the two installs -----------------------------------------------------------------------

def git(*args: str, cwd: Path = bench.ROOT) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True).stdout.strip()


def start_tree(workdir: Path, commit: str) -> Path:
    """A detached git worktree of COMMIT in the workdir, made once."""
    tree = workdir / f"against-{commit}" / "tree"
    if not (tree / ".git").exists():
        bench.log(f"git worktree add --detach {tree} {commit}")
        git("worktree", "add", "--detach", str(tree), commit)
    return tree


def constraints(workdir: Path) -> Path:
    """The running interpreter's dependency versions, so both venvs hold the same duckdb, polars, …"""
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], check=True,
                            capture_output=True, text=True).stdout.splitlines()
    path = workdir / "against-constraints.txt"
    path.write_text("\n".join(line for line in frozen if "==" in line and not line.startswith("mailmortem")) + "\n")
    return path


def install(venv: Path, source: Path, pins: Path) -> None:
    """`CC=/bin/false pip install SOURCE` into VENV (made if missing): mailmortem as a machine without a C
    compiler gets it."""
    if not (venv / "bin" / "python").exists():
        bench.log(f"python -m venv {venv}")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bench.log(f"CC=/bin/false pip install {source} into {venv}")
    env = {**os.environ, "CC": "/bin/false", "CXX": "/bin/false"}
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "-c", str(pins), str(source)],
                   check=True, env=env, stdout=subprocess.DEVNULL)
    # from the venv's own folder: run from a checkout, `-c` would find the checkout's in-place build
    found = subprocess.run([str(venv / "bin" / "python"), "-c", "import importlib.util as u; "
                            "print(u.find_spec('forensics.ingest.readers._logfmt') is not None)"],
                           cwd=venv, capture_output=True, text=True, check=True).stdout.strip()
    if found != "False":
        raise SystemExit(f"{venv}: forensics.ingest.readers._logfmt was built despite CC=/bin/false; "
                         "not a fallback install")


def prepare(workdir: Path, commit: str) -> tuple[Side, Side]:
    pins = constraints(workdir)
    start = Side(commit, workdir / f"against-{commit}" / "venv")
    if not (start.venv / "bin" / "mailmortem").exists():
        install(start.venv, start_tree(workdir, commit), pins)
    now = Side("now", workdir / "fallback-now" / "venv")
    install(now.venv, head_tree(workdir), pins)
    return start, now


def head_tree(workdir: Path) -> Path:
    """A clean detached worktree of the checkout's HEAD (the committed code): a checkout that was built in
    place keeps a compiled tokenizer in build/, which pip would install even with CC=/bin/false."""
    tree, head = workdir / "fallback-now" / "tree", git("rev-parse", "HEAD")
    if not (tree / ".git").exists():
        git("worktree", "add", "--detach", str(tree), head)
    git("checkout", "-q", "--detach", head, cwd=tree)
    git("clean", "-q", "-xfd", cwd=tree)
    return tree


# --- running the pairs --------------------------------------------------------------------------

def clean_env() -> dict:
    """No parser choice and no PYTHONPATH from the caller: each side runs as installed."""
    return {k: v for k, v in os.environ.items() if k not in ("MAILMORTEM_PARSER", "PYTHONPATH")}


def run_side(side: Side, case: bench.Case, output: str, out: Path) -> bench.Run:
    argv = [side.mailmortem(), "diagnose", str(case.path), *(["--format", "json"] if output == "json" else [])]
    with open(out, "wb") as f:
        return bench.measure_popen([*argv, *bench.DIAGNOSE_EXTRA], f, clean_env())


def fastest(runs: list[bench.Run]) -> bench.Run:
    """The run of least wall time (its CPU and RSS with it), the one the shared cores disturbed least; any
    failure is the result."""
    failed = [r for r in runs if not r.ok]
    return failed[0] if failed else min(runs, key=lambda r: r.wall)


def same_people(case: bench.Case, start_json: Path, now_json: Path) -> str:
    """Whether both JSON summaries hold the same people per kind and incidents (and whether that is truth)."""
    (a, a_incidents), (b, b_incidents) = bench.diagnosis_summary(start_json), bench.diagnosis_summary(now_json)
    if a != b or a_incidents != b_incidents:
        differ = [f"{k} {a.get(k, 0):,} / {b.get(k, 0):,}" for k in bench.kinds() if a.get(k, 0) != b.get(k, 0)]
        return "**no**: " + ", ".join(differ or [f"incidents {a_incidents} / {b_incidents}"])
    exact = all(b.get(k, 0) == n for k, n in case.truth.items())
    return f"yes ({a_incidents} incidents; {'= truth' if exact else 'differs from truth'})"


def bench_pair(sides: tuple[Side, Side], case: bench.Case, output: str, runs: int, turn: int, workdir: Path,
               keep: bool) -> Pair:
    load, outs = os.getloadavg()[0], {}
    measured: dict[str, list[bench.Run]] = {s.name: [] for s in sides}
    for i in range(runs):
        bench.warm(case)
        for side in (sides if (turn + i) % 2 == 0 else sides[::-1]):
            outs[side.name] = workdir / f"against-{side.name}-{case.fmt}-{bench.label(case.target)}.{output}"
            run = run_side(side, case, output, outs[side.name])
            measured[side.name].append(run)
            bench.log(f"  {side.name:>8} {case.fmt} {output}: {run.wall:.1f} s, {run.cpu:.1f} s CPU, "
                      f"{run.rss_mb:,.0f} MB")
    start, now = (fastest(measured[s.name]) for s in sides)
    pair = Pair(case, output, start, now, load)
    if output == "json" and start.ok and now.ok:
        pair.people = same_people(case, *(outs[s.name] for s in sides))
    if not keep:
        for path in outs.values():
            path.unlink(missing_ok=True)
    return pair


# --- the report -----------------------------------------------------------------------------------

def pair_row(p: Pair) -> str:
    ratio = f"{p.now.wall / p.start.wall:.2f}" if p.start.ok and p.now.ok else "–"
    cpu_ratio = f"{p.now.cpu / p.start.cpu:.2f}" if p.start.ok and p.now.ok else "–"
    return (f"| {p.case.fmt} | {p.output} | {p.case.lines:,} | {bench.fmt_s(p.start)} | {bench.fmt_s(p.now)} | "
            f"{ratio} | {p.start.cpu:.1f} / {p.now.cpu:.1f} | {cpu_ratio} | "
            f"{p.start.rss_mb:,.0f} / {p.now.rss_mb:,.0f} | {p.people} | {p.load:.2f} |")


def verdict(pairs: list[Pair]) -> str:
    over = [f"{p.case.fmt} {p.output} {p.now.wall / p.start.wall:.2f}" for p in pairs
            if not (p.start.ok and p.now.ok) or p.now.wall > p.start.wall]
    return ("Fallback never slower than the start commit (now / start ≤ 1.00 in every row): "
            + ("**met**" if not over else f"**not met** ({'; '.join(over)})"))


def report(pairs: list[Pair], commit: str, runs: int, command: str, load_before: tuple) -> str:
    start = git("rev-parse", "--short", commit)
    lines = [f"# Fallback (no compiled tokenizer) against {start}", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M %Z')} at {bench.revision()} on {bench.machine()}; "
             f"load average {' / '.join(f'{x:.2f}' for x in load_before)} at start, "
             f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())} at end; "
             f"{'one run' if runs == 1 else f'the fastest of {runs} runs'} per side, warm page cache.", "",
             f"Command: `{command}`", "",
             f"| format | output | lines | {start} s | now (fallback) s | now / {start} | CPU s ({start} / now) | "
             f"CPU now / {start} | peak RSS MB ({start} / now) | same people per kind | load avg |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    lines += [pair_row(p) for p in pairs]
    return "\n".join([*lines, "", verdict(pairs)]) + "\n"


def against(args, cases: list[bench.Case], command: str) -> str:
    """The Markdown report of every case's pairs (diagnose_bench's main calls this for --against)."""
    load_before = os.getloadavg()
    sides = prepare(args.workdir, args.against)
    pairs, turn = [], 0
    for case in cases:
        for output in OUTPUTS:
            bench.log(f"{case.fmt} {bench.label(case.target)} {output}")
            pairs.append(bench_pair(sides, case, output, args.runs, turn, args.workdir, args.keep))
            turn += 1
    return report(pairs, args.against, args.runs, command, load_before)
