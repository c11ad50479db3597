"""The optional job-level lock: a second layer so one job (campaign run) has one runner.

The claim loop already makes two workers safe on one table; the job lock keeps a
second copy of the whole job (a cron double-fire, a retried deploy) from starting.

* `AdvisoryJobLock(conn, name)` — PostgreSQL session advisory lock (default): it
  is released when the session ends, so a killed job never leaves it stuck.
* `RedisJobLock(client, name, ttl_s)` — for teams on Redis: `SET key value NX EX
  ttl` with a random value; release and renewal are compare-and-delete /
  compare-and-expire Lua scripts, so a holder whose TTL ran out can never free
  (or extend) the lock somebody else now holds. `keepalive=True` renews it every
  ttl/3 from a daemon thread.

Both are context managers raising `JobLockBusy` when the job already runs:

    with AdvisoryJobLock(conn, "outreach c-42"):
        claimloop.run(dsn, cfg, send)
"""

from __future__ import annotations

import secrets
import threading

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


class JobLockBusy(RefusedError):
    """Another runner holds the job lock."""


class _Guard:
    name: str

    def acquire(self) -> bool:
        raise NotImplementedError

    def release(self) -> bool:
        raise NotImplementedError

    def __enter__(self):
        if not self.acquire():
            raise JobLockBusy(f"job {self.name!r} is already running elsewhere ({self.kind} lock held)")
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class AdvisoryJobLock(_Guard):
    """PostgreSQL session-level advisory lock on hashtextextended(name). Use an autocommit connection."""

    kind = "PostgreSQL advisory"

    def __init__(self, conn, name: str):
        self.conn, self.name = conn, name

    def acquire(self) -> bool:
        query = queries.get("joblock_try_advisory").for_psycopg()
        return bool(self.conn.execute(query, {"name": self.name}).fetchone()[0])

    def release(self) -> bool:
        query = queries.get("joblock_release_advisory").for_psycopg()
        return bool(self.conn.execute(query, {"name": self.name}).fetchone()[0])


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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self) -> bool:
        acquired = bool(self.client.set(self.key, self.value, nx=True, ex=self.ttl_s))
        if acquired and self.keepalive:
            self._thread = threading.Thread(target=self._renew_loop, name="joblock-keepalive", daemon=True)
            self._thread.start()
        return acquired

    def renew(self) -> bool:
        """Push the expiry out by ttl_s again; False when we no longer hold the lock."""
        return bool(self.client.eval(RENEW_SCRIPT, 1, self.key, self.value, self.ttl_s))

    def release(self) -> bool:
        """Delete the key only if it still holds our value; False when it had expired or moved on."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return bool(self.client.eval(RELEASE_SCRIPT, 1, self.key, self.value))

    def _renew_loop(self) -> None:
        while not self._stop.wait(max(self.ttl_s / 3, 0.2)):
            if not self.renew():
                return
