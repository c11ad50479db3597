"""Measure every test and write tests/durations.txt, the list tests/test_durations.py holds the `slow` marks to.

    python -m tests.durations            # the whole suite, then each unmarked test at or over the threshold alone
    python -m tests.durations -- tests/test_x.py   # only these tests, merged into the list

A test's duration is its call phase: a fixture shared by many tests (the PostgreSQL server of a session) is no one
test's cost, and would fall on whichever test happens to come first. The suite is measured on the workers pytest
is configured with (-n auto), which share the machine; so each test at or over the threshold that is not marked
slow is run again, one test at a time (-n 0), and keeps the shorter of its two measurements: that is the figure
that decides whether it must be marked. A test already marked slow keeps its first figure (slow either way). The
threshold is read from the `slow` marker's note in pyproject.toml, the one place it is written.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIST = REPO / "tests" / "durations.txt"
_PHASE = re.compile(r"^(\d+\.\d+)s call\s+(\S.*)$")
_HEADER = ("# Each test's call time in seconds, one test at a time (-n 0); written by `python -m tests.durations`.\n"
           "# A test at or over the threshold in pyproject.toml's `slow` marker note is marked slow "
           "(tests/test_durations.py checks).\n")


def threshold_s() -> float:
    """The seconds from the `slow` marker's note ("takes 0.6 s or more"), so the note and the check agree."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    note = next(m for m in config["tool"]["pytest"]["ini_options"]["markers"] if m.startswith("slow:"))
    found = re.search(r"takes (\d+(?:\.\d+)?) s or more", note)
    if not found:
        raise SystemExit("pyproject.toml: the slow marker's note no longer says 'takes N s or more'")
    return float(found.group(1))


def measure(args: list[str], alone: bool) -> dict[str, float]:
    """Run pytest on args (`alone`: one test at a time), its output shown as it goes; each test id's call time.
    Failing tests are measured too."""
    command = [sys.executable, "-m", "pytest", "-q", *(["-n", "0"] if alone else []), "-p", "no:cacheprovider",
               "--durations=0", "--durations-min=0", "-o", "console_output_style=classic", *args]
    lines = []
    with subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"}) as run:
        for line in run.stdout:
            print(line, end="", flush=True)
            lines.append(line.rstrip("\n"))
    if run.returncode not in (0, 1):
        raise SystemExit(f"pytest exited {run.returncode}")
    return {m.group(2): float(m.group(1)) for m in map(_PHASE.match, lines) if m}


class _Marks:
    """A pytest plugin that keeps, for each collected test, whether it is marked slow and whether Hypothesis times
    it (a deadline, or the too_slow health check), as the test would run."""

    def __init__(self) -> None:
        self.tests: dict[str, dict[str, bool]] = {}

    def pytest_collection_finish(self, session) -> None:
        self.tests = {item.nodeid: {"slow": item.get_closest_marker("slow") is not None, "timed": _timed(item)}
                      for item in session.items}


def _timed(item) -> bool:
    test = getattr(item, "obj", None)
    if not getattr(test, "is_hypothesis_test", False):
        return False
    from hypothesis import HealthCheck

    chosen = test._hypothesis_internal_use_settings
    return chosen.deadline is not None or HealthCheck.too_slow not in chosen.suppress_health_check


def collected() -> dict[str, dict[str, bool]]:
    """Every test of the suite, whether it is marked slow and whether Hypothesis times it, as pytest collects
    them (in a process of its own: `python -m tests.durations --marks` prints them as JSON)."""
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAILMORTEM_PROPERTY", "PYTEST_"))}
    run = subprocess.run([sys.executable, "-m", "tests.durations", "--marks"], cwd=REPO, env=env,
                         capture_output=True, text=True)
    if run.returncode != 0:
        raise AssertionError(f"collecting the suite failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    return json.loads(run.stdout.splitlines()[-1])


def _print_marks() -> None:
    import contextlib
    import io
    import json

    import pytest

    marks = _Marks()
    with contextlib.redirect_stdout(io.StringIO()):
        code = pytest.main(["--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider", "tests"], plugins=[marks])
    if code != 0:
        raise SystemExit(f"pytest --collect-only exited {code}")
    print(json.dumps(marks.tests))


def read_list(path: Path = LIST) -> dict[str, float]:
    durations = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            seconds, test_id = line.split(" ", 1)
            durations[test_id] = float(seconds)
    return durations


def write_list(durations: dict[str, float], path: Path = LIST) -> None:
    lines = [f"{seconds:.3f} {test_id}\n" for test_id, seconds in sorted(durations.items())]
    path.write_text(_HEADER + "".join(lines), encoding="utf-8")


def main(args: list[str]) -> None:
    measured, tests = measure(args or ["tests"], alone=False), collected()
    again = sorted(test_id for test_id, seconds in measured.items()
                   if seconds >= threshold_s() and test_id in tests and not tests[test_id]["slow"])
    if again:
        for test_id, seconds in measure(again, alone=True).items():
            measured[test_id] = min(measured[test_id], seconds)
    durations = (read_list() if args and LIST.exists() else {}) | measured
    write_list(durations)
    print(f"{len(measured)} tests measured, {len(again)} measured again; {LIST.relative_to(REPO)} lists {len(durations)}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--marks"]:
        _print_marks()
    else:
        main([a for a in sys.argv[1:] if a != "--"])
