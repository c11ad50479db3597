"""The job-level lock: PostgreSQL advisory lock (real server) and Redis SET NX EX (real Redis on 6379)."""

from __future__ import annotations

import time
import uuid

import psycopg
import pytest

from remediation.joblock import AdvisoryJobLock, JobLockBusy, RedisJobLock


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
    deadline = time.monotonic() + 5
    while not AdvisoryJobLock(b, "job").acquire():
        assert time.monotonic() < deadline, "lock not released when its session ended"
        time.sleep(0.05)
    b.close()


@pytest.fixture()
def redis_client():
    redis = pytest.importorskip("redis")
    client = redis.Redis(host="127.0.0.1", port=6379, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis on 127.0.0.1:6379")
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


def test_redis_release_never_frees_someone_elses_lock(redis_client):
    client, prefix = redis_client
    expired = RedisJobLock(client, "job", ttl_s=1, prefix=prefix)
    assert expired.acquire()
    time.sleep(1.2)  # our TTL ran out while we were still working
    successor = RedisJobLock(client, "job", ttl_s=30, prefix=prefix)
    assert successor.acquire()
    assert expired.renew() is False and expired.release() is False
    assert client.get(successor.key).decode() == successor.value
    assert successor.release() is True


def test_redis_keepalive_holds_the_lock_past_its_ttl(redis_client):
    client, prefix = redis_client
    with RedisJobLock(client, "long-job", ttl_s=1, keepalive=True, prefix=prefix) as lock:
        time.sleep(1.6)
        assert client.get(lock.key).decode() == lock.value
        assert not RedisJobLock(client, "long-job", ttl_s=1, prefix=prefix).acquire()
    assert client.get(lock.key) is None
