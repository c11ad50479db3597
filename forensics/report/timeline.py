"""The report's timeline: one lane per worker (and incarnation), sends as marks, duplicated people's
sends highlighted, claims/renewals/expiries/restarts where they happened.

`timeline_data(con, incidents)` aggregates in DuckDB (queries/report.sql): small cases keep every
record as a mark, large ones are counted per lane and time bin, so the chart never holds more than
MARK_CAP marks. `timeline_spec(data)` turns that into a Vega-Lite spec with altair; `timeline_png`
renders it with vl-convert for the Markdown variant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import queries
from forensics.textsafe import terminal_safe

MARK_CAP = 5000     # marks in the chart, at most (binned beyond POINT_CAP records)
POINT_CAP = 3000    # up to this many records, every record is its own mark
MAX_LANES = 40      # busiest lanes drawn; the rest fold into one "other" lane
LEASE_CAP = 400     # lease intervals drawn
LABEL_CAP = 16      # claims labelled with their shard when there are at most this many
MAX_BINS = 600
MAX_ZOOMS = 4      # close-up panels, one per short incident
WINDOW_LABEL_CAP = 9  # incident bands are labelled when a panel has at most this many
LANE_PX, WIDTH_PX = 34, 980

SEND, DUP = "send", "duplicate send"
LIFECYCLE = ("claim", "renew", "release", "expire", "start", "error")
CATEGORIES = (SEND, DUP) + LIFECYCLE + ("lease",)
COLORS = ("#9aa5b1", "#d62728", "#1f77b4", "#2ca02c", "#7f7f7f", "#ff7f0e", "#9467bd", "#8c564b", "#aec7e8")
SHAPES = ("square", "square", "triangle-right", "diamond", "square", "cross", "triangle-up", "circle", "square")
LEGEND = {"send": "send", "duplicate send": "send to a duplicated person", "claim": "claim (shard)",
          "renew": "lease renewed", "release": "release", "expire": "lease expired",
          "start": "worker (re)start", "error": "error record", "lease": "lease held"}


@dataclass
class Panel:
    """One chart of the timeline: the whole case, or a zoom on one incident's window."""
    title: str
    t_from: int                     # epoch ms
    t_to: int
    mode: str = "points"            # "points" (every record) or "bins" (counted per time bin)
    lanes: list[str] = field(default_factory=list)
    marks: list[dict] = field(default_factory=list)
    leases: list[dict] = field(default_factory=list)
    windows: list[dict] = field(default_factory=list)
    label_shards: list[str] = field(default_factory=list)
    records: int = 0
    bin_ms: int | None = None
    folded_lanes: int = 0
    leases_capped: bool = False
    merged: list[str] = field(default_factory=list)   # the incidents a close-up shows

    @property
    def span_ms(self) -> int:
        return self.t_to - self.t_from


@dataclass
class Timeline:
    panels: list[Panel] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.panels or not self.panels[0].marks

    @property
    def marks(self) -> int:
        return sum(len(p.marks) + len(p.leases) for p in self.panels)


def _kept_lanes(lanes: list[dict], budget: int) -> tuple[list[dict], int]:
    """The busiest lanes (duplicates first), in worker/start order: as many as leave room for ~20 bins
    of every kind of record per lane, between 8 and MAX_LANES."""
    most = max(8, min(MAX_LANES, budget // (len(CATEGORIES) * 20)))
    if len(lanes) <= most:
        return lanes, 0
    ranked = sorted(lanes, key=lambda r: (-r["duplicate_sends"], -r["marks"]))[:most]
    keep = {r["lane"] for r in ranked}
    return [r for r in lanes if r["lane"] in keep], len(lanes) - most


def bin_width_ms(span_ms: int, lane_categories: int, budget: int = MARK_CAP) -> int:
    """A bin width that keeps lanes × categories × bins within budget (and at most MAX_BINS bins)."""
    bins = max(1, min(MAX_BINS, budget // max(1, lane_categories)))
    return max(1, -(-(max(span_ms, 0) + 1) // bins))  # records at both ends land in bins 0 .. bins-1


def _safe_rows(rows: list[dict], keys: tuple[str, ...]) -> list[dict]:
    # Capped lists: labels are drawn as text, so show control/bidi characters escaped.
    for row in rows:
        for key in keys:
            if row.get(key) is not None:
                row[key] = terminal_safe(row[key])
    return rows


def _fill_panel(con, panel: Panel, budget: int) -> Panel:
    """Marks of one panel: every record if they fit in `budget`, else counts per lane and time bin.

    A tenth of the budget (at most LEASE_CAP) is kept for lease bars."""
    lease_cap = min(LEASE_CAP, budget // 10)
    budget -= lease_cap
    window = {"t_from": panel.t_from, "t_to": panel.t_to}
    lanes, panel.folded_lanes = _kept_lanes(queries.rows(con, "report_lanes", window), budget)
    other = f"({panel.folded_lanes} other lanes)"
    params = {**window, "kept": [r["lane"] for r in lanes], "other": other}
    panel.records = queries.one(con, "report_range_count", window)["marks"]
    if panel.records <= min(budget, POINT_CAP):
        panel.marks = queries.rows(con, "report_points", {**params, "limit": POINT_CAP})
    else:
        pairs = sum(r["categories"] for r in lanes) + (len(CATEGORIES) if panel.folded_lanes else 0)
        panel.mode, panel.bin_ms = "bins", bin_width_ms(panel.span_ms, pairs, budget)
        panel.marks = queries.rows(con, "report_bins", {**params, "bin_ms": panel.bin_ms})
    panel.leases = queries.rows(con, "report_leases", {**params, "limit": lease_cap + 1})
    panel.leases_capped = len(panel.leases) > lease_cap
    del panel.leases[lease_cap:]
    names = [r["lane"] for r in lanes] + ([other] if panel.folded_lanes else [])
    panel.lanes = [terminal_safe(n) for n in names]
    _safe_rows(panel.marks, ("lane", "recipient", "campaign", "step", "shard", "msg_id", "variant", "error"))
    _safe_rows(panel.leases, ("lane", "shard"))
    return panel


def epoch_ms(iso: str | None) -> int | None:
    import datetime as dt

    if not iso:
        return None
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)


def _windows(incidents: list[dict]) -> list[dict]:
    # Only a lease-expiry is about particular shards: its claims get labelled on the chart.
    return [{"id": i["id"], "kind": i["kind"], "t": epoch_ms(i["first_send"]), "t2": epoch_ms(i["last_send"]),
             "label": f"{i['id']} {i['kind']}",
             "shards": list(i.get("shards") or []) if i["kind"] == "lease-expiry" else []}
            for i in incidents if i.get("first_send")]


def _same_view(a: Panel, b: Panel) -> bool:
    overlap = min(a.t_to, b.t_to) - max(a.t_from, b.t_from)
    return overlap >= 0.8 * max(a.span_ms, b.span_ms, 1)


def _zoom_title(labels: list[str]) -> str:
    shown = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
    return f"{shown}: close-up"


def _merge_zooms(zooms: list[Panel]) -> list[Panel]:
    """One close-up for incidents that happened in (nearly) the same window."""
    merged: list[Panel] = []
    for zoom in zooms:
        twin = next((m for m in merged if _same_view(m, zoom)), None)
        if twin is None:
            merged.append(zoom)
            continue
        twin.merged.append(zoom.title.removesuffix(": close-up"))
        twin.title = _zoom_title(twin.merged)
        twin.t_from, twin.t_to = min(twin.t_from, zoom.t_from), max(twin.t_to, zoom.t_to)
        twin.label_shards = sorted(set(twin.label_shards) | set(zoom.label_shards))
    return merged


def _zoom(window: dict, overview: Panel) -> Panel | None:
    """A panel around one incident, when its window is small next to the whole case."""
    length = window["t2"] - window["t"]
    if length * 3 > overview.span_ms:
        return None
    margin = max(length // 2, 120_000)
    t_from, t_to = max(overview.t_from, window["t"] - margin), min(overview.t_to, window["t2"] + margin)
    return Panel(f"{window['label']}: close-up", t_from, t_to, label_shards=window["shards"], merged=[window["label"]])


def timeline_data(con, incidents: list[dict]) -> Timeline:
    """The overview of the whole case plus a close-up per short incident, within MARK_CAP marks."""
    queries.macros(con)
    queries.script(con, "report_marks_build")
    span = queries.one(con, "report_span")
    if not span["marks"]:
        return Timeline()
    windows = _windows(incidents)
    shards = sorted({s for w in windows for s in w["shards"]})
    pad = max((span["last_ms"] - span["first_ms"]) // 100, 1000)  # marks at the very ends stay whole
    overview = Panel("Whole case", span["first_ms"] - pad, span["last_ms"] + pad, windows=windows,
                     label_shards=shards)
    zooms = _merge_zooms([z for z in (_zoom(w, overview) for w in windows) if z])[:MAX_ZOOMS]
    budget = MARK_CAP // (2 + len(zooms))  # the overview gets two shares
    _fill_panel(con, overview, MARK_CAP - budget * len(zooms))
    for zoom in zooms:
        zoom.windows = [w for w in windows if w["t"] <= zoom.t_to and w["t2"] >= zoom.t_from]
        _fill_panel(con, zoom, budget)
    return Timeline([overview] + [z for z in zooms if z.marks])
