"""The readers' fuzz harness (tests/fuzz_readers.py, which .ci/sanitized runs on the sanitizer build): its cases
cover every syntax and envelope and are the same for a seed whatever ran before, and a difference between the
paths or an exception is a finding kept with its case, which --replay reads again."""

from __future__ import annotations

import json

from forensics.simulate.envelopes import DOCUMENTS, JSON_ONLY, LOGFMT_ONLY, NAMES
from tests import fuzz_readers


def test_the_cases_take_every_syntax_and_envelope_in_turn():
    forms = fuzz_readers.triples()
    assert len(set(forms)) == len(forms)
    for syntax, shut_out in (("logfmt", JSON_ONLY), ("jsonl", LOGFMT_ONLY)):
        assert {n for s, n, document in forms if s == syntax and not document} == {None, *NAMES} - set(shut_out)
        assert {n for s, n, document in forms if s == syntax and document} == set(DOCUMENTS)


def test_a_case_is_the_same_for_its_seed_whatever_ran_before():
    lines = fuzz_readers.corpus()
    later = fuzz_readers.make_case(7, 45, lines)
    for index in range(5):
        fuzz_readers.make_case(7, index, lines)
    again = fuzz_readers.make_case(7, 45, lines)
    assert again.body == later.body and again.mutations == later.mutations and again.envelope == later.envelope
    assert fuzz_readers.make_case(8, 45, lines).body != later.body


def test_a_difference_between_the_paths_is_a_finding_kept_with_its_case(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(fuzz_readers, "read", lambda path, name, *rest: ([name], [], [], []))
    assert fuzz_readers.main(["--seed", "3", "--cases", "2", "--out", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "fuzz_readers: seed 3, 2 cases (2 of 42 syntax/envelope forms)" in out and ", 2 findings" in out
    kept = tmp_path / "seed-3-case-1"
    assert f"FINDING {kept}: compiled differs from sql: events" in err
    meta = json.loads((kept / "meta.json").read_text())
    assert (kept / meta["file"]).read_bytes() == fuzz_readers.make_case(3, 1, fuzz_readers.corpus()).body
    assert meta["findings"][0].startswith("compiled differs from sql: events")
    assert not (tmp_path / "pending").exists()
    assert fuzz_readers.main(["--replay", str(kept)]) == 1
    assert "compiled differs from sql: events" in capsys.readouterr().out


def test_an_exception_on_either_path_is_a_finding(tmp_path, monkeypatch):
    def read(path, name, *rest):
        if name == "c":
            raise ValueError("offsets: not ascending")
        return [], [], [], []

    monkeypatch.setattr(fuzz_readers, "read", read)
    figures = fuzz_readers.fuzz(5, 1, tmp_path)
    assert figures["findings"] == {"seed-5-case-0": ["compiled raised ValueError: offsets: not ascending"]}
