"""Acceptance: read EVERY provider sample and check the verdict of each event.

Usage: python tests/acceptance/provider_samples.py /path/to/provider-samples

The expected table (provider_samples_expected.tsv, next to this script) holds, by the rules in
docs/sentlog.md (What counts as "went out"), one row per (file, line, event type, recipient) with the
verdict sent / not_sent / not_a_send_event. Exits non-zero with a diff on any mismatch
and ends with the plain `N passed, M failed` line.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

EXPECTED = Path(__file__).with_name("provider_samples_expected.tsv")


def load_expected() -> Counter:
    rows = Counter()
    for line in EXPECTED.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            file, lineno, event, recipient, verdict = line.split("\t")
            rows[(file, lineno, event, recipient, verdict)] += 1
    return rows


def read_actual(root: Path) -> tuple[Counter, set[str]]:
    from forensics.providers import read_events

    # Postfix samples use classic syslog without a year: pin it so the run is reproducible.
    read = read_events([str(root)], year=2024, tz="UTC")
    events = read.events.to_pydict()
    actual = Counter()
    for file, lineno, event, recipient, verdict in zip(events["source_file"], events["source_line"],
                                                       events["event_type"], events["recipient"], events["verdict"]):
        actual[(str(Path(file).relative_to(root)), str(lineno), event, recipient or "-", verdict)] += 1
    return actual, {str(Path(f).relative_to(root)) for f in read.files}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = Path(argv[1]).resolve()
    expected, (actual, files_read) = load_expected(), read_actual(root)
    on_disk = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and p.suffix != ".md"}
    passed = sum((expected & actual).values())
    missing, extra = expected - actual, actual - expected
    unread = sorted(on_disk - files_read)
    for row in sorted(missing.elements()):
        print("- expected " + "\t".join(row))
    for row in sorted(extra.elements()):
        print("+ got      " + "\t".join(row))
    for name in unread:
        print(f"! not read: {name}")
    failed = sum(missing.values()) + sum(extra.values()) + len(unread)
    print(f"provider samples: {len(files_read)} files, {sum(actual.values())} events")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    sys.exit(main(sys.argv))
