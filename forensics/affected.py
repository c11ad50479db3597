"""Pick the affected people a responder asked for, and refuse a filter that matches nothing.

An empty apology list is an answer people act on ("nobody to apologise to"), so it is only given when
the filter names something the logs hold: an unknown incident id, a kind no incident has, or a
campaign the logs never sent to is an error naming what there is.
"""

from __future__ import annotations

import queries
from forensics.errors import InputError

SHOWN = 8  # values named in an error, at most


def _named(values: list[str]) -> str:
    shown = ", ".join(values[:SHOWN]) or "none"
    return shown + (f" and {len(values) - SHOWN} more" if len(values) > SHOWN else "")


def check_filters(con, incidents: list[dict], kind: str | None, incident: str | None, campaign: str | None) -> None:
    if incident and incident not in {i["id"] for i in incidents}:
        raise InputError(f"no incident {incident} in these logs (incidents: {_named([i['id'] for i in incidents])}); "
                         "pass one of them to --incident")
    if kind and kind not in {i["kind"] for i in incidents}:
        kinds = list(dict.fromkeys(i["kind"] for i in incidents))
        raise InputError(f"no {kind} incident in these logs (kinds found: {_named(kinds)}); pass one of them to --kind")
    if campaign is not None:
        sent = [row["campaign"] for row in queries.rows(con, "campaign_send_counts")]
        if campaign not in sent:
            raise InputError(f"no send to campaign {campaign!r} in these logs (campaigns: {_named(sent)}); "
                             "pass one of them to --campaign")



# The "affected" list (docs/diagnose-json.md) leaves DuckDB as Arrow batches of rows and reaches the columnar
# writers (mailmortem/output.py) as polars frames of text, escaped on the way: never one Python object a person.

AFFECTED_BATCH_PEOPLE = 200_000  # people per affected_people_sends query: bounds DuckDB's sort
BATCH_ROWS = 50_000  # rows per Arrow batch handed to polars
SEND_KEYS = ("ts", "worker", "incarnation", "msg_id", "variant", "shard", "candidate")
PERSON_KEYS = ("recipient", "campaign", "step", "kind", "cause", "incident")
ENTRY_KEYS = PERSON_KEYS + ("sends",)
# candidate: the person's candidate id(s) on their sends, for lists keyed by candidate (an apology list, a CRM)
CSV_COLUMNS = ("recipient", "candidate", "campaign", "step", "kind", "cause", "incident", "sends", "first_send",
               "last_send", "workers", "msg_ids")


def chosen_incidents(con, kind: str | None = None, incident: str | None = None,
                     campaign: str | None = None) -> list[tuple[str, int]]:
    """(id, people) of the incidents the filters choose, in the list's order: every person of an incident has
    its kind and campaign, so the filters choose whole incidents (campaign '' is the sends without one)."""
    return [(i, people) for i, people, i_kind, i_campaign in queries.run(con, "incident_sizes").fetchall()
            if (not kind or i_kind == kind) and (not incident or i == incident)
            and (campaign is None or i_campaign == campaign)]


def frames(con, kind: str | None = None, incident: str | None = None, campaign: str | None = None):
    """The affected people (filtered as the options ask), in the list's order, as polars frames of ENTRY_KEYS
    ("sends" a list of structs of SEND_KEYS)."""
    import polars as pl

    for ids in _incident_batches(chosen_incidents(con, kind, incident, campaign)):
        reader = queries.arrow_reader(con, "affected_people_sends", BATCH_ROWS, {"incident_ids": ids})
        yield from _people(pl.from_arrow(batch) for batch in reader if batch.num_rows)


def _people(sends):
    """Sorted send rows grouped into one row a person; the last person of a batch waits for the next batch,
    which may hold more of their sends."""
    import polars as pl

    carry = None
    for frame in sends:
        frame = frame if carry is None else pl.concat([carry.drop("person"), frame])
        # a number a person (run ids of the sorted keys), made once and grouped on below
        frame = frame.with_columns(pl.struct(PERSON_KEYS).rle_id().alias("person"))
        last = frame["person"].search_sorted(frame["person"][-1])  # run ids ascend: the last person's first row
        carry = frame[last:]
        if last:
            yield _grouped(frame[:last])
    if carry is not None:
        yield _grouped(carry)


def _grouped(sends):
    """Rows numbered by person (column `person`) as one row a person, its sends as a list."""
    import polars as pl

    return (sends.group_by("person", maintain_order=True)
            .agg(*(pl.col(k).first() for k in PERSON_KEYS), pl.struct(SEND_KEYS).alias("sends")).drop("person"))


def _incident_batches(sizes: list[tuple[str, int]]):
    batch, people = [], 0
    for incident_id, size in sizes:
        if batch and people + size > AFFECTED_BATCH_PEOPLE:
            yield batch
            batch, people = [], 0
        batch.append(incident_id)
        people += size
    if batch:
        yield batch


def json_texts(frames, layout: str, depth: int = 0):
    """Each person's entry as JSON text in `layout` (forensics.rowjson), json_safe-escaped: one-column frames."""
    import polars as pl

    from forensics.rowjson import COMPACT, Items, row_text
    from forensics.textsafe import json_safe_columns

    if layout == COMPACT:  # the layout of DuckDB's to_json and polars' own encoder: one call
        text = pl.struct(*ENTRY_KEYS).struct.json_encode()
    else:
        text = row_text([(k, Items(k, SEND_KEYS) if k == "sends" else k) for k in ENTRY_KEYS], layout, depth)
    for frame in frames:
        yield json_safe_columns(frame.select(text.alias("text")), ["text"])


def csv_frames(frames):
    """One row a person in CSV_COLUMNS, lists joined with ';', every text cell terminal- then spreadsheet-safe."""
    import polars as pl

    from forensics.textsafe import spreadsheet_safe_expr, terminal_safe_columns

    sends = pl.col("sends")
    field = pl.element().struct.field
    flat = [pl.col(c) for c in ENTRY_KEYS[:-1]] + [
        sends.list.eval(field("candidate")).list.drop_nulls().list.unique(maintain_order=True).list.join(";")
        .alias("candidate"),
        sends.list.len().alias("sends"),
        sends.list.first().struct.field("ts").alias("first_send"),
        sends.list.last().struct.field("ts").alias("last_send"),
        sends.list.eval(field("worker").fill_null("")).list.unique().list.sort().list.join(";").alias("workers"),
        sends.list.eval(field("msg_id").fill_null("None")).list.join(";").alias("msg_ids")]  # as str(None)
    texts = [c for c in CSV_COLUMNS if c != "sends"]
    for frame in frames:
        frame = terminal_safe_columns(frame.select(flat), texts)
        # An empty text is written as nothing (as csv.writer does), not as "".
        yield frame.with_columns(spreadsheet_safe_expr(pl.col(c)).replace("", None) for c in texts)
