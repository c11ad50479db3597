"""The simulator's world: people, workers and timed runs of one campaign step.

Everything that happens is kept as plain dicts with canonical field names (see
docs/log-vocabulary.md): `simulate_render` turns them into log lines later. Keys
starting with "_" are the simulator's own: `_t` is the true time (epoch
seconds, before any clock skew), `_w` the worker, `_mech` the mechanism that
caused a send (None for an ordinary send) — the ground truth reads `_mech`.
"""

from __future__ import annotations

import bisect
import datetime as dt
import random
import zlib
from dataclasses import dataclass, field

BASE = dt.datetime(2026, 11, 28, 9, 0, tzinfo=dt.timezone.utc).timestamp()
HOUR, DAY = 3600.0, 86400.0
MIN_GAP = 0.2  # seconds between two sends of one worker, at least

FIRST = ("jane", "omar", "li", "maria", "kofi", "anna", "raj", "sven", "chloe", "diego", "amara", "tom",
         "yuki", "fatima", "lucas", "ines", "noah", "priya", "jonas", "elena", "sam", "mei", "olu", "hana")
LAST = ("doe", "haddad", "wei", "garcia", "mensah", "novak", "patel", "berg", "martin", "lopez", "okafor",
        "smith", "tanaka", "rahman", "silva", "costa", "meyer", "iyer", "lund", "popescu", "kim", "adeyemi")
DOMAINS = ("acme.com", "globex.io", "initech.co", "umbrella.org", "hooli.com", "vandelay.biz", "stark.dev",
           "wayne.co.uk", "tyrell.ai", "soylent.net", "example.org", "cyberdyne.de")
WORKER_STYLES = ("w-{}", "mailer-{}", "agent-eu-{}", "sender-{}", "outreach-worker-{}")
CAMPAIGNS = ("c-42", "q4-winback", "spring-launch", "cto-outreach", "c-17", "reengage-2026",
             "webinar-invite", "dev-hiring-q1", "c-108", "partner-intro")
SUBJECTS = ("Quick question, {first}?", "An idea for {company}", 'Re: "10 minutes" next week',
            "{first}, saw your post, had a thought", "Following up (again)", "Last note, promise")
ACK_LOST = "timeout waiting for ack"
SEND_ERRORS = ("smtp timeout after 30s", "421 4.7.0 try again later", "connection reset by peer")


@dataclass(slots=True)
class Person:
    email: str    # the normalised address (lower-case)
    display: str  # as the CRM holds it: sometimes Mixed.Case
    cand: str
    first: str
    company: str

    def written(self, rng: random.Random) -> str:
        """The address as one send writes it: case variants of one person happen."""
        return self.display if self.display != self.email and rng.random() < 0.5 else self.email


@dataclass
class Worker:
    name: str
    skew: float                       # seconds this worker's clock is off
    starts: list = field(default_factory=list)  # [(true time, incarnation number)], ascending

    def incarnation(self, t: float) -> int:
        i = bisect.bisect_right([s for s, _ in self.starts], t) - 1
        return self.starts[max(i, 0)][1]


@dataclass(frozen=True)
class Step:
    campaign: str
    step: int
    test_id: str | None = None


def make_people(rng: random.Random, n: int) -> list[Person]:
    seen: set[str] = set()
    people = []
    cand_style = rng.choice(("cand-{:06d}", "lead_{}", "C{:07d}"))
    for i in range(n):
        first, last, domain = rng.choice(FIRST), rng.choice(LAST), rng.choice(DOMAINS)
        local = rng.choice((f"{first}.{last}", f"{first[0]}{last}", f"{first}_{last}", f"{first}"))
        email = f"{local}@{domain}"
        if email in seen:
            email = f"{local}{i}@{domain}"
        seen.add(email)
        display = email
        if rng.random() < 0.08:
            mine = email.split("@")[0]
            display = ".".join(p.capitalize() for p in mine.split(".")) + "@" + domain.capitalize()
        people.append(Person(email, display, cand_style.format(10000 + i), first.capitalize(),
                             domain.split(".")[0].capitalize()))
    return people


class World:
    """One simulated deployment: its workers, its habits, and everything they logged."""

    def __init__(self, seed: int, people: int):
        self.rng = rng = random.Random(f"mailmortem-simulate:{seed}")
        self.people = make_people(rng, people)
        self.records: list[dict] = []
        self.stories: list[str] = []
        self.lease = rng.choice((300, 600, 900))
        self.claims = rng.random() < 0.8
        self.send_shard = self.claims or rng.random() < 0.5
        self.retry_style = rng.choice(("both", "error", "attempt"))
        self.fail_rate = 0.006
        self.shard_prefix = rng.choice(("s-", "batch-", "shard-"))
        self.shard_size = max(5, min(500, people // 12))
        self.gap = max(MIN_GAP * 2, min(8.0, self.lease * rng.uniform(0.3, 0.5) / self.shard_size))
        self.campaigns = rng.sample(CAMPAIGNS, 6)
        self.subjects = rng.random() < 0.5
        self.forced_retries: set = set()  # (step, candidate) whose ack is lost whatever the dice say
        self._seq = {"msg": 0, "shard": 0, "pid": rng.randint(900, 30000)}
        self._salt = rng.getrandbits(64)
        style = rng.choice(WORKER_STYLES)
        self.workers = [self._worker(style.format(i + 1)) for i in range(rng.choice((3, 3, 4)))]

    # --- identities -----------------------------------------------------------------
    def _worker(self, name: str) -> Worker:
        w = Worker(name, self.rng.uniform(-3.0, 3.0))
        self.start(w, BASE - self.rng.uniform(120, 900))
        return w

    def start(self, w: Worker, t: float) -> None:
        """A (re)start of a worker process: a start record and a new incarnation."""
        self._seq["pid"] += self.rng.randint(7, 4000)
        w.starts.append((t, self._seq["pid"]))
        self.emit(w, t, "start")

    def msg_id(self) -> str:
        self._seq["msg"] += 1
        mixed = (self._seq["msg"] * 0x9E3779B97F4A7C15 ^ self._salt) & 0xFFFFFFFFFFFFFFFF
        return f"{mixed:016x}@mail.example.com"

    def shard_id(self) -> str:
        self._seq["shard"] += 1
        return f"{self.shard_prefix}{self._seq['shard']}"

    def split(self, persons: list[Person]) -> list[tuple[str, list[Person]]]:
        size = self.shard_len(len(persons))
        return [(self.shard_id(), persons[i:i + size]) for i in range(0, len(persons), size)]

    def shard_len(self, n: int) -> int:
        """Shard size for a list of n people: never fewer than two shards."""
        return self.shard_size if n >= 2 * self.shard_size else max(1, (n + 1) // 2)

    def times(self, start: float, n: int, gap: float | None = None) -> list[float]:
        gap, uniform, out, t = gap or self.gap, self.rng.uniform, [], start
        for _ in range(n):
            t += max(MIN_GAP, gap * uniform(0.6, 1.4))
            out.append(t)
        return out

    # --- records ----------------------------------------------------------------------
    def emit(self, w: Worker, t: float, event: str, **fields) -> dict:
        rec = {"_t": t, "_w": w, "event": event, **fields}
        self.records.append(rec)
        return rec

    def send(self, w: Worker, t: float, person: Person, step: Step, shard: str | None, mech: str | None,
             *, attempt: int = 1, retry_rate: float = 0.0) -> None:
        """One send attempt; a failed attempt is retried (one real send), a lost ack maybe re-sent."""
        rng = self.rng
        rec = self.emit(w, t, "send", campaign=step.campaign, step=step.step, recipient=person.written(rng),
                        candidate=person.cand, shard=shard if self.send_shard else None, attempt=attempt,
                        _mech=mech, _person=person)
        if step.test_id:
            rec["test_id"], rec["variant"] = step.test_id, rng.choice("AB")
        if self.subjects:
            rec["subject"] = self._subject(person, step, rec.get("variant"))
        if rng.random() < self.fail_rate:
            rec["status"] = rng.choice(("failed", "timeout"))
            self._error(w, t + 0.05, person, step, rng.choice(SEND_ERRORS))
            self.send(w, t + rng.uniform(2, 40), person, step, shard, mech, attempt=attempt + 1,
                      retry_rate=retry_rate)
            return
        rec["msg_id"], rec["status"] = self.msg_id(), "ok"
        if retry_rate and (rng.random() < retry_rate or (step, person.cand) in self.forced_retries):
            self.forced_retries.discard((step, person.cand))
            self._lost_ack(w, t, person, step, shard, attempt)

    def _lost_ack(self, w: Worker, t: float, person: Person, step: Step, shard: str | None, attempt: int) -> None:
        """The provider took the mail but the worker never saw the ack, so it sends again."""
        t_err = t + self.rng.uniform(1, 30)
        if self.retry_style != "attempt":
            self._error(w, t_err, person, step, ACK_LOST)
        next_attempt = 1 if self.retry_style == "error" else attempt + 1
        self.send(w, t_err + self.rng.uniform(3, 90), person, step, shard, "retry", attempt=next_attempt)

    def _error(self, w: Worker, t: float, person: Person, step: Step, text: str) -> None:
        self.emit(w, t, "error", campaign=step.campaign, step=step.step, recipient=person.written(self.rng),
                  candidate=person.cand, error=text)

    def _subject(self, person: Person, step: Step, variant: str | None) -> str:
        i = (zlib.crc32(step.campaign.encode()) % 3 + step.step + (variant == "B") * 2) % len(SUBJECTS)
        return SUBJECTS[i].format(first=person.first, company=person.company)

    # --- runs -------------------------------------------------------------------------
    def shard_run(self, w: Worker, step: Step, shard: str, group: list[Person], times: list[float],
                  mech: str | None = None, *, renew: bool = True, release: bool = True,
                  retry_rate: float = 0.0, claim_at: float | None = None) -> float:
        """A worker claims a shard, sends it, heartbeats while it runs and releases it."""
        t0 = times[0] - self.rng.uniform(0.05, 0.5) if claim_at is None else claim_at
        end = times[-1]
        if self.claims:
            self.emit(w, t0, "claim", shard=shard, lease=self.lease, count=len(group))
            if renew:
                for k in range(1, int((end - t0) / (self.lease / 3)) + 1):
                    self.emit(w, t0 + k * self.lease / 3, "renew", shard=shard, lease=self.lease)
        for person, t in zip(group, times):
            self.send(w, t, person, step, shard, mech, retry_rate=retry_rate)
        if self.claims and release:
            self.emit(w, end + self.rng.uniform(0.05, 0.5), "release", shard=shard)
        return end + 0.5

    def pool_run(self, step: Step, persons: list[Person], t0: float, workers: list[Worker] | None = None,
                 *, retry_rate: float = 0.0, slow: int | None = None) -> float:
        """Workers take shards off one queue; shard number `slow` outlives its lease (lease-expiry)."""
        workers = workers or self.workers
        queue = [[t0, i, sid, group, None] for i, (sid, group) in enumerate(self.split(persons))]
        free = {w.name: t0 + self.rng.uniform(0, 15) for w in workers}
        while queue:
            w = min(workers, key=lambda x: free[x.name])
            item = _pick(queue, free[w.name])
            queue.remove(item)
            ready, seq, sid, group, holder = item
            if holder is not None:
                # Some worker's poller sees the expired lease at once (workers run shards concurrently).
                w = min((x for x in workers if x is not holder), key=lambda x: free[x.name])
                end = self._reclaim(w, step, sid, group, ready)
                free[w.name] = max(free[w.name], end + self.rng.uniform(1, 8))
                continue
            start = max(free[w.name], ready)
            if seq == slow:
                claimed, end = self._slow_shard(w, step, sid, group, start)
                expiry = claimed + self.lease + self.rng.uniform(10, 10 + 0.1 * self.lease)
                queue.append([expiry, seq, sid, group, w])
            else:
                end = self.shard_run(w, step, sid, group, self.times(start, len(group)), retry_rate=retry_rate)
            free[w.name] = end + self.rng.uniform(1, 8)
        return max(free.values())

    def _reclaim(self, w: Worker, step: Step, sid: str, group: list[Person], at: float) -> float:
        """Another worker claims the shard whose lease ran out and sends all of it again."""
        if self.claims:
            self.emit(w, at - 0.02, "expire", shard=sid)
        times = self.times(at + 0.5, len(group))
        return self.shard_run(w, step, sid, group, times, "lease-expiry", claim_at=at)

    def _slow_shard(self, w: Worker, step: Step, sid: str, group: list[Person], start: float):
        """A holder stuck on a slow provider: no heartbeat, still sending long after its lease ran out."""
        claimed = start + self.rng.uniform(0.05, 0.5)
        span = self.lease * self.rng.uniform(1.6, 1.9)
        times = [claimed + 0.3 + span * (i + self.rng.uniform(0.3, 0.7)) / len(group) for i in range(len(group))]
        return claimed, self.shard_run(w, step, sid, group, times, "lease-expiry", renew=False, claim_at=claimed)


def _pick(queue: list, free_at: float) -> list:
    """The lowest-numbered shard that is ready when the worker is free, else the next to become ready."""
    ready = [item for item in queue if item[0] <= free_at]
    if ready:
        return min(ready, key=lambda item: item[1])
    return min(queue, key=lambda item: (item[0], item[1]))
