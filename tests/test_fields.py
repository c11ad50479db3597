"""Field mapping and syntax detection: the small parsers in front of ingest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forensics.ingest.detect import detect_syntax
from forensics.errors import ConfigError
from forensics.ingest.fields import CANONICAL, FieldMap, load_config, parse_overrides


def test_overrides_replace_the_default_aliases():
    fm = FieldMap(parse_overrides(["recipient=To Address"]))
    assert fm.canonical_of("to address") == "recipient"
    assert fm.canonical_of("email") is None  # only the named key feeds recipient now
    assert fm.canonical_of("msg_id") == "msg_id"


def test_nested_json_keys_fall_back_on_their_last_segment():
    resolved = FieldMap().resolve(["mail.to", "mail.subject", "timestamp", "email"])
    assert resolved["recipient"] == ["email", "mail.to"] and resolved["ts"] == ["timestamp"]


@given(st.text(max_size=40))
def test_parse_overrides_accepts_or_refuses_with_a_config_error(text):
    try:
        result = parse_overrides([text])
    except ConfigError as exc:
        assert str(exc).startswith("--field")
    else:
        [(canon, name)] = result.items()
        assert canon in CANONICAL and name == name.strip() and name


def test_config_file_errors_are_one_line(tmp_path):
    (tmp_path / "bad.toml").write_text("[fields\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path / "bad.toml")
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.toml")


@pytest.mark.parametrize("text,syntax", [
    ('{"ts": "2026-11-28T09:00:00Z", "event": "send"}\n', "jsonl"),
    ("ts,event,email,msg_id\n2026-11-28T09:00:00Z,send,a@b.c,m\n", "csv"),
    ("2026-11-28T09:00:00Z event=send email=a@b.c msg_id=m\n", "logfmt"),
    ("just some prose\nwith no structure\n", None),
])
def test_detect_syntax(text, syntax):
    assert detect_syntax(text.encode()) == syntax


@given(st.binary(max_size=2000))
def test_detect_syntax_never_crashes(data):
    assert detect_syntax(data) in (None, "logfmt", "jsonl", "csv")


def test_the_known_event_values_are_what_ingest_maps():
    """forensics.ingest.fields.KNOWN_EVENT_VALUES (what inference leaves alone) is mm_known_event's table."""
    import duckdb

    import queries
    from forensics.ingest.fields import KNOWN_EVENT_VALUES

    con = duckdb.connect()
    queries.script(con, "ingest_macros")
    for value, event in KNOWN_EVENT_VALUES.items():
        assert con.execute("SELECT mm_known_event(?)", [value]).fetchone()[0] == event, value


def test_event_mappings_are_read_from_options_and_the_config(tmp_path):
    from forensics.errors import ConfigError
    from forensics.ingest.fields import parse_event_overrides

    assert parse_event_overrides(['send="Outreach Email Sent"']) == {"outreach email sent": "send"}
    with pytest.raises(ConfigError, match="unknown event 'sned'"):
        parse_event_overrides(["sned=x"])
    config = tmp_path / "m.toml"
    config.write_text('[fields]\nstep = "seq"\n[events]\nsend = ["A", "b"]\nstart = "boot up"\n', encoding="utf-8")
    read = load_config(config)
    assert read.fields == {"step": "seq"} and read.events == {"a": "send", "b": "send", "boot up": "start"}


# The compiled readers fill the fields by position: they take the field table from Python at import and refuse one
# other than the table they were built for, so a reordered, renamed or extended CANONICAL never fills the wrong
# column silently.
from forensics.ingest.readers import runtime  # noqa: E402

_COMPILED = [m for m in (runtime.BUILT["logfmt"], runtime.BUILT["jsonl"]) if m is not None]


@pytest.mark.skipif(not _COMPILED, reason="the compiled readers were not built")
@pytest.mark.parametrize("table", [CANONICAL[::-1], CANONICAL[:-1], (*CANONICAL, "region"),
                                   tuple("to" if name == "recipient" else name for name in CANONICAL)],
                         ids=["reordered", "shorter", "longer", "renamed"])
def test_a_compiled_reader_refuses_a_field_table_it_was_not_built_for(table):
    for module in _COMPILED:
        try:
            with pytest.raises(ImportError, match=r"built for the canonical fields .*rebuild it"):
                module.configure(table)
            with pytest.raises(RuntimeError, match="field table was not configured"):
                (module.tokenize_lines(b"", b"\0\0\0\0", []) if module is runtime.BUILT["logfmt"]
                 else module.read_lines(b"", b"\0\0\0\0", [], 0, [], []))
        finally:
            module.configure(CANONICAL)


@pytest.mark.skipif(not _COMPILED, reason="the compiled readers were not built")
def test_a_disagreeing_field_table_leaves_the_readers_uninstalled():
    import subprocess
    import sys

    code = ("import forensics.ingest.fields as f; f.CANONICAL = f.CANONICAL[1:] + f.CANONICAL[:1]\n"
            "from forensics.ingest.readers import runtime as r\n"
            "print(r.BUILT['logfmt'], r.BUILT['jsonl'], r.describe('logfmt'), r.describe('jsonl'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split(None, 2)[:2] == ["None", "None"] and "SQL (no compiled tokenizer)" in out
