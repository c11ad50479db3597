"""Simulated mail-send logs of each incident kind, written together with their ground truth.

    result = simulate("lease-expiry", 2000, Path("case/"), seed=3, syntax="mixed")

writes per-worker log files that follow docs/log-vocabulary.md, `truth.csv` (one row
per duplicated person: campaign, step, recipient, kind, cause) and a README.md.
The truth is computed from the records actually written, by the dedupe key of
docs/log-vocabulary.md — never from what the scenario meant to do.
"""

from __future__ import annotations

import csv
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from forensics.addresses import normalize_address
from forensics.errors import ConfigError, InputError
from forensics.kinds import KINDS as INCIDENT_KINDS

# What --kind can ask for: each incident kind alone, or "mixed" (a scenario with all of them at once).
KINDS = (*INCIDENT_KINDS, "mixed")
SYNTAXES = ("logfmt", "jsonl", "csv", "mixed")
TRUTH_COLUMNS = ("campaign", "step", "recipient", "kind", "cause")
MIN_PEOPLE = 20
THIN_DROPPED_EVENTS = {"claim", "renew", "release", "expire", "start", "error"}
_OURS = re.compile(r"^((worker-.+|mail-send)\.(log|jsonl|csv)(\.gz)?|truth\.csv|README\.md)$")


@dataclass
class SimResult:
    files: list[Path]
    truth_path: Path
    truth: list[dict]
    sends: int
    lines: int
    readme_path: Path | None = None
    kinds: dict = field(default_factory=dict)   # kind -> duplicated people
    workers: list[str] = field(default_factory=list)
    stories: list[str] = field(default_factory=list)


def simulate(kind: str, people: int, out_dir: Path, *, seed: int = 0, syntax: str = "logfmt",
             split_workers: bool = True, gzip: bool = False, thin: bool = False, noise: bool = True) -> SimResult:
    """Write one simulated case into out_dir (a new, empty or earlier-simulation directory)."""
    from forensics.simulate.scenarios import build

    _check(kind, people, syntax, split_workers)
    out = prepare_out_dir(Path(out_dir))
    world = build(kind, people, seed)
    records = finalize(world.records, thin)
    truth, sends = ground_truth(records)
    files, lines = write_logs(world, records, out, seed=seed, syntax=syntax, split=split_workers,
                              gz=gzip, noise=noise)
    truth_path = write_truth(out / "truth.csv", truth)
    result = SimResult(files, truth_path, truth, sends, lines, kinds=dict(Counter(r["kind"] for r in truth)),
                       workers=[w.name for w in world.workers], stories=world.stories)
    options = dict(seed=seed, syntax=syntax, split_workers=split_workers, gzip=gzip, thin=thin, noise=noise)
    result.readme_path = write_readme(out, kind, people, out_dir, options, result, records)
    return result


def _check(kind: str, people: int, syntax: str, split_workers: bool) -> None:
    if kind not in KINDS:
        raise ConfigError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
    if syntax not in SYNTAXES:
        raise ConfigError(f"unknown syntax {syntax!r}; choose one of {', '.join(SYNTAXES)}")
    if people < MIN_PEOPLE:
        raise ConfigError(f"--people must be at least {MIN_PEOPLE} (got {people})")
    if syntax == "mixed" and not split_workers:
        raise ConfigError("--syntax mixed gives each worker file its own syntax; it needs one file per worker")


def prepare_out_dir(out: Path) -> Path:
    """Create out, or clear an earlier simulation there; never clobber someone's own files."""
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not (out / "truth.csv").is_file():
            raise InputError(f"refusing to write into {out}: it is not empty and has no truth.csv "
                               "from an earlier simulation")
        for old in out.iterdir():
            if old.is_file() and _OURS.match(old.name):
                old.unlink()
    out.mkdir(parents=True, exist_ok=True)
    return out


def finalize(records: list[dict], thin: bool) -> list[dict]:
    """Order by time and stamp incarnations; thin evidence drops claims, starts, errors, pids, attempts."""
    records = sorted(records, key=lambda r: r["_t"])
    if thin:
        records = [r for r in records if r["event"] not in THIN_DROPPED_EVENTS]
        for r in records:
            r.pop("attempt", None)
    else:
        for r in records:
            r["incarnation"] = r["_w"].incarnation(r["_t"])
    return records


# --- ground truth ---------------------------------------------------------------------

def ground_truth(records: list[dict]) -> tuple[list[dict], int]:
    """One row per (campaign, step, recipient) with two or more real sends of different msg_ids."""
    groups: dict[tuple, dict] = {}
    for r in records:
        if r["event"] == "send" and r.get("msg_id") and r.get("status") == "ok":
            key = (r["campaign"], str(r["step"]), normalize_address(r["recipient"]))
            groups.setdefault(key, {})[r["msg_id"]] = r
    truth = [_truth_row(key, sends) for key, sends in groups.items() if len(sends) > 1]
    truth.sort(key=lambda row: (row["campaign"], row["step"], row["recipient"]))
    return truth, sum(len(s) for s in groups.values())


def _truth_row(key: tuple, sends: dict) -> dict:
    mechs = {r["_mech"] for r in sends.values()} - {None}
    if len(mechs) != 1:  # a scenario bug, not a user error: the truth would be ambiguous
        raise AssertionError(f"duplicate {key} has mechanisms {sorted(map(str, mechs))}")
    mech = mechs.pop()
    variants = {r.get("variant") for r in sends.values() if r.get("test_id")}
    kind, cause = ("ab-contamination", mech) if len(variants) > 1 else (mech, "")
    return dict(zip(TRUTH_COLUMNS, (*key, kind, cause)))


def write_truth(path: Path, truth: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=TRUTH_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(truth)
    return path


def read_truth(path: Path) -> list[dict]:
    """truth.csv as a list of dicts (what tests and benchmarks compare a diagnosis with)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# --- the log files ----------------------------------------------------------------------

def write_logs(world, records: list[dict], out: Path, *, seed: int, syntax: str, split: bool, gz: bool,
               noise: bool) -> tuple[list[Path], int]:
    from forensics.simulate import render

    rng = random.Random(f"mailmortem-render:{seed}:{syntax}")
    parts = _files(world, records, split, syntax, rng)
    rendered = []
    for name, recs, dialect in parts:
        lines, owners = render.render_file(recs, dialect, rng)
        rendered.append([name, lines, owners, dialect, None])
    for _ in range(rng.randint(1, 3)):
        _, lines, owners, _, _ = rng.choice(rendered)
        render.replay_block(lines, owners, rng)
    if noise:
        _add_noise(rendered, rng)
    files = [render.write_text(out / name, lines, last, gz) for name, lines, _, _, last in rendered]
    total = sum(len(lines) + (1 if last else 0) for _, lines, _, _, last in rendered)
    return files, total


def _files(world, records, split: bool, syntax: str, rng: random.Random) -> list[tuple]:
    from forensics.simulate.render import EXT, choose_dialect

    if not split:
        chosen = syntax
        return [(f"mail-send.{EXT[chosen]}", records, choose_dialect(rng, chosen))]
    by_worker = {w.name: [] for w in world.workers}
    for r in records:
        by_worker[r["_w"].name].append(r)
    syntaxes = _syntax_cycle(syntax, len(by_worker), rng)
    return [(f"worker-{name}.{EXT[s]}", recs, choose_dialect(rng, s))
            for (name, recs), s in zip(by_worker.items(), syntaxes) if recs]


def _syntax_cycle(syntax: str, n: int, rng: random.Random) -> list[str]:
    if syntax != "mixed":
        return [syntax] * n
    order = ["logfmt", "jsonl", "csv"]
    rng.shuffle(order)
    return [order[i % 3] for i in range(n)]


def _add_noise(rendered: list, rng: random.Random) -> None:
    from forensics.simulate import render

    textual = [f for f in rendered if f[3].syntax != "csv"] or rendered
    traced, accessed = rng.choice(textual), rng.choice(textual)
    for f in rendered:
        render.add_noise(f[1], f[2], f[3].syntax, rng, trace=f is traced, access=f is accessed)
    victim = rng.choice(textual)
    victim[4] = render.truncated_line(victim[2], victim[3], rng)


# --- README ---------------------------------------------------------------------------------

def command_line(kind: str, people: int, out_dir, options: dict) -> str:
    parts = ["mailmortem simulate", f"--kind {kind}", f"--people {people}", f"--out {out_dir}",
             f"--seed {options['seed']}"]
    if options["syntax"] != "logfmt":
        parts.append(f"--syntax {options['syntax']}")
    flags = (("split_workers", False, "--single-file"), ("gzip", True, "--gzip"), ("thin", True, "--thin"),
             ("noise", False, "--no-noise"))
    parts += [flag for key, value, flag in flags if options[key] is value]
    return " ".join(parts)


def write_readme(out: Path, kind: str, people: int, out_dir, options: dict, result: SimResult,
                 records: list[dict]) -> Path:
    from forensics.jsonfmt import iso_utc
    import datetime as dt

    first, last = (dt.datetime.fromtimestamp(records[i]["_t"], dt.timezone.utc) for i in (0, -1))
    counts = ", ".join(f"{k} {n}" for k, n in sorted(result.kinds.items())) or "none"
    evidence = "thin evidence (no claims, starts, pids, attempts or error records)" if options["thin"] \
        else "full evidence"
    text = (f"# Simulated case: {kind}\n\n"
            f"{'; '.join(result.stories)}. {people} people, {len(result.workers)} workers "
            f"({', '.join(result.workers)}), logs from {iso_utc(first)} to {iso_utc(last)}, {evidence}; "
            f"{len(result.truth)} duplicated people in truth.csv ({counts}).\n\n"
            f"Generated with: `{command_line(kind, people, out_dir, options)}`\n")
    path = out / "README.md"
    path.write_text(text, encoding="utf-8")
    return path
