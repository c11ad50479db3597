"""The job-level lock: PostgreSQL advisory lock (real server) and Redis SET NX EX (real Redis on 6379).

A lost lock must say so: `check()` raises JobLockLost at the next check-in and `release()` raises it too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from types import SimpleNamespace

import psycopg
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from remediation import claimloop, sentlog
from remediation.joblock import AdvisoryJobLock, JobLockBusy, JobLockLost, RedisJobLock


def session(dsn):
    return psycopg.connect(dsn, autocommit=True)


def test_advisory_lock_admits_one_runner(pg_dsn):
    with session(pg_dsn) as a, session(pg_dsn) as b:
        with AdvisoryJobLock(a, "outreach c-42"):
            with pytest.raises(JobLockBusy, match="'outreach c-42' is already running elsewhere"):
                with AdvisoryJobLock(b, "outreach c-42"):
                    pass
            with AdvisoryJobLock(b, "outreach c-43"):  # another job is independent
                pass
        with AdvisoryJobLock(b, "outreach c-42"):  # released on exit
            pass


def test_advisory_lock_dies_with_its_session(pg_dsn):
    a, b = session(pg_dsn), session(pg_dsn)
    assert AdvisoryJobLock(a, "job").acquire()
    assert not AdvisoryJobLock(b, "job").acquire()
    a.close()  # a killed job: the server drops its session locks
    until(lambda: AdvisoryJobLock(b, "job").acquire(), "the lock released when its session ended")
    b.close()


def until(condition, what: str, timeout: float = 120.0) -> None:
    """Wait for `condition` (a generous ceiling: a busy machine is slow, never wrong)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.05)


def test_advisory_check_finds_its_own_lock_in_pg_locks(pg_dsn):
    names = [f"outreach c-{n}" for n in range(8)]
    with session(pg_dsn) as a, session(pg_dsn) as b:
        signs = {a.execute("SELECT hashtextextended(%s, 0) < 0", (name,)).fetchone()[0] for name in names}
        assert signs == {True, False}  # both halves of the bigint key space map onto classid:objid
        assert AdvisoryJobLock(b, "someone else's job").acquire()
        for name in names:
            lock = AdvisoryJobLock(a, name)
            assert lock.acquire()
            lock.check()
            assert lock.release() is True
            with pytest.raises(JobLockLost, match=f"{name!r} lost its PostgreSQL advisory lock"):
                lock.check()


def test_advisory_check_raises_once_its_session_is_terminated(pg_dsn):
    a, admin, b = session(pg_dsn), session(pg_dsn), session(pg_dsn)
    lock = AdvisoryJobLock(a, "job")
    assert lock.acquire()
    lock.check()
    admin.execute("SELECT pg_terminate_backend(%s)", (a.info.backend_pid,))
    until(lambda: AdvisoryJobLock(b, "job").acquire(), "a second runner getting in")
    with pytest.raises(JobLockLost, match="'job' lost its PostgreSQL advisory lock: its session ended"):
        lock.check()
    with pytest.raises(JobLockLost, match="its session ended"):
        lock.release()
    for conn in (a, admin, b):
        conn.close()


def test_advisory_check_raises_when_a_session_reset_dropped_the_lock(pg_dsn):
    with session(pg_dsn) as a, session(pg_dsn) as b:
        lock = AdvisoryJobLock(a, "job")
        assert lock.acquire()
        a.execute("DISCARD ALL")  # what a connection pooler runs between clients: advisory locks go too
        assert AdvisoryJobLock(a, "another job").acquire()  # a lock of this session, but not ours
        assert AdvisoryJobLock(b, "job").acquire()
        with pytest.raises(JobLockLost, match=f"session {a.info.backend_pid} no longer holds it"):
            lock.check()
        with pytest.raises(JobLockLost, match="no longer held it"):
            lock.release()


def test_a_claim_loop_that_checks_in_stops_at_the_first_send_after_the_lock_is_lost(pg_dsn):
    with psycopg.connect(pg_dsn) as setup:
        setup.execute("CREATE TABLE leads (lead_id INT PRIMARY KEY, email TEXT, status TEXT NOT NULL DEFAULT"
                      " 'queued', claimed_by TEXT, claimed_at TIMESTAMPTZ);"
                      " INSERT INTO leads (lead_id, email) SELECT g, 'lead' || g || '@example.com'"
                      " FROM generate_series(1, 10) AS g")
        sentlog.ensure_schema(setup)
    sent = []
    with session(pg_dsn) as lock_conn, session(pg_dsn) as admin:
        pid = lock_conn.info.backend_pid

        def terminate_lock_session():
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            until(lambda: not admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s",
                                            (pid,)).fetchone()[0], "the terminated session going away")

        with pytest.raises(JobLockLost, match="its session ended"):
            with AdvisoryJobLock(lock_conn, "outreach c-1") as lock:
                def send(lead):  # the pattern docs/remediation.md shows
                    lock.check()
                    sent.append(lead.key)
                    if len(sent) == 3:
                        terminate_lock_session()
                    return f"<{lead.idempotency_key}@test>"

                claimloop.run(pg_dsn, claimloop.LoopConfig(campaign="c-1", step="1", batch_size=5, no_sends_yet=True), send)
        assert sent == [1, 2, 3]
        statuses = admin.execute("SELECT status, count(*) FROM leads GROUP BY status ORDER BY status").fetchall()
        assert statuses == [("queued", 7), ("sent", 3)]  # the lead that checked in was not sent; its batch went back


@pytest.fixture()
def redis_client():
    client = redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as exc:
        pytest.fail(f"no Redis on 127.0.0.1:6379 ({exc}); .ci/run installs and starts one")
    prefix = f"mailmortem-test:{uuid.uuid4().hex}:"
    yield client, prefix
    for key in client.scan_iter(prefix + "*"):
        client.delete(key)
    client.close()


def test_redis_lock_is_set_nx_ex(redis_client):
    client, prefix = redis_client
    first = RedisJobLock(client, "job", ttl_s=30, prefix=prefix)
    with first:
        assert client.get(first.key).decode() == first.value
        assert 0 < client.ttl(first.key) <= 30
        with pytest.raises(JobLockBusy, match="Redis lock held"):
            with RedisJobLock(client, "job", ttl_s=30, prefix=prefix):
                pass
    assert client.get(first.key) is None


@pytest.mark.slow
def test_redis_release_never_frees_someone_elses_lock(redis_client):
    client, prefix = redis_client
    expired = RedisJobLock(client, "job", ttl_s=1, prefix=prefix)
    assert expired.acquire()
    time.sleep(1.2)  # our TTL ran out while we were still working
    successor = RedisJobLock(client, "job", ttl_s=30, prefix=prefix)
    assert successor.acquire()
    assert expired.renew() is False
    with pytest.raises(JobLockLost, match="'job' lost its Redis lock"):
        expired.release()
    assert client.get(successor.key).decode() == successor.value
    assert successor.release() is True


@pytest.mark.slow
def test_redis_keepalive_holds_the_lock_past_its_ttl(redis_client):
    client, prefix = redis_client
    with RedisJobLock(client, "long-job", ttl_s=1, keepalive=True, prefix=prefix) as lock:
        time.sleep(1.6)
        assert client.get(lock.key).decode() == lock.value
        assert not RedisJobLock(client, "long-job", ttl_s=1, prefix=prefix).acquire()
    assert client.get(lock.key) is None


@pytest.fixture()
def cuttable(redis_client):
    """A client logged in as its own ACL user, so a test can cut it off: `cut()` disables the user and
    CLIENT KILLs its connections (it cannot log in again until `restore()`). It does not retry by itself,
    so each error reaches the lock instead of being absorbed by redis-py's own retries."""
    admin, prefix = redis_client
    user, password = f"mailmortem-test-{uuid.uuid4().hex[:12]}", uuid.uuid4().hex
    admin.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=[f"{prefix}*"], commands=["+@all"])
    client = redis.Redis(host="127.0.0.1", port=6379, username=user, password=password, socket_timeout=2,
                         retry=Retry(NoBackoff(), 0))

    def cut():
        admin.acl_setuser(user, enabled=False)
        assert admin.client_kill_filter(user=user) >= 1

    def restore():
        admin.acl_setuser(user, enabled=True)

    def held(ttl_s: int) -> RedisJobLock:
        """A keepalive lock on "job" taken through the cuttable client."""
        lock = RedisJobLock(client, "job", ttl_s=ttl_s, keepalive=True, prefix=prefix)
        assert lock.acquire()
        return lock

    def rival(ttl_s: int) -> RedisJobLock:
        """A second runner's lock on "job", through the admin client that is never cut."""
        return RedisJobLock(admin, "job", ttl_s=ttl_s, prefix=prefix)

    yield SimpleNamespace(cut=cut, restore=restore, held=held, rival=rival, admin=admin)
    admin.acl_deluser(user)
    client.close()


@pytest.mark.slow
def test_redis_keepalive_retries_through_a_killed_connection(cuttable):
    lock = cuttable.held(ttl_s=3)
    acquired = time.monotonic()
    cuttable.cut()
    time.sleep(1.6)  # the renewal due after ttl/3 fails, and so do its retries
    cuttable.restore()
    time.sleep(max(0.0, acquired + 3.5 - time.monotonic()))  # past the TTL it was acquired with
    assert not cuttable.rival(ttl_s=3).acquire(), "keepalive died on one error"
    assert lock.retries >= 1 and "AuthenticationError" in lock.last_error
    lock.check()
    assert lock.release() is True


@pytest.mark.slow
def test_redis_keepalive_marks_the_lock_lost_when_errors_outlast_the_ttl(cuttable):
    lock = cuttable.held(ttl_s=1)
    cuttable.cut()
    successor = cuttable.rival(ttl_s=30)
    until(successor.acquire, "the cut-off runner's key expiring")
    with pytest.raises(JobLockLost, match=r"not renewed within its 1s TTL \(last Redis error: Authentication"):
        lock.check()
    cuttable.restore()
    with pytest.raises(JobLockLost, match="'job' lost its Redis lock"):
        lock.release()
    assert cuttable.admin.get(successor.key).decode() == successor.value


@pytest.mark.slow
def test_redis_check_raises_once_the_ttl_ran_out_without_keepalive(redis_client):
    client, prefix = redis_client
    lock = RedisJobLock(client, "job", ttl_s=1, prefix=prefix)
    assert lock.acquire()
    lock.check()
    time.sleep(1.1)  # the job outlasts its TTL; nobody else has taken the job yet
    with pytest.raises(JobLockLost, match=r"'job' lost its Redis lock: it was not renewed within its 1s TTL"
                                          r" \(keepalive is off\); another runner may hold it now"):
        lock.check()


def test_redis_check_sees_its_key_taken_over(redis_client):
    client, prefix = redis_client
    lock = RedisJobLock(client, "job", ttl_s=30, prefix=prefix)
    assert lock.acquire()
    lock.check()
    client.delete(lock.key)  # an operator's DEL, or a Redis restart without persistence
    successor = RedisJobLock(client, "job", ttl_s=30, prefix=prefix)
    assert successor.acquire()
    with pytest.raises(JobLockLost, match="its key expired or now belongs to another runner"):
        lock.check()
    with pytest.raises(JobLockLost):
        lock.release()
    assert client.get(successor.key).decode() == successor.value

@pytest.mark.slow

def test_a_job_that_outlived_its_lock_fails_on_exit(redis_client):
    client, prefix = redis_client
    with pytest.raises(JobLockLost, match="'job' lost its Redis lock"):
        with RedisJobLock(client, "job", ttl_s=1, prefix=prefix):
            time.sleep(1.2)  # finished without a check-in, but not alone: the lock had run out
    with pytest.raises(RuntimeError, match="provider down") as failed:
        with RedisJobLock(client, "job", ttl_s=1, prefix=prefix):
            time.sleep(1.2)
            raise RuntimeError("provider down")
    assert "'job' lost its Redis lock" in failed.value.__notes__[0]  # the job's own error stays on top


# A runner in its own process, so the test can pause it (SIGSTOP) like a stalled host or a long GC.
_RUNNER = """
import sys
import redis
from remediation.joblock import JobLockLost, RedisJobLock

lock = RedisJobLock(redis.Redis(host="127.0.0.1", port=6379), "job", ttl_s=2, keepalive=True, prefix=sys.argv[1])
assert lock.acquire()
print("held", flush=True)
sys.stdin.readline()  # the test pauses and resumes this process, then asks for a check-in
for step in (lock.check, lock.release):
    try:
        step()
        print(step.__name__, "passed", flush=True)
    except JobLockLost as exc:
        print(step.__name__, "raised:", exc, flush=True)
"""

@pytest.mark.slow

def test_redis_keepalive_holds_a_short_ttl_and_a_pause_past_it_is_caught(redis_client):
    client, prefix = redis_client
    runner = subprocess.Popen([sys.executable, "-c", _RUNNER, prefix], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert runner.stdout.readline() == "held\n", runner.stderr.read()
        second = RedisJobLock(client, "job", ttl_s=2, prefix=prefix)
        keep_trying = time.monotonic() + 4  # twice the TTL: only the keepalive keeps the key
        while time.monotonic() < keep_trying:
            assert not second.acquire(), "a second runner got in while the first kept its lock alive"
            time.sleep(0.1)
        os.kill(runner.pid, signal.SIGSTOP)
        until(second.acquire, "the paused runner's key expiring")
        os.kill(runner.pid, signal.SIGCONT)
        out, err = runner.communicate("check in\n", timeout=30)
    finally:
        if runner.poll() is None:
            os.kill(runner.pid, signal.SIGCONT)
            runner.kill()
    assert "check raised: job 'job' lost its Redis lock: it was not renewed within its 2s TTL" in out, err
    assert "release raised: job 'job' lost its Redis lock" in out, err
    assert client.get(second.key).decode() == second.value
