"""The timeline as a chart: a Vega-Lite spec built with altair (`timeline_spec`), rendered to PNG
with vl-convert for the Markdown report (`timeline_png`). The data comes from `timeline.timeline_data`.
"""

from __future__ import annotations

from forensics.report.timeline import (
    CATEGORIES, COLORS, DUP, LABEL_CAP, LANE_PX, LEGEND, SEND, SHAPES, WIDTH_PX, WINDOW_LABEL_CAP, Panel, Timeline,
)


def _time_format(span_ms: int) -> str:
    if span_ms <= 15 * 60_000:
        return "%H:%M:%S"
    return "%H:%M" if span_ms <= 20 * 3_600_000 else "%b %d %H:%M"


def _x(alt, panel: Panel, domain: bool = False):
    # The panel's domain is given once (on the frame layer): repeated, Vega-Lite warns of a conflict.
    scale = alt.Scale(type="utc", domain=[panel.t_from, panel.t_to]) if domain else alt.Scale(type="utc")
    return alt.X("t:T", title="time (UTC)", scale=scale,
                 axis=alt.Axis(grid=True, labelOverlap=True, tickCount=10, format=_time_format(panel.span_ms)))


def _y(alt, lanes: list[str]):
    return alt.Y("lane:N", sort=lanes, title=None, scale=alt.Scale(domain=lanes),
                 axis=alt.Axis(labelLimit=260, labelFontSize=12))


def _present(timeline: Timeline) -> list[str]:
    """The categories this case has, in legend order (the legend lists only what is drawn)."""
    seen = {m["what"] for p in timeline.panels for m in p.marks}
    seen |= {"lease"} if any(p.leases for p in timeline.panels) else set()
    return [c for c in CATEGORIES if c in seen]


def _legend_expr() -> str:
    # Legend labels in plain words; the keys are our own constants, never log text.
    pairs = " : ".join(f"datum.label == '{k}' ? '{v}'" for k, v in LEGEND.items())
    return f"{pairs} : datum.label"


def _legend(alt):
    return alt.Legend(orient="top", direction="horizontal", labelExpr=_legend_expr(), title=None)


def _color(alt, present: list[str]):
    return alt.Color("what:N", scale=alt.Scale(domain=present, range=[COLORS[CATEGORIES.index(c)] for c in present]),
                     legend=_legend(alt))


def _shape(alt, present: list[str]):
    return alt.Shape("what:N", scale=alt.Scale(domain=present, range=[SHAPES[CATEGORIES.index(c)] for c in present]),
                     legend=_legend(alt))


def _row(alt):
    return alt.YOffset("row:N", scale=alt.Scale(domain=["events", "sends"], paddingInner=0.1))


def _tooltip_points(alt):
    return [alt.Tooltip("what:N", title="record"), alt.Tooltip("lane:N", title="worker · incarnation"),
            alt.Tooltip("t:T", title="time (UTC)", format="%Y-%m-%d %H:%M:%S.%L", formatType="utc"),
            "recipient:N", "campaign:N", "step:N", "shard:N", "msg_id:N", "variant:N", "kind:N", "error:N",
            alt.Tooltip("lease_s:Q", title="lease (s)")]


def _tooltip_bins(alt):
    return [alt.Tooltip("what:N", title="record"), alt.Tooltip("lane:N", title="worker · incarnation"),
            alt.Tooltip("t:T", title="from (UTC)", format="%Y-%m-%d %H:%M:%S", formatType="utc"),
            alt.Tooltip("t2:T", title="to (UTC)", format="%Y-%m-%d %H:%M:%S", formatType="utc"),
            alt.Tooltip("n:Q", title="records")]


def _is_send(kind: str) -> str:
    test = "datum.what == 'send' || datum.what == 'duplicate send'"
    return test if kind == "send" else f"!({test})"


def _send_layers(alt, base, panel: Panel) -> list:
    """Ordinary sends, then sends to duplicated people on top (a bin or instant may hold both)."""
    layers = []
    for what in (SEND, DUP):
        sends = base.transform_filter(f"datum.what == '{what}'")
        if panel.mode == "points":
            layers.append(sends.mark_tick(thickness=2, size=LANE_PX * 0.4, clip=True,
                                          opacity=1.0 if what == DUP else 0.6).encode(tooltip=_tooltip_points(alt)))
        else:
            layers.append(sends.mark_rect(clip=True, height=LANE_PX * 0.4 if what == DUP else LANE_PX * 0.3).encode(
                x2="t2:T", opacity=alt.Opacity("n:Q", scale=alt.Scale(type="log", range=[0.3, 1]), legend=None),
                tooltip=_tooltip_bins(alt)))
    return layers


def _event_layer(alt, base, panel: Panel, present: list[str]):
    events = base.transform_filter(_is_send("event")).encode(shape=_shape(alt, present))
    if panel.mode == "points":
        return events.mark_point(filled=True, size=90, opacity=0.95, clip=True).encode(tooltip=_tooltip_points(alt))
    return events.mark_point(filled=True, opacity=0.9, clip=True).encode(
        size=alt.Size("n:Q", scale=alt.Scale(type="sqrt", range=[40, 240]), legend=None),
        tooltip=_tooltip_bins(alt))


class Datasets(dict):
    """Rows kept out of the altair objects (which deep-copy inline values on every step) and put in the
    spec's top-level `datasets` at the end."""

    def add(self, alt, rows: list[dict]):
        name = f"d{len(self)}"
        self[name] = rows
        return alt.Data(name=name)


def _window_layers(alt, panel: Panel, x, data: Datasets) -> list:
    # Clamped to the panel: a band or label outside the plot would push the whole layout sideways.
    rows = [{"id": w["id"], "kind": w["kind"], "label": w["label"], "stack": i % 3,
             "t": max(w["t"], panel.t_from), "t2": min(w["t2"], panel.t_to)}
            for i, w in enumerate(panel.windows)]
    if not rows:
        return []
    base = alt.Chart(data.add(alt, rows))
    band = base.mark_rect(color="#fdd835", opacity=0.22, clip=True).encode(
        x=x, x2="t2:T", tooltip=[alt.Tooltip("label:N", title="incident")])
    labels = [base.transform_filter(f"datum.stack == {k}").mark_text(
        align="left", baseline="bottom", dx=2, dy=-2 - 12 * k, fontSize=11, color="#6d5d00", clip=False).encode(
        x=x, y=alt.value(0), text="label:N") for k in range(min(3, len(rows)))]
    return [band] + (labels if len(rows) <= WINDOW_LABEL_CAP else [])


def _lease_layers(alt, panel: Panel, x, y, present: list[str], data: Datasets) -> list:
    if not panel.leases:
        return []
    rows = [{**r, "what": "lease", "row": "events"} for r in panel.leases]
    base = alt.Chart(data.add(alt, rows)).encode(x=x, y=y, yOffset=_row(alt))
    bars = base.mark_bar(height=5, opacity=0.55, clip=True).encode(
        x2="t2:T", color=_color(alt, present),
        tooltip=[alt.Tooltip("lane:N", title="worker · incarnation"), "shard:N",
                 alt.Tooltip("lease_s:Q", title="lease (s)"),
                 alt.Tooltip("t:T", title="claimed (UTC)", format="%H:%M:%S", formatType="utc"),
                 alt.Tooltip("t2:T", title="lease ends (UTC)", format="%H:%M:%S", formatType="utc")])
    labelled = [{**r, "label": r["shard"] if "shard" in r["shard"].lower() else f"shard {r['shard']}"}
                for r in rows if r.get("shard") in set(panel.label_shards)]
    if not labelled or len(labelled) > LABEL_CAP:
        return [bars]
    labels = alt.Chart(data.add(alt, labelled)).encode(x=x, y=y, yOffset=_row(alt)).mark_text(
        align="left", baseline="middle", dx=7, dy=-7, fontSize=10, color="#1f4e79", clip=True).encode(
        text=alt.Text("label:N"))
    return [bars, labels]


def _panel_chart(alt, panel: Panel, present: list[str], data: Datasets):
    x, y = _x(alt, panel), _y(alt, panel.lanes)
    base = alt.Chart(data.add(alt, panel.marks)).transform_calculate(
        row="datum.what == 'send' || datum.what == 'duplicate send' ? 'sends' : 'events'"
    ).encode(x=x, y=y, yOffset=_row(alt), color=_color(alt, present))
    frame = alt.Chart(data.add(alt, [{"t": panel.t_from}, {"t": panel.t_to}])).mark_point(opacity=0).encode(
        x=_x(alt, panel, domain=True))
    layers = [frame] + _window_layers(alt, panel, x, data) + _lease_layers(alt, panel, x, y, present, data)
    layers += _send_layers(alt, base, panel) + [_event_layer(alt, base, panel, present)]
    title = alt.Title(panel.title, anchor="start", offset=14 + 12 * min(3, len(panel.windows)), fontSize=13)
    return alt.layer(*layers).properties(title=title, width=WIDTH_PX, height=max(2, len(panel.lanes)) * LANE_PX)


def timeline_spec(timeline: Timeline, validate: bool = False) -> dict:
    """A Vega-Lite spec (data inline, built with altair): the whole case, then close-ups.

    Schema validation (altair's, with jsonschema) takes seconds on a few thousand marks; the tests
    validate, the command does not."""
    import altair as alt

    present, data = _present(timeline), Datasets()
    charts = [_panel_chart(alt, panel, present, data) for panel in timeline.panels]
    chart = alt.vconcat(*charts, spacing=28).resolve_scale(x="independent", y="independent")
    chart = chart.configure_view(stroke="#ccc").configure_axis(labelFontSize=11, titleFontSize=12)
    spec = chart.to_dict(validate=validate)
    spec["datasets"] = {**spec.get("datasets", {}), **data}
    return spec


def timeline_png(spec: dict, scale: float = 1.0) -> bytes:
    import vl_convert

    return vl_convert.vegalite_to_png(spec, scale=scale)
