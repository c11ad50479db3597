"""Golden outputs: every log-reading command on the sample cases, simulated cases and envelope fixtures, in every
format, plus every command's --help, written to a folder, so that two checkouts can be compared byte for byte.

    .venv/bin/python benchmarks/golden.py write OUT        # this checkout's outputs into OUT (a new folder)
    .venv/bin/python benchmarks/golden.py compare A B      # the files that differ; exit 1 when any does

Each output file holds the command, its exit code, its stdout and its stderr. The cases are copied (or simulated,
seeded) into OUT/cases and every command runs with OUT as its working directory and relative paths, so two
checkouts' folders differ only where the program's output does. `--version` is left out: it names the compiled
readers' modules. Not a test: a refactor's before/after check (issue 37).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import filecmp
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Each simulated case (forensics.kinds.KINDS in order, then "mixed") gets other simulate options.
VARIANTS = (["--syntax", "jsonl"], ["--syntax", "logfmt"], ["--syntax", "csv"], ["--gzip"], ["--single-file"],
            ["--syntax", "mixed", "--thin"])
TEST_ID = "subj-2026-11"
COMMANDS = {  # name: [(label, options)]
    "diagnose": [("table", []), ("json", ["--format", "json"])],
    "affected": [(f, ["--format", f]) for f in ("table", "json", "jsonl", "csv")],
    "report": [("md", ["--format", "md", "--title", "golden"]), ("html", ["--format", "html", "--title", "golden"])],
    "ab-contamination": [(f, ["--test-id", TEST_ID, "--format", f]) for f in ("table", "json", "jsonl", "csv")],
    "fields": [("table", []), ("json", ["--format", "json"])],
}
GENERATED = re.compile(r"Generated \d{4}-\d\d-\d\dT[\d:.]+Z")  # the report's own time of writing
ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TZ": "UTC", "LC_ALL": "C.UTF-8", "MAILMORTEM_CONFIG": ""}


def mailmortem() -> list[str]:
    return [sys.executable, "-m", "mailmortem"]


def run(args: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAILMORTEM_")} | ENV
    done = subprocess.run(mailmortem() + args, cwd=cwd, env=env, capture_output=True, text=True)
    text = f"$ mailmortem {' '.join(args)}\nexit {done.returncode}\n--- stdout\n{done.stdout}--- stderr\n{done.stderr}"
    return GENERATED.sub("Generated <time>", text.replace(str(cwd), "<work>"))


def make_cases(out: Path) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from forensics.kinds import KINDS

    cases = out / "cases"
    cases.mkdir(parents=True)
    names = []
    for kind in (*KINDS, "mixed"):
        shutil.copytree(ROOT / "sample_logs" / kind, cases / f"sample-{kind}")
        names.append(f"sample-{kind}")
    for kind, extra in zip((*KINDS, "mixed"), VARIANTS, strict=True):
        subprocess.run(mailmortem() + ["simulate", "--kind", kind, "--people", "60", "--seed", "37",
                                       "--out", f"cases/sim-{kind}", *extra], cwd=out, check=True, capture_output=True)
        names.append(f"sim-{kind}")
    shutil.copytree(ROOT / "tests" / "fixtures" / "envelopes", cases / "envelopes")
    return names


def jobs(out: Path, names: list[str]) -> list[tuple[str, list[str]]]:
    todo = [(f"help-{c}", [c, "--help"]) for c in help_commands()] + [("help", ["--help"])]
    for name in names:
        for command, variants in COMMANDS.items():
            for label, options in variants:
                todo.append((f"{name}.{command}.{label}", [command, f"cases/{name}", *options]))
    for path in sorted((out / "cases" / "envelopes").rglob("*")):
        if path.is_file() and path.name != "README.md":
            label = str(path.relative_to(out / "cases")).replace("/", "_")
            todo.append((f"env.{label}.diagnose.json", ["diagnose", str(path.relative_to(out)), "--format", "json"]))
    return todo


def help_commands() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from mailmortem.cli import main  # the click group

    return sorted(main.commands)


def write(out: Path) -> None:
    out = out.resolve()
    if out.exists():
        sys.exit(f"error: {out} exists; pass a new folder")
    names = make_cases(out)
    todo = jobs(out, names)
    (out / "outputs").mkdir()
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        texts = pool.map(lambda job: (job[0], run(job[1], out)), todo)
        for label, text in texts:
            (out / "outputs" / f"{label}.txt").write_text(text)
    print(f"{len(todo)} outputs in {out / 'outputs'}")


def compare(a: Path, b: Path) -> int:
    differ = []
    for side, other in ((a, b), (b, a)):
        for path in sorted(side.rglob("*")):
            twin = other / path.relative_to(side)
            if path.is_file() and (not twin.is_file() or not filecmp.cmp(path, twin, shallow=False)):
                differ.append(str(path.relative_to(side)))
    differ = sorted(set(differ))
    for name in differ:
        print(f"differs: {name}")
    total = sum(1 for p in a.rglob("*") if p.is_file())
    print(f"{len(differ)} of {total} files differ")
    return 1 if differ else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="verb", required=True)
    sub.add_parser("write").add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = p.parse_args(argv)
    if args.verb == "write":
        write(args.out)
        return 0
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
