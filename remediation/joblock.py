"""The optional job-level lock: a second layer so one job (campaign run) has one runner.

The claim loop already makes two workers safe on one table; the job lock keeps a
second copy of the whole job (a cron double-fire, a retried deploy) from starting.

* `AdvisoryJobLock(conn, name)` — PostgreSQL session advisory lock (default): it
  is released when the session ends, so a killed job never leaves it stuck.
* `RedisJobLock(client, name, ttl_s)` — for teams on Redis: `SET key value NX EX
  ttl` with a random value; release and renewal are compare-and-delete /
  compare-and-expire Lua scripts, so a holder whose TTL ran out can never free
  (or extend) the lock somebody else now holds. `keepalive=True` renews it every
  ttl/3 from a daemon thread, retrying a failed renewal until the TTL would run out.

Both are context managers raising `JobLockBusy` when the job already runs. A lock
can also be LOST while the job runs (its TTL ran out, its session was terminated):
`check()` raises `JobLockLost` from then on, so call it before each send, and
`release()` of a lost lock raises it too:

    with AdvisoryJobLock(conn, "outreach c-42") as lock:
        def send(lead):
            lock.check()
            return provider.send(...)
        claimloop.run(dsn, cfg, send)
"""

from __future__ import annotations

import secrets
import threading
import time

import queries
from remediation.errors import RefusedError

# Compare-and-delete / compare-and-expire: act only if the key still holds OUR value.
RELEASE_SCRIPT = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""
RENEW_SCRIPT = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('expire', KEYS[1], ARGV[2])
end
return 0
"""
# Why a Redis lock is lost when its key no longer holds our value.
_GONE = "its key expired or now belongs to another runner"


class JobLockBusy(RefusedError):
    """Another runner holds the job lock."""


class JobLockLost(RefusedError):
    """The job lock was lost while the job ran: another runner may hold the job now."""


class _Guard:
    name: str
    kind: str
    _lost: str | None = None  # why the lock is lost; once set, check() always raises

    def acquire(self) -> bool:
        raise NotImplementedError

    def release(self) -> bool:
        raise NotImplementedError

    def check(self) -> None:
        """Raise JobLockLost unless the lock is provably still ours: call it before each send."""
        if self._lost is None:
            why = self._why_not_held()
            if why is not None:
                self._mark_lost(why)
        if self._lost is not None:
            raise self._lost_error(self._lost)

    def _why_not_held(self) -> str | None:
        raise NotImplementedError

    def _mark_lost(self, why: str) -> None:
        if self._lost is None:
            self._lost = why

    def _lost_error(self, why: str) -> JobLockLost:
        return JobLockLost(f"job {self.name!r} lost its {self.kind} lock: {why}; another runner may hold it now")

    def __enter__(self):
        if not self.acquire():
            raise JobLockBusy(f"job {self.name!r} is already running elsewhere ({self.kind} lock held)")
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc is None:
            self.release()
            return
        try:
            self.release()
        except JobLockLost as lost:  # keep the job's own error; say the lock was lost as well
            if not isinstance(exc, JobLockLost):
                exc.add_note(str(lost))


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


class AdvisoryJobLock(_Guard):
    """PostgreSQL session-level advisory lock on hashtextextended(name). Use an autocommit connection."""

    kind = "PostgreSQL advisory"

    def __init__(self, conn, name: str):
        self.conn, self.name = conn, name
        self.pid: int | None = None  # backend pid of the session that took the lock

    def acquire(self) -> bool:
        acquired = bool(self._run("joblock_try_advisory")[0])
        if acquired:
            self.pid, self._lost = self.conn.info.backend_pid, None
        return acquired

    def release(self) -> bool:
        """Unlock: True; raises JobLockLost when the session had ended or no longer held the lock."""
        try:
            released = bool(self._run("joblock_release_advisory")[0])
        except Exception as exc:
            if not self._session_gone():
                raise
            raise self._lost_error(f"its session ended ({_first_line(exc)})") from exc
        if not released:
            raise self._lost_error(f"session {self.pid} no longer held it")
        return True

    def _why_not_held(self) -> str | None:
        """Our session must be alive and pg_locks must show it (its backend pid) holding the lock."""
        try:
            pid, held = self._run("joblock_held_advisory")
        except Exception as exc:
            if not self._session_gone():
                raise
            return f"its session ended ({_first_line(exc)})"
        if pid != self.pid:
            return f"the connection is now session {pid}, not {self.pid} which took the lock"
        if not held:  # e.g. DISCARD ALL or pg_advisory_unlock_all() from a pooler's session reset
            return f"session {pid} no longer holds it"
        return None

    def _run(self, name: str) -> tuple:
        return queries.run(self.conn, name, {"name": self.name}).fetchone()

    def _session_gone(self) -> bool:
        return bool(getattr(self.conn, "closed", False) or getattr(self.conn, "broken", False))


class RedisJobLock(_Guard):
    """Redis `SET key value NX EX ttl`, released and renewed only by its holder."""

    kind = "Redis"

    def __init__(self, client, name: str, ttl_s: int = 60, keepalive: bool = False, prefix: str = "mailmortem:job:"):
        if int(ttl_s) < 1:
            raise ValueError("ttl_s must be at least 1 second")
        self.client, self.name, self.ttl_s = client, name, int(ttl_s)
        self.key = prefix + name
        self.value = secrets.token_hex(16)  # who holds it: only this value may release or renew
        self.keepalive = keepalive
        self.retries = 0  # failed renewals the keepalive retried
        self.last_error: str | None = None
        # Monotonic time until which the key surely lives: measured from BEFORE the
        # command that set its expiry, so it never runs later than Redis's own.
        self._held_until = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def interval(self) -> float:
        return max(self.ttl_s / 3, 0.2)

    def acquire(self) -> bool:
        started = time.monotonic()
        acquired = bool(self.client.set(self.key, self.value, nx=True, ex=self.ttl_s))
        if acquired:
            self._held_until, self._lost = started + self.ttl_s, None
            if self.keepalive:
                self._start_keepalive()
        return acquired

    def renew(self) -> bool:
        """Push the expiry out by ttl_s again; False (and the lock marked lost) when we no longer hold it."""
        started = time.monotonic()
        renewed = bool(self.client.eval(RENEW_SCRIPT, 1, self.key, self.value, self.ttl_s))
        if renewed:
            self._held_until = started + self.ttl_s
        else:
            self._mark_lost(_GONE)
        return renewed

    def release(self) -> bool:
        """Delete the key only if it still holds our value: True; raises JobLockLost when it had
        expired or moved on (another runner may have run the job meanwhile)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if not self.client.eval(RELEASE_SCRIPT, 1, self.key, self.value):
            self._mark_lost(_GONE)
            raise self._lost_error(self._lost)
        return True

    def _why_not_held(self) -> str | None:
        """The key must be within its TTL since the last acquire or renewal, and hold our value
        when Redis answers."""
        if time.monotonic() >= self._held_until:
            return self._expired_reason()
        try:
            current = self.client.get(self.key)
        except Exception as exc:  # unreachable, but within the TTL: nobody else can have set the key
            self.last_error = _first_line(exc)
            return None
        if (current.decode() if isinstance(current, bytes) else current) != self.value:
            return _GONE
        return None

    def _expired_reason(self) -> str:
        why = f"it was not renewed within its {self.ttl_s}s TTL"
        if not self.keepalive:
            return why + " (keepalive is off)"
        return why + (f" (last Redis error: {self.last_error})" if self.last_error else "")

    def _start_keepalive(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep_alive, name="joblock-keepalive", daemon=True)
        self._thread.start()

    def _keep_alive(self) -> None:
        wait: float | None = self.interval
        while wait is not None and not self._stop.wait(wait):
            wait = self._renew_step()

    def _renew_step(self) -> float | None:
        """One keepalive step: the wait before the next one, or None once the lock is lost."""
        if self._lost is not None or time.monotonic() >= self._held_until:
            self._mark_lost(self._expired_reason())  # a pause (SIGSTOP, GC) or errors outlasted the TTL
            return None
        try:
            return self.interval if self.renew() else None
        except Exception as exc:  # a transient error: retry while the key surely still lives
            self.retries += 1
            self.last_error = _first_line(exc)
            return max(0.0, min(self.interval / 4, self._held_until - time.monotonic()))
