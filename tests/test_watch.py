"""forensics.watch as a library: a simulated incident replayed through the watch chunk by chunk says what
diagnose says of the finished files; hooks; the follower's bookkeeping."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from forensics.ingest.case import load_case
from forensics.findings import build_document
from forensics.simulate.run import simulate
from forensics.watch.follow import Follower, Pace
from forensics.watch.hooks import Hooks, payload_people, split_command
from forensics.watch.run import Ending, Plan, Watch
from forensics.watch.state import Options, State


def _replayed(sim_files: list[Path], into: Path, parts: int, reopen_every: float = 300.0):
    """The watch over empty copies of the files, then each file's lines appended in `parts` pieces, a poll after
    each piece (as a writer at speed would leave them), then the end of the watch."""
    into.mkdir()
    texts = {f.name: f.read_bytes().splitlines(keepends=True) for f in sim_files}
    for name in texts:
        (into / name).write_bytes(b"")
    events: list[dict] = []
    watch = Watch(Follower([str(into)], from_start=False), State(Options()),
                  Plan(kind_every=1e9, reopen_every=reopen_every), events.append)
    for part in range(parts):
        for name, lines in texts.items():
            size = -(-len(lines) // parts)
            with open(into / name, "ab") as handle:
                handle.write(b"".join(lines[part * size:(part + 1) * size]))
        watch.step(time.monotonic())
    watch.finish(Ending(0, "replayed"))
    return events


@pytest.mark.slow
@pytest.mark.parametrize("kind, reopen_every", [("mixed", 300.0), ("lease-expiry", 300.0), ("mixed", 0.0)])
def test_a_replayed_incident_reports_the_people_and_kinds_diagnose_finds_in_the_finished_files(tmp_path, kind,
                                                                                               reopen_every):
    """Also with the state's database opened again after every poll (reopen_every=0)."""
    sim = simulate(kind, 40, tmp_path / "sim", seed=3)
    events = _replayed(sim.files, tmp_path / "live", parts=5, reopen_every=reopen_every)
    kinds = {}
    for event in events:
        if event["event"] == "kind":
            kinds[(event["campaign"] or "", event["step"] or "", event["recipient"])] = event["kind"]
    people = {(e["campaign"] or "", e["step"] or "", e["recipient"]) for e in events if e["event"] == "duplicate"}
    case = load_case([str(f) for f in sim.files])
    document = build_document(case)
    found = {(p["campaign"] or "", p["step"] or "", p["recipient"]): p["kind"] for p in document["affected"]}
    assert people == set(found) and len(people) == document["summary"]["duplicated_people"] > 0
    assert kinds == found


def test_a_hook_is_run_without_a_shell_with_the_event_on_stdin_and_its_failure_is_reported(tmp_path):
    out = tmp_path / "got.json"
    script = f"import sys; open({str(out)!r}, 'w').write(sys.stdin.read()); sys.exit(2)"
    reported = []
    hooks = Hooks(split_command(f"{sys.executable} -c {json.dumps(script)}"), None, reported.append)
    hooks.add({"event": "duplicate", "recipient": "$(id)@example.com; rm -rf ~"}, 0.0)
    hooks.finish()
    assert payload_people(out.read_text()) == [{"event": "duplicate", "recipient": "$(id)@example.com; rm -rf ~"}]
    assert reported == [{"event": "hook-failed", "command": reported[0]["command"], "reason": "exit code 2"}]


def test_a_batch_runs_the_hook_once_per_burst(tmp_path):
    out = tmp_path / "runs"
    script = f"import sys; open({str(out)!r}, 'a').write(sys.stdin.read())"
    hooks = Hooks([sys.executable, "-c", script], 10.0, lambda event: pytest.fail(str(event)))
    for n in range(3):
        hooks.add({"event": "duplicate", "recipient": f"p{n}@example.com"}, float(n))
    hooks.tick(5.0)
    assert not out.exists()  # the burst is not over
    hooks.tick(10.0)
    hooks.finish()
    runs = out.read_text().splitlines()
    assert len(runs) == 1
    assert [p["recipient"] for p in payload_people(runs[0])] == [f"p{n}@example.com" for n in range(3)]


def test_a_hook_that_cannot_start_is_reported_not_raised():
    reported = []
    hooks = Hooks(["/nonexistent/notify"], None, reported.append)
    hooks.add({"event": "duplicate"}, 0.0)
    hooks.finish()
    assert reported[0]["event"] == "hook-failed" and "no such file" in reported[0]["reason"]


@pytest.mark.parametrize("given", ["", "'unclosed"])
def test_an_empty_or_unparsable_hook_command_is_refused(given):
    from forensics.errors import ConfigError

    with pytest.raises(ConfigError, match="--on-duplicate"):
        split_command(given)


def test_a_watch_over_nothing_is_refused(tmp_path):
    from forensics.errors import InputError

    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="folder has no log files"):
        Follower([str(tmp_path / "empty")], from_start=False)


def test_a_reader_too_far_behind_is_lost_evidence(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(b"")
    follower = Follower([str(log)], from_start=False, pace=Pace(max_lag=0.0, chunk_bytes=4))
    assert follower.poll() == ([], [])  # read to its end: from now on, behind is lagging
    log.write_bytes(b"x" * 100 + b"\n")
    notices = follower.poll()[1] + follower.poll()[1]
    assert [(n.what, n.lost) for n in notices] == [("lagging", True)]
    assert not follower.watching


def _send(msg_id: str, worker: str = "w1", incarnation: str = "i1", to: str = "ana@example.com") -> str:
    return (f"ts=2026-11-28T09:00:00Z event=send worker={worker} pid={incarnation} campaign=c-7 step=1 "
            f"email={to} msg_id=<{msg_id}@mail.example.com>\n")


def _watch(log: Path, **plan) -> tuple[Watch, list[dict]]:
    events: list[dict] = []
    return Watch(Follower([str(log)], from_start=False, pace=plan.pop("pace", Pace())), State(Options()),
                 Plan(**plan), events.append), events


@pytest.mark.slow
def test_a_new_incarnation_of_a_known_worker_is_a_restart_and_a_new_name_a_new_worker(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("")
    watch, events = _watch(log)
    log.write_text(_send("m1") + _send("m2", to="bo@example.com"))
    watch.step(0.0)
    with open(log, "a") as handle:
        handle.write(_send("m3", incarnation="i2", to="cy@example.com") + _send("m4", worker="w2", to="di@example.com"))
    watch.step(0.1)
    assert [(e["event"], e["worker"], e["incarnation"]) for e in events] == [
        ("new-worker", "w1", "i1"), ("worker-restart", "w1", "i2"), ("new-worker", "w2", "i1")]


@pytest.mark.slow
def test_the_status_counts_sends_per_worker_in_the_last_minute_people_files_and_idle_seconds(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("")
    watch, _events = _watch(log)
    log.write_text(_send("m1") + _send("m2") + _send("m3", worker="w2", to="bo@example.com"))
    watch.step(100.0)
    status = watch._status(100.0)
    assert (status["sends_per_minute"], status["duplicated_people"], status["files"]) == ({"w1": 2, "w2": 1}, 1, 1)
    assert list(status["idle_s"]) == [str(log)]
    assert watch._status(161.0)["sends_per_minute"] == {}  # a minute later


@pytest.mark.slow
def test_the_status_adds_up_a_workers_sends_read_in_several_loads_of_one_poll(tmp_path):
    known, new = tmp_path / "a.log", tmp_path / "b.log"
    known.write_text("")
    events: list[dict] = []
    watch = Watch(Follower([str(tmp_path)], from_start=False), State(Options()), Plan(discover_every=0.0),
                  events.append)
    known.write_text(_send("m1"))
    watch.step(100.0)
    new.write_text("")
    watch.step(101.0)  # the new file found, nothing read of it yet
    with open(known, "a") as handle:  # read apart from the new file's lines: its shape is known
        handle.write(_send("m2", to="bo@example.com"))
    new.write_text(_send("m3", to="cy@example.com"))
    watch.step(102.0)
    assert watch._status(102.0)["sends_per_minute"] == {"w1": 3}


@pytest.mark.slow
def test_a_file_without_new_lines_is_said_to_have_stopped_growing_once(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("")
    watch, events = _watch(log, pace=Pace(stale_after=0.0))
    watch.step(0.0)
    watch.step(0.1)
    assert [e["event"] for e in events] == ["stopped-growing"]


def test_since_all_reads_the_lines_already_written_and_a_bad_since_is_refused(tmp_path):
    from forensics.errors import ConfigError
    from forensics.watch.session import since_start

    assert since_start("now")[:2] == (False, None) and since_start("all")[:2] == (True, None)
    from_start, bound, said = since_start("30m")
    assert from_start and bound.at is not None and "on (--since)" in said
    with pytest.raises(ConfigError, match="--since 'yesterday': pass now, all, or"):
        since_start("yesterday")


@pytest.mark.slow
def test_the_text_format_shows_each_duplicate_on_one_escaped_line_then_the_summary(cli, tmp_path):
    log = tmp_path / "a.log"
    hostile = "\x1b[31mana@example.com"
    log.write_text(_send("m1", to=f'"{hostile}"') + _send("m2", worker="w2", to=f'"{hostile}"'))
    result = cli("watch", log, "--since", "all", "--for", "0.2", "--poll", "0.05")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    duplicate = next(line for line in lines if line.startswith("DUPLICATE"))
    assert "\x1b" not in result.stdout and "\\x1b[31mana@example.com (campaign c-7, step 1)" in duplicate
    assert "m1@mail.example.com by w1" in duplicate and "then m2@mail.example.com by w2" in duplicate
    assert "counting every line already written" in result.stderr
    assert any("parallel-worker" in line for line in lines[lines.index(duplicate) + 1:])  # kind, then the summary


def test_compressed_files_are_not_followed_and_a_folder_of_them_alone_is_refused(tmp_path):
    import gzip

    from forensics.errors import InputError

    (tmp_path / "old.log.gz").write_bytes(gzip.compress(_send("m0").encode()))
    with pytest.raises(InputError, match="nothing to follow: .*old.log.gz compressed"):
        Follower([str(tmp_path)], from_start=True)
    (tmp_path / "mail.log").write_text(_send("m1"))
    follower = Follower([str(tmp_path)], from_start=True)
    assert (list(follower.files), follower.compressed) == ([str(tmp_path / "mail.log")], [str(tmp_path / "old.log.gz")])


def test_a_file_still_catching_up_is_not_lagging(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(b"x\n" * 50)
    follower = Follower([str(log)], from_start=True, pace=Pace(max_lag=0.0, chunk_bytes=4))
    notices = [n for _ in range(30) for n in follower.poll()[1]]
    assert notices == [] and follower.watching


def test_a_followed_file_renamed_into_the_watched_folder_is_not_read_again(tmp_path):
    (tmp_path / "sub").mkdir()
    log = tmp_path / "mail.log"
    log.write_text(_send("m1"))
    follower = Follower([str(tmp_path)], from_start=True)
    assert [c.data for c in follower.poll()[0]] == [_send("m1").encode()]
    os.rename(log, tmp_path / "sub" / "archived.log")
    log.write_text(_send("m2"))
    chunks, notices = follower.poll()
    assert [(n.what, n.detail) for n in notices] == [("rotated", "rename")]
    assert follower.discover() == [] and list(follower.files) == [str(log)]
    assert [(c.data, c.lines_before) for c in chunks] == [(_send("m2").encode(), 0)]


def test_lines_written_before_the_watch_are_counted_so_later_ones_are_numbered_as_in_the_file(tmp_path):
    log = tmp_path / "mail.log"
    log.write_text(_send("m1") * 3)
    follower = Follower([str(log)], from_start=False)
    with open(log, "a") as handle:
        handle.write(_send("m2"))
    [chunk] = follower.poll()[0]
    assert chunk.lines_before == 3


@pytest.mark.slow
def test_a_duplicate_read_in_the_poll_that_lost_a_file_ends_with_4_not_3(tmp_path):
    (tmp_path / "a.log").write_text("")
    (tmp_path / "b.log").write_text("")
    watch, events = _watch(tmp_path, fail_on_duplicates=True, pace=Pace(gone_after=0.0))
    watch.step(0.0)
    os.unlink(tmp_path / "b.log")
    watch.follower.poll()  # b.log missing: gone at the next poll
    (tmp_path / "a.log").write_text(_send("m1") + _send("m2"))
    ending = watch.step(0.1)
    assert ending.code == 4 and [e["event"] for e in events] == ["new-worker", "duplicate", "lost"]


def test_the_unended_last_line_of_a_renamed_file_is_read_before_the_new_file(tmp_path):
    log = tmp_path / "mail.log"
    log.write_text("")
    follower = Follower([str(log)], from_start=False)
    log.write_text(_send("m1") + _send("m2").rstrip("\n"))
    os.rename(log, tmp_path / "mail.log.1")
    log.write_text(_send("m3"))
    chunks, notices = follower.poll()
    assert [(c.data, c.lines_before) for c in chunks] == [(_send("m1").encode(), 0), (_send("m2").encode(), 1),
                                                         (_send("m3").encode(), 0)]
    assert [n.detail for n in notices] == ["rename"]


@pytest.mark.slow
def test_a_poll_leaves_no_copy_of_the_lines_it_read(tmp_path):
    from forensics.watch.follow import Chunk

    state = State(Options())
    state.take([Chunk(str(tmp_path / "deep" / "a.log"), _send("m1").encode(), 0),
                Chunk(str(tmp_path / "b.log"), _send("m2").encode(), 0)])
    assert [p for p in state.folder.rglob("*") if p.is_file() and p.name != ".owner"] == []  # .owner: its lock
    spills = [Path(con.execute("SELECT current_setting('temp_directory')").fetchall()[0][0])
              for con in (state.con, state.scratch)]
    state.close()
    assert not state.folder.exists() and not any(folder.exists() for folder in spills)  # its database file too


@pytest.mark.slow
@pytest.mark.parametrize("reopen_every", [300.0, 0.0])
def test_kinds_are_named_apart_while_the_polls_go_on(tmp_path, reopen_every):
    """Also with the state opened again at every poll where no classification runs (its cursor reads the state)."""
    log = tmp_path / "a.log"
    log.write_text("")
    watch, events = _watch(log, kind_every=0.0, reopen_every=reopen_every)
    log.write_text(_send("m1") + _send("m2", worker="w2"))
    watch.step(0.0)  # the duplicate; its kind is being named apart
    naming = watch.naming
    with open(log, "a") as handle:
        handle.write(_send("m3", to="bo@example.com") + _send("m4", worker="w2", to="bo@example.com"))
    watch.step(0.1)  # meanwhile another duplicate
    naming.join()
    watch.step(0.2)
    kinds = [(e["recipient"], e["kind"]) for e in events if e["event"] == "kind"]
    assert ("ana@example.com", "parallel-worker") in kinds
    watch.finish(Ending(0, "done"))
    assert sorted(e["recipient"] for e in events if e["event"] == "kind") == ["ana@example.com", "bo@example.com"]


def test_a_state_opened_again_keeps_what_it_read_and_reports_no_one_twice(tmp_path):
    import duckdb
    from forensics.watch.follow import Chunk

    state = State(Options())
    log = str(tmp_path / "a.log")
    state.take([Chunk(log, (_send("m1") + _send("m2", worker="w2") + _send("m3", to="bo@example.com")).encode(), 0)])
    before, limit = state.con, state.con.execute("SELECT current_setting('memory_limit')").fetchall()
    state.reopen()
    with pytest.raises(duckdb.ConnectionException):
        before.execute("SELECT 1")
    assert state.con.execute("SELECT current_setting('memory_limit'), current_setting('threads')").fetchall() == \
        [(limit[0][0], 1)]
    # ana again (reported already), a copy of m1 (no new send), bo's second send, and a worker not seen before
    changes = state.take([Chunk(log, (_send("m4", worker="w2") + _send("m1") +
                                      _send("m5", worker="w3", to="bo@example.com")).encode(), 3)])
    assert [(d["recipient"], d["sends"]) for d in changes.duplicates] == [("bo@example.com", 2)]
    assert [(w["what"], w["worker"]) for w in changes.workers] == [("new-worker", "w3")]
    assert sum(row["sends"] for row in changes.sends) == 2
    assert {(k["recipient"], k["kind"]) for k in state.kind_changes()} == \
        {("ana@example.com", "parallel-worker"), ("bo@example.com", "parallel-worker")}
    state.close()


def test_a_poll_reading_a_known_file_and_a_new_one_reports_the_duplicate_in_the_known_one(tmp_path):
    from forensics.watch.follow import Chunk

    state = State(Options())
    known, new = str(tmp_path / "a.log"), str(tmp_path / "b.log")
    state.take([Chunk(known, _send("m1").encode(), 0)])
    changes = state.take([Chunk(known, _send("m2", worker="w2").encode(), 1),  # read apart: its shape is known
                          Chunk(new, _send("m3", to="bo@example.com").encode(), 0)])
    assert [(d["recipient"], d["sends"]) for d in changes.duplicates] == [("ana@example.com", 2)]
    assert sorted(row["worker"] for row in changes.sends) == ["w1", "w2"]
    state.close()


def test_a_person_reported_is_not_reported_again_nor_their_kept_sends_read_however_often_they_are_sent_to(tmp_path):
    from forensics.watch.follow import Chunk

    state = State(Options())
    log, asked = str(tmp_path / "a.log"), []
    people_rows = state.person_rows.rows
    state.person_rows.rows = lambda keys: (asked.append(len(keys)), people_rows(keys))[1]
    first = state.take([Chunk(log, (_send("m1") + _send("m2", worker="w2")).encode(), 0)])
    assert [(d["recipient"], d["sends"]) for d in first.duplicates] == [("ana@example.com", 2)]
    again = _send("m3") + _send("m4", worker="w2") + _send("m5", to="bo@example.com")
    later = state.take([Chunk(log, (again + _send("m6", worker="w2", to="bo@example.com")).encode(), 2)])
    assert [(d["recipient"], d["sends"]) for d in later.duplicates] == [("bo@example.com", 2)]
    assert asked == [2, 2]  # ana's two new sends were not looked up
    state.close()


@pytest.mark.slow
def test_a_send_logged_again_many_polls_later_is_one_send_and_a_new_one_to_that_person_is_a_duplicate(tmp_path,
                                                                                                monkeypatch):
    from forensics.watch import keys
    from forensics.watch.follow import Chunk

    monkeypatch.setattr(keys, "ON_DISK", 4)  # the index's runs are files, as in a long watch
    state = State(Options())
    log = str(tmp_path / "a.log")
    state.take([Chunk(log, _send("m0").encode(), 0)])
    for poll in range(1, 12):  # other people's sends: the index's runs are merged meanwhile
        state.take([Chunk(log, _send(f"m{poll}", to=f"p{poll}@example.com").encode(), poll)])
    assert state.take([Chunk(log, _send("m0").encode(), 12)]).duplicates == []  # the same send logged twice
    changes = state.take([Chunk(log, _send("m99", worker="w2").encode(), 13)])
    assert [(d["recipient"], d["sends"], [s["msg_id"] for s in d["first_sends"]]) for d in changes.duplicates] == [
        ("ana@example.com", 2, ["m0@mail.example.com", "m99@mail.example.com"])]
    state.close()


@pytest.mark.parametrize("on_disk", [False, True])
def test_the_send_index_points_to_every_row_sharing_a_key_and_to_few_others(tmp_path, monkeypatch, on_disk):
    import numpy as np

    from forensics.watch import keys

    monkeypatch.setattr(keys, "ON_DISK", 64)
    index, rng, kept = keys.RowIndex(tmp_path if on_disk else None), np.random.default_rng(7), []
    for poll in range(200):
        keys = rng.integers(0, 2**63, size=int(rng.integers(0, 40)), dtype=np.uint64)
        if kept and poll % 5 == 0:  # keys seen before, as a person sent to again
            keys = np.concatenate([keys, kept[0][:2]])
        rows = np.arange(sum(len(k) for k in kept), sum(len(k) for k in kept) + len(keys))
        index.add(keys, rows)
        kept.append(keys)
    every = np.concatenate(kept)
    asked = np.concatenate([every[::50], np.array([1, 2**40], dtype=np.uint64)])
    index.release()  # the mapped pages let go of are read again
    found = index.rows(asked)
    assert set(np.flatnonzero(np.isin(every, asked))) <= set(found.tolist())
    assert len(found) < 2 * np.isin(every, asked).sum() + 5
    assert len(index.runs) < 12  # merged as they grow
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == (sum(len(run) >= 64 for run in index.runs) if on_disk else 0)  # a merged run's file goes


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), max_size=300), st.lists(st.integers(0, 2**64 - 1), max_size=300))
def test_the_filter_of_keys_added_never_says_no_to_one_that_was(added, asked):
    import numpy as np

    from forensics.watch import keys

    added = np.array(added, dtype=np.uint64)
    key_filter = keys.KeyFilter(bits=1 << 12)  # small, so that its words are shared and its bits collide
    key_filter.add(added[: len(added) // 2])
    key_filter.add(added[len(added) // 2:])  # in two calls, as polls add them
    assert key_filter.may_hold(added).all()
    asked = np.array(asked, dtype=np.uint64)
    assert key_filter.may_hold(asked)[np.isin(asked, added)].all()


def test_keys_never_added_are_not_searched_even_sharing_the_upper_bits_of_keys_added(tmp_path):
    """The runs keep a key's upper 32 bits only: before the filter, a key sharing them with one added pointed to its
    row (a row read for nothing at every poll, more of them as the watch kept more sends)."""
    import numpy as np

    from forensics.watch import keys

    index = keys.RowIndex(tmp_path)
    added = np.arange(1000, dtype=np.uint64) << np.uint64(32)
    index.add(added, np.arange(1000))
    assert index.rows(added + np.uint64(1)).tolist() == []  # same upper bits, never added
    assert index.rows(added[[3, 500]]).tolist() == [3, 500]
    random = np.random.default_rng(5).integers(0, 2**63, 100_000, dtype=np.uint64)
    assert index.added.may_hold(random).sum() < 100  # few keys never added get past the filter


def test_a_search_of_the_index_leaves_none_of_its_mapped_runs_resident(tmp_path, monkeypatch):
    import numpy as np

    from forensics.watch import keys

    monkeypatch.setattr(keys, "ON_DISK", 1024)
    index, rng = keys.RowIndex(tmp_path), np.random.default_rng(3)
    for poll in range(100):  # 100,000 keys: a run of a few hundred pages
        index.add(rng.integers(0, 2**63, 1000, dtype=np.uint64), np.arange(poll * 1000, poll * 1000 + 1000))
    for _ in range(5):  # a poll's worth of searches each, as many as to read every page of a run between them
        index.rows(rng.integers(0, 2**63, 500, dtype=np.uint64))
    resident = _resident_kb(tmp_path)
    assert resident and set(resident.values()) == {0}, resident


def _resident_kb(folder: Path) -> dict[str, int]:
    """Resident kB of this process's mappings of the files in `folder` (/proc/self/smaps)."""
    resident, mapped = {}, None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and ":" not in fields[0]:  # a mapping's first line: range, perms, offset, dev, inode, path
            mapped = fields[5] if len(fields) > 5 and fields[5].startswith(str(folder)) else None
        elif mapped and fields[0] == "Rss:":
            resident[mapped] = resident.get(mapped, 0) + int(fields[1])
    return resident


def _stdin_pipe(monkeypatch) -> int:
    """A pipe in place of standard input; its write end."""
    import io

    read, write = os.pipe()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(open(read, "rb")))
    return write


def test_a_stream_piped_in_faster_than_it_is_read_is_held_only_up_to_a_limit(monkeypatch):
    import select

    from forensics.watch import follow

    monkeypatch.setattr(follow, "STREAM_HELD", 1 << 16)
    write = _stdin_pipe(monkeypatch)
    stream, line, written = follow._Stream(), b"x" * 99 + b"\n", 0
    os.set_blocking(write, False)
    try:
        while True:  # write until the pipe stays full: the reading thread holds the limit's worth and waits
            assert written < 64 * follow.STREAM_HELD, "the reading thread never stopped reading"
            try:
                written += os.write(write, line * 64)
            except BlockingIOError:
                with stream._lock:
                    if len(stream._buffer) >= follow.STREAM_HELD:
                        break
                waiting = select.poll()  # not select(): a test process may hold more than 1,024 files by now
                waiting.register(write, select.POLLOUT)
                waiting.poll(500)  # the thread drains the pipe meanwhile
        chunks: list = []
        stream.take(chunks, [])  # what was held, less the end of a line not read whole yet
        assert follow.STREAM_HELD - len(line) <= len(chunks[0].data) < follow.STREAM_HELD + (1 << 16) + len(line)
    finally:  # the thread reads on to the end of the pipe: standard input can then be put back
        os.set_blocking(write, True)
        os.close(write)
    notices: list = []
    while not notices:  # the rest is read once a poll took what was held, then the stream closes
        stream.take(chunks, notices)
        select.select([], [], [], 0.01)
    assert sum(len(c.data) for c in chunks) == written and [n.what for n in notices] == ["stream-closed"]


def test_a_stream_line_longer_than_the_limit_is_read_whole(monkeypatch):
    import select
    import threading

    from forensics.watch import follow

    monkeypatch.setattr(follow, "STREAM_HELD", 1 << 12)
    write = _stdin_pipe(monkeypatch)
    stream = follow._Stream()
    long = b"y" * (1 << 18)  # more than the pipe holds: written only as the thread reads it, past the limit
    writer = threading.Thread(target=os.write, args=(write, long + b"\nz\n"), daemon=True)
    writer.start()
    writer.join(60)
    alive = writer.is_alive()
    os.close(write)  # the thread reads on to the end of the pipe: standard input can then be put back
    assert not alive, "the reading thread stopped inside a line"
    chunks, notices = [], []
    while not notices:
        stream.take(chunks, notices)
        select.select([], [], [], 0.01)
    assert b"".join(c.data for c in chunks) == long + b"\nz\n"


@pytest.mark.slow
def test_a_backlog_bigger_than_a_load_is_added_in_pieces_numbered_as_in_its_file(tmp_path, monkeypatch):
    from forensics.watch import state as watch_state
    from forensics.watch.follow import Chunk

    lines = [_send(f"m{i}", to=f"p{i}@example.com") for i in range(6)] + [_send("m9", worker="w2", to="p1@example.com")]
    monkeypatch.setattr(watch_state, "TAKE_BYTES", 2 * len(lines[0]) + 1)  # two lines a load
    state = State(Options())
    changes = state.take([Chunk(str(tmp_path / "a.log"), "".join(lines).encode(), 10)])
    assert [(d["recipient"], [s["line"] for s in d["first_sends"]]) for d in changes.duplicates] == [
        ("p1@example.com", [12, 17])]
    assert sum(row["sends"] for row in changes.sends) == 7
    state.close()


@pytest.mark.slow
def test_a_csv_backlog_bigger_than_a_load_is_read_under_its_header_in_every_piece(tmp_path, monkeypatch):
    from forensics.watch import state as watch_state
    from forensics.watch.follow import Chunk

    rows = [f"2026-11-28T09:00:0{i}Z,send,w1,c-7,1,p{i}@example.com,m{i}" for i in range(6)]
    text = "\n".join(["ts,event,worker,campaign,step,recipient,msg_id", *rows, rows[1].replace("m1", "m9")]) + "\n"
    monkeypatch.setattr(watch_state, "TAKE_BYTES", 2 * len(rows[0]) + 3)  # two lines a load
    state = State(Options())
    changes = state.take([Chunk(str(tmp_path / "a.csv"), text.encode(), 0)])
    assert [(d["recipient"], [s["line"] for s in d["first_sends"]]) for d in changes.duplicates] == [
        ("p1@example.com", [3, 8])]
    assert sum(row["sends"] for row in changes.sends) == 7
    state.close()


def test_a_piece_of_a_backlog_ends_at_a_line_end_and_a_longer_line_stays_whole():
    from forensics.watch.follow import Chunk
    from forensics.watch.state import _pieces

    chunk = Chunk("a.log", b"ab\ncd\n" + b"x" * 20 + b"\nef\n", 4)
    assert [(p.data, p.lines_before) for p in _pieces(chunk, 5)] == [
        (b"ab\n", 4), (b"cd\n", 5), (b"x" * 20 + b"\n", 6), (b"ef\n", 7)]
    assert [p.data for p in _pieces(chunk, 100)] == [chunk.data]


def test_two_send_indexes_in_one_folder_keep_their_own_runs(tmp_path, monkeypatch):
    import numpy as np

    from forensics.watch import keys

    monkeypatch.setattr(keys, "ON_DISK", 64)
    people, sends = keys.RowIndex(tmp_path, "person-rows"), keys.RowIndex(tmp_path, "send-rows")
    for poll in range(20):  # added to both at once, as a poll adds its sends: their runs are merged at once
        rows = np.arange(poll * 10, poll * 10 + 10)
        people.add(rows.astype(np.uint64) << np.uint64(32), rows)
        sends.add((rows.astype(np.uint64) + np.uint64(1000)) << np.uint64(32), rows)
    assert people.rows(np.array([5 << 32], dtype=np.uint64)).tolist() == [5]
    assert sends.rows(np.array([1005 << 32], dtype=np.uint64)).tolist() == [5]


@pytest.mark.slow
def test_a_later_poll_reads_a_key_its_head_and_the_polls_before_never_showed(tmp_path):
    """A poll's chunk is read with the keys the polls before it saw and those of its head, not sampled again: a key
    that first appears past its head (here the recipient as `rcpt_to`, 250 lines in) is still read, and keys read as
    no field never pile up in what the watch keeps."""
    from forensics.watch.follow import Chunk

    state = State(Options())
    log = str(tmp_path / "a.log")
    state.take([Chunk(log, _send("m0").encode(), 0)])
    filler = "".join(f"ts=2026-11-28T09:00:01Z event=send worker=w1 pid=i1 campaign=c-7 step=1 email=p{n}@x.com "
                     f"msg_id=<f{n}@mail.example.com> k{n}=v\n" for n in range(250))
    late = "ts=2026-11-28T09:00:02Z event=send worker=w2 pid=i1 campaign=c-7 step=1 rcpt_to=ana@example.com " \
           "msg_id=<m1@mail.example.com>\n"
    changes = state.take([Chunk(log, (filler + late).encode(), 1)])
    assert [(d["recipient"], d["sends"]) for d in changes.duplicates] == [("ana@example.com", 2)]
    assert "rcpt_to" not in state.options.field_map.keys_seen  # it was read, not sampled
    assert not any(key.startswith("k") for key in state.options.field_map.keys_seen)
    state.close()
