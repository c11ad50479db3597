"""The report as one self-contained HTML file: opens offline, prints cleanly.

- Jinja2 with autoescape renders every value; a finalize hook also shows control, format and bidi
  characters escaped (forensics.textsafe), so `<script>` or a right-to-left override in a log line
  is text on the page, never markup or reordered text.
- The timeline is the Vega-Lite spec drawn by vega-embed, whose JavaScript (with Vega and
  Vega-Lite) is inlined from vl-convert's bundle: no CDN, no fonts to fetch. A Content-Security-
  Policy forbids the page every network request.
- The spec travels as JSON in a <script type="application/json"> element, with `<`, `>`, `&` and
  U+2028/U+2029 written as \\u escapes so log text can never close the element.
"""

from __future__ import annotations

import json
from functools import lru_cache

from forensics.textsafe import terminal_safe

# 'unsafe-eval': Vega compiles its expressions with Function(); nothing may be fetched from anywhere.
CSP = ("default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; "
       "img-src data:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'")

_JSON_IN_SCRIPT = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def json_for_script(value) -> str:
    """JSON that is inert inside a <script> element (cannot end it or open a comment)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for char, escaped in _JSON_IN_SCRIPT.items():
        text = text.replace(char, escaped)
    return text


@lru_cache(maxsize=1)
def vega_bundle() -> str:
    """vega-embed + Vega-Lite + Vega as one script, from vl-convert (no network)."""
    import vl_convert

    bundle = vl_convert.javascript_bundle()
    lowered = bundle.lower()
    if "</script" in lowered or "<!--" in bundle:
        raise RuntimeError("the Vega bundle contains a sequence that would end its <script> element")
    return bundle


def _finalize(value):
    from markupsafe import Markup

    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return terminal_safe(value)


def _pct(value) -> str:
    return "?" if value is None else f"{100 * float(value):.0f}%"


def _millis(value) -> str:
    """A bin width for people: 250 ms, 12 s, 4 min, 4.8 h."""
    seconds = (value or 0) / 1000
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _number(value) -> str:
    return "?" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:.3g}"


def _iso(value) -> str:
    from forensics.jsonfmt import iso_utc

    return iso_utc(value) if hasattr(value, "astimezone") else ("" if value is None else str(value))


@lru_cache(maxsize=1)
def _environment():
    import jinja2

    env = jinja2.Environment(autoescape=True, finalize=_finalize, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(pct=_pct, number=_number, iso=_iso, millis=_millis, joined=lambda v: ", ".join(str(x) for x in v or []))
    return env


def render_html(report, spec: dict | None) -> str:
    from markupsafe import Markup

    from forensics.report.template import TEMPLATE

    template = _environment().from_string(TEMPLATE)
    return template.render(
        r=report, csp=CSP, window=report.window,
        spec_json=Markup(json_for_script(spec)) if spec else None,
        vega_js=Markup(vega_bundle()) if spec else None,
    )
