"""The postmortem report: model, escaping, binning, and the HTML in a real headless Chromium."""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.ingest.case import load_case
from forensics.report.model import build_report, render
from forensics.report.html import json_for_script
from forensics.report.markdown import code_block, md_text
from forensics.report.timeline import MARK_CAP, bin_width_ms
from forensics.simulate.run import KINDS

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "tests" / "artifacts"
XSS = "<script>alert(1)</script>"
BASE = dt.datetime(2026, 11, 28, 9, 0, tzinfo=dt.timezone.utc)


def _ts(seconds: float) -> str:
    return (BASE + dt.timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _send(t, worker, pid, email, n, campaign="c-42", extra=""):
    return (f"{_ts(t)} event=send worker={worker} pid={pid} campaign={campaign} step=1 email={email} "
            f"msg_id=<m{n}@x>{extra}")


def hostile_case(path: Path) -> Path:
    """Two workers on one list, a lease that ran out on shard 7, and log text that is HTML/JS."""
    lines, n = [], 0
    for i in range(12):
        lines += [_send(i * 10, "w-a", 11, f"p{i}@acme.com", n := n + 1), _send(i * 10 + 3, "w-b", 12, f"p{i}@acme.com", n := n + 1)]
    lines.append(f"{_ts(300)} event=claim worker=w-c pid=21 shard=7 lease=60s")
    lines.append(f"{_ts(400)} event=claim worker=w-d pid=31 shard=7 lease=60s")
    for i in range(6):
        lines += [_send(310 + i * 5, "w-c", 21, f"q{i}@acme.com", n := n + 1, "c-9", " shard=7"),
                  _send(405 + i * 5, "w-d", 31, f"q{i}@acme.com", n := n + 1, "c-9", " shard=7")]
    lines.append(f'{_ts(500)} event=error worker=w-e pid=41 email=x@y.z error="{XSS}"')
    lines += [_send(510, "w-e", 41, f'"{XSS}@evil.com"', n := n + 1, "c-x"),
              _send(560, "w-e", 41, f'"{XSS}@evil.com"', n := n + 1, "c-x")]
    path.write_text("\n".join(sorted(lines)) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    return hostile_case(tmp_path_factory.mktemp("hostile") / "mail-send.log")


@pytest.fixture(scope="module")
def hostile_report(hostile):
    case = load_case([str(hostile)])
    return build_report(case, [str(hostile)], now=BASE)


def _case_dirs(tmp_path_factory) -> dict[str, Path]:
    """sample_logs/<kind>/ when present, else the simulator's cases of every kind."""
    samples = REPO / "sample_logs"
    found = {p.name: p for p in sorted(samples.iterdir()) if p.is_dir()} if samples.is_dir() else {}
    if found:
        return found
    from forensics.simulate.run import simulate

    root = tmp_path_factory.mktemp("sim")
    return {kind: simulate(kind, 200, root / kind, seed=7).files[0].parent for kind in KINDS}


# --- the model -----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_each_incident_gets_one_sentence_with_people_extra_sends_window_and_confidence(hostile_report):
    kinds = {i["kind"]: i for i in hostile_report.incidents}
    assert {"parallel-worker", "lease-expiry"} <= set(kinds)
    parallel = kinds["parallel-worker"]
    assert parallel["sentence"].startswith("Workers w-a, w-b worked campaign c-42 step 1 at the same time")
    assert "12 people got duplicates (12 extra sends)" in parallel["sentence"]
    assert parallel["first_send"] in parallel["sentence"] and "confidence" in parallel["sentence"]
    assert "shard 7" in kinds["lease-expiry"]["sentence"]


def test_next_step_commands_name_the_logs_that_were_read(hostile_report, hostile):
    commands = [c for i in hostile_report.incidents for c in i["commands"]]
    assert any(c.startswith(f"mailmortem affected {hostile} --incident INC-") for c in commands)
    assert not any("<logs>" in c for c in commands)
    assert hostile_report.export_command == f"mailmortem affected {hostile} --format csv -o apology-exclusions.csv"


@pytest.mark.slow
def test_affected_list_stops_at_100_and_counts_everyone(tmp_path):
    lines = [_send(i, w, 1, f"p{i}@acme.com", f"{w}{i}") for i in range(150) for w in ("w-a", "w-b")]
    path = tmp_path / "big.log"
    path.write_text("\n".join(sorted(lines)) + "\n")
    report = build_report(load_case([str(path)]), [str(path)])
    assert len(report.affected) == 100 and report.affected_total == 150
    page = render(report, "html")
    assert "The first 100 of 150 people." in page and html.escape(report.export_command) in page


@pytest.mark.slow
def test_a_case_without_duplicates_says_so(tmp_path):
    path = tmp_path / "clean.log"
    path.write_text("\n".join(_send(i, "w-a", 1, f"p{i}@acme.com", i) for i in range(5)) + "\n")
    report = build_report(load_case([str(path)]), [str(path)])
    assert report.incidents == [] and report.affected_total == 0
    page = render(report, "html")
    assert "No duplicate sends were found in these logs" in page and 'id="timeline-spec"' in page
    assert "No duplicate sends were found in these logs." in render(report, "md")


@pytest.mark.slow
def test_lifecycle_lines_without_an_incarnation_join_the_lane_of_the_running_one(tmp_path):
    lines = [_send(0, "w-a", 1, "a@x.co", 1), f"{_ts(10)} event=claim worker=w-a shard=3 lease=30",
             f"{_ts(20)} event=start worker=w-a pid=2", _send(30, "w-a", 2, "b@x.co", 2),
             f"{_ts(40)} event=renew worker=w-a shard=3 lease=30"]
    path = tmp_path / "restart.log"
    path.write_text("\n".join(lines) + "\n")
    overview = build_report(load_case([str(path)]), [str(path)]).timeline.panels[0]
    assert overview.lanes == ["w-a · 1", "w-a · 2"]
    assert [(m["what"], m["lane"]) for m in overview.marks] == [
        ("send", "w-a · 1"), ("claim", "w-a · 1"), ("start", "w-a · 2"), ("send", "w-a · 2"), ("renew", "w-a · 2")]


@pytest.mark.slow
def test_each_drawn_send_shows_its_own_files_details(tmp_path):
    # two files with sends on the same line numbers: a mark's details come from its own file and line
    first, second = tmp_path / "w-a.log", tmp_path / "w-b.log"
    first.write_text(_send(0, "w-a", 1, "a@x.co", 1) + "\n" + _send(10, "w-a", 1, "b@x.co", 2) + "\n")
    second.write_text(_send(5, "w-b", 2, "a@x.co", 3) + "\n" + _send(15, "w-b", 2, "c@x.co", 4) + "\n")
    overview = build_report(load_case([str(first), str(second)]), [str(first), str(second)]).timeline.panels[0]
    assert [(m["lane"], m["what"], m["recipient"], m["msg_id"]) for m in overview.marks] == [
        ("w-a · 1", "duplicate send", "a@x.co", "m1@x"), ("w-b · 2", "duplicate send", "a@x.co", "m3@x"),
        ("w-a · 1", "send", "b@x.co", "m2@x"), ("w-b · 2", "send", "c@x.co", "m4@x")]


@pytest.mark.slow
def test_large_cases_are_binned_into_at_most_mark_cap_marks(tmp_path):
    # 4 workers × 12,000 sends, half of them duplicates: far beyond what a chart should draw point by point.
    lines = [_send(i * 0.5 + k, f"w-{k}", 100 + k, f"p{i % 24000}@acme.com", f"{k}-{i}") for k in range(4)
             for i in range(12000)]
    path = tmp_path / "large.log"
    path.write_text("\n".join(sorted(lines)) + "\n")
    report = build_report(load_case([str(path)]), [str(path)])
    overview = report.timeline.panels[0]
    assert overview.mode == "bins" and overview.records == 48000
    assert report.timeline.marks <= MARK_CAP
    assert sum(m["n"] for m in overview.marks) == 48000  # every record counted once
    assert {m["what"] for m in overview.marks} == {"duplicate send"}
    page = render(report, "html")
    assert len(page.encode()) < 3_000_000


@pytest.mark.slow
def test_timeline_spec_is_valid_vega_lite_with_lanes_per_worker_and_incarnation(hostile_report):
    from forensics.report.chart import timeline_spec

    spec = timeline_spec(hostile_report.timeline, validate=True)  # altair checks it against the schema
    overview = hostile_report.timeline.panels[0]
    assert overview.lanes == ["w-a · 11", "w-b · 12", "w-c · 21", "w-d · 31", "w-e · 41"]
    whats = {m["what"] for m in overview.marks}
    assert whats == {"duplicate send", "claim", "error"}  # every send in this case went to a duplicated person
    assert [lease["shard"] for lease in overview.leases] == ["7", "7"]
    assert overview.leases[0]["t2"] - overview.leases[0]["t"] == 60_000
    assert sum(len(rows) for rows in spec["datasets"].values()) >= len(overview.marks)


@given(st.integers(1, 10**11), st.integers(1, 400), st.integers(400, MARK_CAP))
def test_bin_width_keeps_the_mark_budget(span, pairs, budget):
    width = bin_width_ms(span, pairs, budget)
    bins = span // width + 1  # records at both ends of the span fall in bins 0 .. span // width
    assert bins * pairs <= max(budget, pairs)


@pytest.mark.slow
def test_ab_section_shows_arms_contamination_and_srm_verdict(tmp_path):
    lines, n = [], 0
    for i in range(40):
        variant = "A" if i % 2 else "B"
        lines.append(_send(i * 3, "w-f", 51, f"p{i}@acme.com", n := n + 1, "c-ab", f" test_id=subj-1 variant={variant}"))
    for i in range(8):  # re-sent with the other variant after a restart
        variant = "B" if i % 2 else "A"
        lines.append(_send(600 + i * 3, "w-f", 52, f"p{i}@acme.com", n := n + 1, "c-ab", f" test_id=subj-1 variant={variant}"))
    path = tmp_path / "ab.log"
    path.write_text("\n".join(sorted(lines)) + "\n")
    report = build_report(load_case([str(path)]), [str(path)])
    [test] = report.ab_tests
    assert test["test_id"] == "subj-1" and test["contaminated"] == 8 and test["units"] == 40
    page = render(report, "html")
    assert "Test subj-1" in page and "no sample ratio mismatch" in page
    assert "8 of 40 people (20%) received more than one" in page


@pytest.mark.slow
def test_provider_export_is_reconciled(hostile):
    export = REPO / "tests" / "fixtures" / "providers" / "sendgrid-events.jsonl"
    report = build_report(load_case([str(hostile)]), [str(hostile)], exports=[str(export)])
    # the provider's sends are not in this log, and none of the log's is at the provider
    missing = report.reconciliation["provider sends not in log"]
    assert missing > 0 and report.reconciliation["log sends not at provider"] == report.summary["sends"]
    assert "Provider reconciliation" in render(report, "html")
    assert f"| provider sends not in log | {missing} |" in render(report, "md")


# --- escaping ------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_log_text_is_escaped_in_the_html(hostile_report):
    page = render(hostile_report, "html")
    body, _, scripts = page.partition('<script type="application/json"')
    assert "<script" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;@evil.com" in body
    assert len(re.findall(r"<script\b", page)) == 3  # the spec, the Vega bundle, the embed call
    assert XSS not in scripts  # inside the JSON too, `<` is \u003c


@pytest.mark.slow
def test_log_text_is_escaped_in_markdown(hostile_report):
    text = render(hostile_report, "md")
    assert "<script" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;@evil.com" in text


@pytest.mark.slow
def test_bidi_and_control_characters_are_shown_escaped(tmp_path):
    path = tmp_path / "bidi.log"
    path.write_text("\n".join(sorted([_send(0, "w-a", 1, "a@x.co", 1, "c-\u202eevil"),
                                      _send(5, "w-b", 2, "a@x.co", 2, "c-\u202eevil")])) + "\n")
    report = build_report(load_case([str(path)]), [str(path)])
    for fmt in ("html", "md"):
        text = render(report, fmt)
        body = text.split('<script type="application/json"')[0]
        assert "\u202e" not in body and "\\u202e" in body


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=12))
def test_json_for_script_is_inert_in_a_script_element_and_round_trips(value):
    text = json_for_script(value)
    assert "<" not in text and ">" not in text and "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == value


@given(st.text())
def test_md_text_never_lets_markup_through(value):
    out = md_text(value)
    assert "<" not in out and ">" not in out and "\n" not in out and "\x1b" not in out
    assert not re.search(r"(?<!\\)[|`\[\]*_]", out.replace("\\\\", ""))


@given(st.text())
def test_code_block_fence_is_longer_than_any_backtick_run(value):
    block = code_block(value)
    fence = block.split("sh\n", 1)[0]
    assert block.endswith("\n" + fence) and fence * 1 not in block[len(fence):-len(fence)]


# --- the HTML in a real browser --------------------------------------------------------------------------

class DevTools:
    """Just enough of the WebSocket protocol (RFC 6455, client side) to speak the DevTools protocol."""

    def __init__(self, url: str):
        hostport, _, path = url.removeprefix("ws://").partition("/")
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert b" 101 " in head.split(b"\r\n")[0], head
        self.events: list[dict] = []
        self.next_id = 0

    def _send(self, text: str) -> None:
        data, mask = text.encode(), os.urandom(4)
        size = len(data)
        length = (bytes([0x80 | size]) if size < 126 else bytes([0x80 | 126]) + struct.pack(">H", size)
                  if size < 65536 else bytes([0x80 | 127]) + struct.pack(">Q", size))
        self.sock.sendall(bytes([0x81]) + length + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def _exactly(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("DevTools connection closed")
            buf += chunk
        return buf

    def _receive(self) -> dict:
        message = b""
        while True:
            first, second = self._exactly(2)
            size = second & 0x7F
            size = struct.unpack(">H", self._exactly(2))[0] if size == 126 else (
                struct.unpack(">Q", self._exactly(8))[0] if size == 127 else size)
            payload = self._exactly(size)
            if first & 0x0F in (0x0, 0x1):
                message += payload
                if first & 0x80:
                    return json.loads(message)

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self._send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = self._receive()
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return message["result"]
            self.events.append(message)

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1200,900")


@pytest.fixture(scope="module")
def browser():
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    profile = tempfile.mkdtemp(prefix="mm-chromium-")
    proc = subprocess.Popen([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0",
                             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield _devtools_port(proc, Path(profile))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a busy machine: it still goes, only later
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)


def _devtools_port(proc, profile: Path) -> int:
    port_file, deadline = profile / "DevToolsActivePort", time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if port_file.exists() and len(port_file.read_text().splitlines()) >= 2:
            return int(port_file.read_text().splitlines()[0])
        time.sleep(0.05)
    pytest.fail("chromium did not open its DevTools port")


TIMELINE_STATE = """(function () {
  var el = document.getElementById('timeline'), svg = el && el.querySelector('svg');
  if (!svg || el.getAttribute('data-rendered') !== 'true') return null;
  var box = svg.getBoundingClientRect();
  return {width: box.width, height: box.height,
          marks: svg.querySelectorAll('.mark-tick path, .mark-symbol path, .mark-rect path, .mark-tick line').length,
          scripts: document.querySelectorAll('script').length};
})()"""


def open_in_chromium(port: int, page: Path, screenshot: Path) -> tuple[dict, list[dict]]:
    """Load the page, wait for the timeline, save a screenshot; return its state and the page's events."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
    target = json.load(urllib.request.urlopen(request, timeout=30))
    tools = DevTools(target["webSocketDebuggerUrl"])
    for domain in ("Runtime", "Log", "Network", "Page"):
        tools.call(f"{domain}.enable")
    tools.call("Page.navigate", url=page.resolve().as_uri())
    state, deadline = None, time.time() + 120
    while state is None and time.time() < deadline:
        state = tools.evaluate(TIMELINE_STATE)
        time.sleep(0.1) if state is None else None
    _screenshot(tools, screenshot)
    tools.call("Page.close")
    return state, tools.events


def _screenshot(tools: DevTools, path: Path) -> None:
    box = tools.evaluate("(function(){var b=document.getElementById('timeline-section').getBoundingClientRect();"
                         "return {x:b.x+window.scrollX,y:b.y+window.scrollY,width:b.width,height:b.height};})()")
    clip = {**box, "scale": 1} if box else None
    shot = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                      **({"clip": clip} if clip else {}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))


def _problems(events: list[dict], page: Path) -> tuple[list[str], list[str]]:
    errors, requests = [], []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert", "warning"):
            errors.append(json.dumps(params.get("args"))[:300])
        elif method == "Runtime.exceptionThrown":
            errors.append(json.dumps(params.get("exceptionDetails"))[:300])
        elif method == "Log.entryAdded" and params["entry"]["level"] in ("error", "warning"):
            errors.append(params["entry"]["text"][:300])
        elif method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if url != page.resolve().as_uri() and not url.startswith("data:"):
                requests.append(url)
    return errors, requests


def _check_page(port: int, page: Path, name: str) -> dict:
    state, events = open_in_chromium(port, page, ARTIFACTS / f"report-{name}.png")
    errors, requests = _problems(events, page)
    assert not errors, f"{name}: console errors {errors}"
    assert not requests, f"{name}: the page asked the network for {requests}"
    assert state is not None, f"{name}: the timeline was not drawn"
    assert state["width"] > 500 and state["height"] > 100 and state["marks"] > 0, state
    return state


@pytest.fixture(scope="module")
def artifacts_dir():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    ignore = ARTIFACTS / ".gitignore"
    if not ignore.exists():
        ignore.write_text("*\n")
    return ARTIFACTS


@pytest.mark.slow
def test_every_case_renders_in_headless_chromium(browser, tmp_path_factory, artifacts_dir):
    out = tmp_path_factory.mktemp("pages")
    for name, folder in _case_dirs(tmp_path_factory).items():
        report = build_report(load_case([str(folder)]), [str(folder)])
        page = out / f"{name}.html"
        page.write_text(render(report, "html"), encoding="utf-8")
        _check_page(browser, page, name)
        assert (artifacts_dir / f"report-{name}.png").stat().st_size > 10_000


@pytest.mark.slow
def test_hostile_log_text_stays_text_in_the_browser(browser, hostile_report, tmp_path, artifacts_dir):
    page = tmp_path / "hostile.html"
    page.write_text(render(hostile_report, "html"), encoding="utf-8")
    state = _check_page(browser, page, "hostile")
    assert state["scripts"] == 3  # no element came from log text


@pytest.mark.slow
def test_a_report_over_lost_evidence_says_so_first_and_never_says_no_duplicates(tmp_path):
    log = tmp_path / "mail-send.log"
    lines = [_send(0, "w-a", 11, "p0@acme.com", 1), _send(5, "w-a", 11, "p1@acme.com", 2),
             _send(9, "w-b", 12, "p0@acme.com", 3)[:60]]  # the second send to p0, cut off by a crash
    log.write_text("\n".join(lines), encoding="utf-8")
    report = build_report(load_case([str(log)]), [str(log)], now=BASE)
    assert report.incomplete == (f"INCOMPLETE: 1 skipped line(s) look like mail-send records ({log}:3). "
                                 "Duplicates among them cannot be seen.")
    markdown = render(report, "md")
    assert markdown.splitlines()[2] == f"**{md_text(report.incomplete)}**"
    assert "No duplicate sends were found in these logs" not in markdown
    page = render(report, "html")
    assert page.index("INCOMPLETE: 1 skipped line(s)") < page.index('id="summary"')
    assert "No duplicate sends were found in these logs" not in page
