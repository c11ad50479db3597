"""Each send's campaign, step and send time, as read from an export or stated for all of it: one set of rules.

`backfill-sentlog` and `diagnose --provider-export` read an export through the same ExportSpec (one set of
`--map`/`--campaign-key`/`--step-key` options) and word what is missing with the same hints (`options_for`).
A send whose campaign, step or time was not read is not written: `resolve` counts what each field lacks,
and a backfill refuses while anything does, unless the user states the value for the whole export
(`Stated`: `--campaign NAME`, `--step N`) or says it has no steps (`--no-step`: step '' — a row that counts
for every step). A stated value fills only what the export leaves blank; an export value that disagrees
with it is refused too (it would be overwritten by a guess).
"""

from __future__ import annotations

from dataclasses import dataclass

from forensics.addresses import WHITESPACE, normalize_label

REQUIRED = ("campaign", "step", "sent_at")
_OWN_FORMAT = ("csv", "generic", "jsonl")  # exports described by --map
_FLAG = {"campaign": "--campaign-key KEY", "step": "--step-key KEY"}


@dataclass(frozen=True)
class Stated:
    """What the user says about the whole export: its campaign, its step, or that it has no steps."""

    campaign: str | None = None
    step: str | None = None
    no_step: bool = False

    def value(self, name: str) -> str | None:
        return {"campaign": self.campaign, "step": "" if self.no_step else self.step}.get(name)


@dataclass
class Resolution:
    sends: object  # pyarrow Table: the sends, campaign and step filled with the stated values
    rows: int
    read: dict  # per field: rows whose value the export carries
    stated: dict  # per field: rows given the stated value
    missing: dict  # per field: rows without a value either way
    disagree: dict  # per field: rows whose export value differs from the stated one
    several: int = 0  # rows whose recipient value names several people ("a@x, b@y"): it would match none of them

    @property
    def refused(self) -> bool:
        return any(self.missing.values()) or any(self.disagree.values()) or self.several > 0

    def coverage(self) -> list[dict]:
        return [{"field": f, "read": self.read[f], "stated": self.stated[f], "missing": self.missing[f],
                 "disagree": self.disagree[f]} for f in REQUIRED]


def resolve(sends, stated: Stated = Stated()) -> Resolution:
    """Vectorised over the sends' Arrow table: what each required field reads, lacks, or takes from `stated`."""
    import pyarrow as pa
    import pyarrow.compute as pc

    read, given, missing, disagree = {}, {}, {}, {}
    for name in REQUIRED:
        column = sends.column(name)
        present = pc.is_valid(column) if name == "sent_at" else _non_blank(column)
        read[name] = pc.sum(present).as_py() or 0
        value = stated.value(name)
        given[name] = sends.num_rows - read[name] if value is not None else 0
        missing[name] = sends.num_rows - read[name] - given[name]
        disagree[name] = _disagreeing(column, present, value) if value else 0
        if value is not None:
            filled = pc.if_else(present, column, pa.scalar(value, pa.string()))
            sends = sends.set_column(sends.schema.get_field_index(name), name, filled)
    several = pc.sum(pc.greater(pc.count_substring(sends.column("recipient"), "@"), 1)).as_py() or 0
    return Resolution(sends, sends.num_rows, read, given, missing, disagree, several)


def _non_blank(column):
    """Rows with a value, blank meaning what it means in a label's normal form (normalize_label's WHITESPACE)."""
    import pyarrow.compute as pc

    return pc.not_equal(pc.fill_null(pc.utf8_trim(column, characters=WHITESPACE), ""), "")


def _disagreeing(column, present, value: str) -> int:
    """Rows whose export value is another label than the stated one (compared in normal form)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pc.unique(column.filter(present)).to_pylist()
    differing = sorted(v for v in values if normalize_label(v) != normalize_label(value))
    if not differing:
        return 0
    return int(pc.sum(pc.is_in(column, value_set=pa.array(differing, pa.string()))).as_py() or 0)


def options_for(name: str, providers) -> str:
    """What reads `name` from these exports, or states it: the hint both commands give."""
    own = any(p in _OWN_FORMAT for p in providers)
    others = any(p not in _OWN_FORMAT for p in providers)
    reads = ([f"--map {name}=COLUMN"] if own else []) + ([_FLAG[name]] if others and name in _FLAG else [])
    if name == "campaign":
        return ", or ".join(reads + ["--campaign NAME for the whole export"])
    if name == "step":
        return ", or ".join(reads + ["--step N for the whole export",
                                     "--no-step if it has no steps (each row then counts for every step)"])
    return ", or ".join(reads) if reads else "an export whose events carry their time (these rows have none)"


def refusal(resolution: Resolution, providers, stated: Stated = Stated(), notes=()) -> str:
    """One line: per field, the rows that lack it (or disagree with the stated value) and the options; `notes`
    (the columns found ambiguous: "e.csv: sent_at: ambiguous: Sent At, sent_time; pass --map …") after them."""
    parts = [f"{resolution.several:,} name several recipients in one value (\"a@x, b@y\" matches neither: give the "
             "export one row per recipient)"] if resolution.several else []
    for name in REQUIRED:
        if resolution.missing[name]:
            parts.append(f"{resolution.missing[name]:,} lack a {_NAMES[name]} (pass {options_for(name, providers)})")
        if resolution.disagree[name]:
            parts.append(f"{resolution.disagree[name]:,} name another {_NAMES[name]} than "
                         f"--{name.replace('_', '-')} {stated.value(name)!r} (drop it, or back up one export per value)")
    return (f"refused, nothing written: of {resolution.rows:,} sends, " + "; ".join([*parts, *notes])
            + ": a sent-log row without its campaign or step answers \"not sent\" for the one it belongs to, and "
              "one without its time cannot settle a send reservation (docs/sentlog.md)")


_NAMES = {"campaign": "campaign", "step": "step", "sent_at": "send time"}


def grouping_hint(providers) -> str:
    """diagnose --provider-export's hint for sends that name no campaign step: the same options as a backfill's."""
    if list(providers) == ["postfix"]:
        return "a Postfix maillog names none of them: pass the provider's event export instead"
    own = any(p in _OWN_FORMAT for p in providers)
    keys = "--campaign-key KEY --step-key KEY naming the custom args, tags or metadata keys that hold them"
    maps = "--map campaign=COLUMN --map step=COLUMN (or --map template=COLUMN, or --map subject=COLUMN)"
    if own:
        return maps
    if "sendgrid" in providers:
        return f"{keys} (its activity CSV: {maps})"
    return keys
