"""The Jinja2 template of the HTML report (rendered with autoescape by forensics.report.html)."""

STYLE = """
:root { --ink: #1d2733; --muted: #5b6773; --line: #d9dee3; --dup: #d62728; --hi: #fff6c7; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--ink); margin: 0 auto; padding: 24px 32px 48px; max-width: 1120px; }
h1 { font-size: 26px; margin: 0 0 4px; } h2 { font-size: 20px; margin: 32px 0 8px; border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 0 0 6px; }
.meta, .note, figcaption { color: var(--muted); font-size: 13px; }
.incomplete { color: var(--dup); }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 130px; }
.card b { display: block; font-size: 22px; } .card.bad b { color: var(--dup); }
.incident { border: 1px solid var(--line); border-left: 5px solid var(--dup); border-radius: 6px;
            padding: 12px 16px; margin: 12px 0; break-inside: avoid; }
.kind { display: inline-block; font-size: 12px; padding: 1px 8px; border-radius: 10px; background: #f1f3f5; }
.sentence { font-size: 16px; margin: 6px 0 10px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0 0 8px; font-size: 14px; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; }
pre { background: #f6f8fa; border: 1px solid var(--line); border-radius: 4px; padding: 6px 10px;
      white-space: pre-wrap; word-break: break-all; font-size: 13px; margin: 4px 0; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td { word-break: break-word; }
#timeline { min-height: 120px; overflow-x: auto; } #timeline svg { max-width: 100%; height: auto; }
.verdict-bad { color: var(--dup); font-weight: 600; } .verdict-ok { color: #2a7a2a; font-weight: 600; }
@media print {
  body { padding: 0; max-width: none; font-size: 11pt; }
  h2 { break-after: avoid; } .incident, figure, tr { break-inside: avoid; }
  #timeline { overflow: visible; } .noprint { display: none; }
  a { color: inherit; text-decoration: none; }
}
"""

SCRIPT = """
(function () {
  var el = document.getElementById('timeline');
  var spec = JSON.parse(document.getElementById('timeline-spec').textContent);
  vegaEmbed(el, spec, {renderer: 'svg', actions: false}).then(function () {
    el.setAttribute('data-rendered', 'true');
  }).catch(function (err) {
    el.textContent = 'The timeline could not be drawn: ' + err;
    console.error(err);
  });
})();
"""

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ csp }}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="mailmortem {{ r.version }}">
<title>{{ r.title }}</title>
<style>""" + STYLE + """</style>
</head>
<body>
<header>
<h1>{{ r.title }}</h1>
{% if r.incomplete %}<p class="incomplete"><strong>{{ r.incomplete }}</strong></p>{% endif %}
<p class="meta">Generated {{ r.generated_at }} by mailmortem {{ r.version }} from {{ r.inputs|length }} input file(s):
{{ r.logs_arg }}.{% if window[0] %} Duplicates between {{ window[0] }} and {{ window[1] }}.{% endif %}</p>
</header>

<section id="summary">
<div class="cards">
<div class="card bad"><b>{{ r.summary.duplicated_people|number }}</b>people hit</div>
<div class="card bad"><b>{{ r.summary.extra_sends|number }}</b>extra sends</div>
<div class="card"><b>{{ r.incidents|length }}</b>incident(s)</div>
<div class="card"><b>{{ r.summary.sends|number }}</b>sends in the logs</div>
<div class="card"><b>{{ r.summary.people|number }}</b>people emailed</div>
</div>
{% for note in r.notes %}<p class="note">Note: {{ note }}</p>{% endfor %}
</section>

<section id="incidents">
<h2>What happened</h2>
{% if not r.incidents and r.incomplete %}
<p>No duplicate sends were found among the records read, but evidence was lost (see the top).</p>
{% elif not r.incidents %}
<p>No duplicate sends were found in these logs: no one received the same campaign step twice.</p>
{% endif %}
{% for i in r.incidents %}
<article class="incident" id="{{ i.id }}">
<h3>{{ i.id }} <span class="kind">{{ i.kind }}</span> confidence {{ i.confidence|pct }}</h3>
<p class="sentence">{{ i.sentence }}</p>
<dl class="facts">
<dt>People hit</dt><dd>{{ i.people|number }}</dd>
<dt>Extra sends</dt><dd>{{ i.extra_sends|number }}</dd>
<dt>Window</dt><dd>{{ i.first_send }} → {{ i.last_send }}</dd>
<dt>Campaign / step</dt><dd>{{ i.campaign }} / {{ i.step }}{% if i.test_id %} (test {{ i.test_id }}){% endif %}</dd>
<dt>Workers</dt><dd>{{ i.workers|joined }}</dd>
{% if i.shards %}<dt>Shards</dt><dd>{{ i.shards|joined }}</dd>{% endif %}
</dl>
<b>Evidence</b>
<ul class="evidence">{% for line in i.evidence %}<li>{{ line }}</li>{% endfor %}</ul>
<b>Next steps</b>
<ol class="steps"><li>{{ i.fix }}</li>{% for c in i.commands %}<li><pre><code>{{ c }}</code></pre></li>{% endfor %}</ol>
</article>
{% endfor %}
</section>

<section id="timeline-section">
<h2>Timeline</h2>
{% if spec_json %}
<figure>
<div id="timeline" role="img" aria-label="Timeline of sends, claims, lease expiries and restarts per worker"></div>
<figcaption>One lane per worker and incarnation (worker · pid/container). Upper row of a lane: claims (with their
lease drawn as a bar), renewals, releases, expiries, restarts and errors; lower row: sends, in red when the person
got a duplicate. Shaded bands are the incidents' windows.
Hover a mark for its details.
{% for p in r.timeline.panels %}{% if p.mode == 'bins' %} {{ p.title }}: {{ p.records|number }} records counted per lane
in bins of {{ p.bin_ms|millis }}; a darker or larger mark means more records.{% endif %}
{% if p.folded_lanes %} {{ p.title }}: the {{ p.folded_lanes }} quietest lanes are folded into one.{% endif %}
{% if p.leases_capped %} {{ p.title }}: only the first {{ p.leases|length }} leases are drawn.{% endif %}{% endfor %}
</figcaption>
<noscript><p>The timeline needs JavaScript (it is embedded in this file; nothing is downloaded).
`mailmortem report … --format md` embeds it as an image.</p></noscript>
</figure>
{% else %}
<p>No timed records to draw.</p>
{% endif %}
</section>

{% if r.ab_tests %}
<section id="ab">
<h2>A/B test{{ 's' if r.ab_tests|length > 1 }}</h2>
{% for t in r.ab_tests %}
<h3>Test {{ t.test_id }}</h3>
<p>{{ t.contaminated|number }} of {{ t.units|number }} people ({{ t.contamination_rate|pct }}) received more than one
variant and must be excluded from the analysis.
{% if t.srm %}Sample-ratio check on the clean people: χ² = {{ '%.2f'|format(t.srm.chi2) }}, p = {{ '%.3g'|format(t.srm.p_value) }}:
{% if t.srm.mismatch %}<span class="verdict-bad">sample ratio mismatch</span> (p &lt; {{ t.srm.alpha }}); do not trust this test's result.
{% else %}<span class="verdict-ok">no sample ratio mismatch</span> at α = {{ t.srm.alpha }}.{% endif %}
{% if t.srm.small_sample %} (Small sample: fewer than 5 people expected in an arm.){% endif %}
{% else %}Sample-ratio check: not testable (fewer than two arms with clean people).{% endif %}</p>
<table class="arms">
<thead><tr><th>arm</th><th class="num">people (all)</th><th class="num">people (clean)</th><th class="num">expected clean</th><th class="num">sends</th></tr></thead>
<tbody>{% for a in t.arms %}<tr><td>{{ a.variant }}</td><td class="num">{{ a.units_all|number }}</td><td class="num">{{ a.units_clean|number }}</td>
<td class="num">{{ a.expected_clean|number }}</td><td class="num">{{ a.sends|number }}</td></tr>{% endfor %}</tbody>
</table>
<pre><code>mailmortem ab-contamination --test-id {{ t.test_id }} {{ r.logs_arg }} --format csv -o ab-exclusions.csv</code></pre>
{% endfor %}
</section>
{% endif %}

{% if r.reconciliation %}
<section id="reconciliation">
<h2>Provider reconciliation</h2>
<table><tbody>{% for key, value in r.reconciliation.items() %}{% if value is not mapping and (value is string or value is number or value is none) %}
<tr><th>{{ key }}</th><td>{{ value }}</td></tr>{% endif %}{% endfor %}</tbody></table>
</section>
{% endif %}

<section id="affected">
<h2>Affected people</h2>
{% if r.affected %}
<p>{% if r.affected_total > r.affected|length %}The first {{ r.affected|length }} of {{ r.affected_total|number }} people.
{% else %}All {{ r.affected_total|number }} people.{% endif %} Export the full list (for an apology or an exclusion list):</p>
<pre><code>{{ r.export_command }}</code></pre>
<table class="people">
<thead><tr><th>recipient</th><th>campaign</th><th>step</th><th>incident</th><th>kind</th><th class="num">sends</th><th>workers</th><th>variants</th><th>first send</th><th>last send</th></tr></thead>
<tbody>
{% for p in r.affected %}<tr><td>{{ p.recipient }}</td><td>{{ p.campaign }}</td><td>{{ p.step }}</td><td>{{ p.incident }}</td><td>{{ p.kind }}</td>
<td class="num">{{ p.sends }}</td><td>{{ p.workers|joined }}</td><td>{{ p.variants|joined }}</td><td>{{ p.first_send|iso }}</td><td>{{ p.last_send|iso }}</td></tr>
{% endfor %}</tbody>
</table>
{% else %}
<p>Nobody.</p>
{% endif %}
</section>

<section id="inputs">
<h2>Inputs</h2>
<table>
<thead><tr><th>file</th><th>syntax</th><th class="num">lines</th><th class="num">records</th><th class="num">skipped</th><th>first skipped lines</th></tr></thead>
<tbody>{% for f in r.inputs %}<tr><td>{{ f.path }}</td><td>{{ f.syntax }}</td><td class="num">{{ f.lines|number }}</td><td class="num">{{ f.records|number }}</td>
<td class="num">{{ f.skipped|number }}</td><td>{{ f.first_skipped_lines|joined }}</td></tr>{% endfor %}</tbody>
</table>
</section>

{% if spec_json %}
<script type="application/json" id="timeline-spec">{{ spec_json }}</script>
<script>{{ vega_js }}</script>
<script>""" + SCRIPT + """</script>
{% endif %}
</body>
</html>
"""
