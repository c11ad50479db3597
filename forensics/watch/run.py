"""The watch loop: poll the followed files, read their new lines into the state, say what matters as events, and
decide when and how the watch ends.

Exit codes (the CLI's): 0 the watch ran its course (--for) or the quiet period held (--expect-quiet); 3 a send
during --expect-quiet, or a new duplicate under --fail-on-duplicates; 4 evidence was lost (a followed file gone,
unreadable or read too far behind, the stream closed) whatever else was seen: a quiet period or a count of
duplicates is only what it says while every followed file is read."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from forensics.jsonfmt import iso_utc
from forensics.watch.follow import Follower, Notice
from forensics.watch.hooks import Hooks
from forensics.watch.state import Changes, State

QUIET, SENT, LOST, INTERRUPTED = 0, 3, 4, 130
# classify reads everything read so far: it runs again no sooner than this many times its last run's CPU time, so that
# naming kinds takes at most 1/KIND_COST_RATIO of a core however long the watch has run (and never more often than
# Plan.kind_every, so that on a small state its share stays a small fixed one, not 1/KIND_COST_RATIO)
KIND_COST_RATIO = 80
MIN_REST_SHARE = 5  # the least rest between two polls: a fifth of the poll period
# A poll costs nearly the same however few lines it reads (its statements are planned each time): polling every
# 0.75 s keeps a busy watch inside its share of a core while a duplicate is still reported within a second
# (docs/benchmarks.md, watch).
POLL_S = 0.75


@dataclass(frozen=True)
class Plan:
    """What ends the watch (None: nothing) and how often it looks: seconds between polls, between looks for new
    files, between classifications naming kinds, between status lines."""

    expect_quiet: float | None = None
    fail_on_duplicates: bool = False
    duration: float | None = None
    poll: float = POLL_S
    discover_every: float = 1.0
    kind_every: float = 30.0
    status_every: float = 2.0
    reopen_every: float = 300.0  # the state's connection is opened again (State.reopen), so that its heap stays flat

    @classmethod
    def polling(cls, poll: float | None = None, **plan) -> Plan:
        """A plan polling every `poll` seconds (None: POLL_S): new files are looked for and kinds named at intervals
        that shrink with a shorter poll, up to the defaults above, and never more often than it polls."""
        poll = POLL_S if poll is None else poll
        return cls(poll=poll, discover_every=max(poll, min(cls.discover_every, 20 * poll)),
                   kind_every=max(poll, min(cls.kind_every, 60 * poll)), **plan)


@dataclass
class Ending:
    code: int
    reason: str
    summarize: bool = False  # --for ran out: the CLI shows the diagnose summary


class Watch:
    def __init__(self, follower: Follower, state: State, plan: Plan, emit: Callable[[dict], None],
                 status: Callable[[dict], None] | None = None, hooks: Hooks | None = None):
        self.follower, self.state, self.plan, self.emit, self.status = follower, state, plan, emit, status
        self.hooks = hooks or Hooks(None, None, emit)
        self.lost: list[Notice] = []
        self.people = 0
        self.unnamed = 0  # duplicated people classify has not named a kind for yet
        self.rates: deque = deque()  # (time, {worker: sends}) of the last minute
        self.started: float | None = None
        self.marks: dict = {}
        self.kind_cost = 0.0  # CPU seconds the last classification took
        self.naming: threading.Thread | None = None  # the classification running apart (State.kinds_in_background)
        self.kinds_found: queue.Queue = queue.Queue()

    def run(self) -> Ending:
        try:
            while True:
                began = time.monotonic()
                ending = self.step(began)
                if ending:
                    return self.finish(ending)
                # polls begin every `poll` seconds, not `poll` seconds after the last one ended: a line waits for
                # at most one period plus one poll's work on a busy machine; a poll that took longer than the
                # period is followed by a short rest, not by polls back to back (each has a cost of its own)
                time.sleep(max(self.plan.poll / MIN_REST_SHARE, self.plan.poll - (time.monotonic() - began)))
        except KeyboardInterrupt:  # Ctrl-C ends a watch as --for does, with what was seen (a second one aborts)
            return self.finish(Ending(LOST if self.lost else INTERRUPTED, "interrupted", summarize=True))
        finally:
            self.follower.close()

    def step(self, now: float) -> Ending | None:
        """One poll: read what is new, say what changed; the Ending when the watch is to end."""
        if self.started is None:
            self.started = now
            self.marks = {"discover": now, "kind": now, "status": now, "reopen": now}
        start, marks = self.started, self.marks
        chunks, notices = self.follower.poll()
        if now - marks["discover"] >= self.plan.discover_every:
            notices += self.follower.discover()
            marks["discover"] = now
        for notice in notices:  # a rotation or a new file is said before what was read from it
            if not notice.lost:
                self._notice(notice)
        ending = self._changes(self.state.take(chunks), now)
        for notice in notices:  # what was lost, after the last lines read before it
            if notice.lost:
                self._notice(notice)
        if ending:
            ending.code = LOST if self.lost else ending.code  # 4 whatever else was seen
            return ending
        self.hooks.tick(now)
        self._say_kinds()
        if self.naming is None and now - marks["reopen"] >= self.plan.reopen_every:
            self.state.reopen()
            marks["reopen"] = now
        if self.unnamed and self.naming is None \
                and now - marks["kind"] >= max(self.plan.kind_every, KIND_COST_RATIO * self.kind_cost):
            self.unnamed = 0
            self.naming = self.state.kinds_in_background(self._named)
            marks["kind"] = now
        if self.status and now - marks["status"] >= self.plan.status_every:
            self.status(self._status(now))
            marks["status"] = now
        return self._timed_end(now - start)

    def _timed_end(self, elapsed: float) -> Ending | None:
        if self.lost and (self.plan.expect_quiet is not None or not self.follower.watching):
            return Ending(LOST, "evidence was lost: the watch cannot vouch for what it did not read")
        if self.plan.expect_quiet is not None and elapsed >= self.plan.expect_quiet:
            return Ending(QUIET, f"no send for {self.plan.expect_quiet:g} s, every followed file read throughout")
        if self.plan.duration is not None and elapsed >= self.plan.duration:
            return Ending(LOST if self.lost else QUIET, f"watched for {self.plan.duration:g} s", summarize=True)
        return None

    def _changes(self, changes: Changes, now: float) -> Ending | None:
        for worker in changes.workers:
            self.emit({"event": worker["what"], "worker": worker["worker"], "incarnation": worker["incarnation"],
                       "ts": _iso(worker["ts"]), "source": worker["source"]})
        if changes.sends:
            counts: dict = {}  # a poll read in several loads has a row per worker for each
            for row in changes.sends:
                counts[row["worker"]] = counts.get(row["worker"], 0) + row["sends"]
            self.rates.append((now, counts))
            self._forget_rates(now)
            if self.plan.expect_quiet is not None:
                first = min((row["first"] for row in changes.sends), key=lambda s: s["ts"])
                self.emit({"event": "send", **_send(first), "worker": _worker_of(changes.sends, first)})
                return Ending(SENT, "a send was logged during the quiet period")
        for row in changes.duplicates:
            event = duplicate_event(row)
            self.emit(event)
            self.hooks.add(event, now)
        self.people += len(changes.duplicates)
        self.unnamed += len(changes.duplicates)
        if changes.duplicates and self.plan.fail_on_duplicates:
            return Ending(SENT, "a new duplicate was logged")
        return None

    def _notice(self, notice: Notice) -> None:
        self.emit({"event": "lost" if notice.lost else notice.what, "source": notice.source,
                   **({"what": notice.what} if notice.lost else {}), "detail": notice.detail or None})
        if notice.lost:
            self.lost.append(notice)

    def _named(self, changes: list[dict], seconds: float) -> None:
        """From the classifying thread: what it found, said by the loop at its next poll."""
        self.kinds_found.put((changes, seconds))

    def _say_kinds(self) -> None:
        while not self.kinds_found.empty():
            changes, self.kind_cost = self.kinds_found.get()
            self.naming = None
            if isinstance(changes, Exception):
                raise changes  # as if it had failed in the loop: the command's one error path says it
            self.state.release()
            self._emit_kinds(changes)

    def _name_kinds(self) -> None:
        """Once more, in the loop itself, when the watch ends (after the one running apart, if any)."""
        if self.naming is not None:
            self.naming.join()
            self._say_kinds()
        self._emit_kinds(self.state.kind_changes())

    def _emit_kinds(self, changes: list[dict]) -> None:
        for row in changes:
            self.emit({"event": "kind", "recipient": row["recipient"], "campaign": row["campaign"] or None,
                       "step": row["step"] or None, "kind": row["kind"], "confidence": float(row["confidence"])})

    def finish(self, ending: Ending) -> Ending:
        """Name the kinds the evidence names by now, finish the hooks, and say the watch ended."""
        if self.people and ending.code != SENT or ending.summarize:
            self._name_kinds()
        self.hooks.finish()
        self.emit({"event": "end", "exit_code": ending.code, "reason": ending.reason})
        return ending

    def _status(self, now: float) -> dict:
        self._forget_rates(now)
        per_worker: dict = {}
        for _t, counts in self.rates:
            for worker, sends in counts.items():
                per_worker[worker] = per_worker.get(worker, 0) + sends
        return {"sends_per_minute": per_worker, "duplicated_people": self.people,
                "files": self.follower.followed_count(), "idle_s": self.follower.idle(now), "lost": len(self.lost)}

    def _forget_rates(self, now: float) -> None:
        """Only the last minute's sends are kept (at every poll: without a status line, nothing else drops them)."""
        while self.rates and now - self.rates[0][0] > 60:
            self.rates.popleft()

    def unread(self) -> list[dict]:
        """The files the watch stopped reading, as the summary lists files not read."""
        return [{"path": n.source, "reason": n.detail or n.what} for n in self.lost]


def duplicate_event(row: dict) -> dict:
    first, second = row["first_sends"]
    return {"event": "duplicate", "recipient": row["recipient"], "campaign": row["campaign"] or None,
            "step": row["step"] or None, "sends": row["sends"], "kind": None,
            "first": _send(first), "second": _send(second)}


def _send(send: dict) -> dict:
    out = {"msg_id": send["msg_id"], "worker": send.get("worker"), "ts": _iso(send["ts"]), "source": send["source"],
           "line": send["line"]}
    for key in ("recipient", "campaign", "step"):
        if key in send:
            out[key] = send[key] or None
    return out


def _worker_of(rows: list[dict], first: dict) -> str | None:
    return next((row["worker"] for row in rows if row["first"] is first), None)


def _iso(value) -> str | None:
    return iso_utc(value) if value is not None else None
