"""What happens in each simulated case: ordinary traffic plus the incident(s) of one kind.

Every case has the traffic that must never be reported: multi-step sequences,
people in two campaigns, failed-then-retried sends, case variants of an address,
an uneventful restart. The incident is then played on one campaign step.
"""

from __future__ import annotations

from forensics.simulate.world import BASE, DAY, HOUR, Person, Step, World

TEST_ID = "subj-2026-11"


def _hhmm(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


def _sample(world: World, share: float) -> list[Person]:
    """A campaign's list: a share of everyone, in the CRM's order."""
    return [p for p in world.people if world.rng.random() < share] or world.people[:2]


def follow_ups(world: World, campaign: str, first: list[Person], day: float) -> None:
    """Steps 2 and 3 of a sequence go to fewer people, days later: intended contact, not duplicates."""
    second = [p for p in first if world.rng.random() < 0.6]
    world.pool_run(Step(campaign, 2), second, BASE + day * DAY + world.rng.uniform(0, 1800))
    third = [p for p in second if world.rng.random() < 0.6]
    world.pool_run(Step(campaign, 3), third, BASE + (day + 4) * DAY + world.rng.uniform(0, 1800))


def ordinary_traffic(world: World, primary: str, first: list[Person], *, other_day: float = 0.2) -> None:
    """Follow-ups of the primary campaign, a second campaign, and a deploy restart nobody noticed."""
    follow_ups(world, primary, first, 3)
    other = world.campaigns[-1]
    world.pool_run(Step(other, 1), _sample(world, 0.35), BASE + other_day * DAY + 5 * HOUR)
    quiet = world.workers[-1]
    world.start(quiet, BASE + 3 * DAY - world.rng.uniform(600, 3600))


# --- the incidents --------------------------------------------------------------------

def parallel_worker(world: World, step: Step, persons: list[Person], t0: float) -> None:
    """Two (or three) instances of one job each send the whole list, minutes apart."""
    rng = world.rng
    senders = world.workers[: rng.choice((2, 2, 3))]
    plan, t = [], t0
    for sid, group in world.split(persons):
        times = world.times(t, len(group))
        plan.append((sid, group, times))
        t = times[-1] + rng.uniform(1, 8)
    for i, w in enumerate(senders):
        offset = _offset(world, i)
        cover = 1.0 if i == 0 else rng.uniform(0.8, 1.0) if i == 1 else rng.uniform(0.45, 0.9)
        for sid, group, times in plan[: max(1, round(cover * len(plan)))]:
            mine = [x + offset + rng.uniform(0, 0.1) for x in times]
            world.shard_run(w, step, sid, group, mine, "parallel-worker")
    names = ", ".join(w.name for w in senders[:-1]) + f" and {senders[-1].name}"
    world.stories.append(f"parallel-worker: {names} each sent {step.campaign} step {step.step} "
                         f"from {_hhmm(t0)} UTC, minutes apart, with no working lock")


def _offset(world: World, i: int) -> float:
    """How far behind the first instance another one runs; with claims, well within one lease."""
    if i == 0:
        return 0.0
    if world.claims:  # claims overlap without any lease expiring: the lock simply isn't enforced
        low = 0.25 if i == 1 else 0.65
        return world.lease * (low + world.rng.uniform(0.0, 0.2))
    return i * world.rng.uniform(120, 720)


def retry(world: World, step: Step, persons: list[Person], t0: float, rate: float | None = None) -> None:
    rate = rate if rate is not None else world.rng.uniform(0.01, 0.03)
    world.forced_retries.add((step, world.rng.choice(persons).cand))  # a small list still shows one
    world.pool_run(step, persons, t0, retry_rate=rate)
    world.stories.append(f"retry: lost provider acks made workers re-send ~{rate:.0%} of "
                         f"{step.campaign} step {step.step} seconds to minutes later")


def lease_expiry(world: World, step: Step, persons: list[Person], t0: float) -> None:
    n_shards = -(-len(persons) // world.shard_len(len(persons)))
    slow = world.rng.randint(1, max(1, min(4, n_shards - 1)))
    world.pool_run(step, persons, t0, slow=slow)
    lease = f"{world.lease // 60}m"
    world.stories.append(f"lease-expiry: one shard of {step.campaign} step {step.step} outlived its {lease} "
                         f"lease without a heartbeat; another worker claimed it again and re-sent it")


def state_loss(world: World, step: Step, persons: list[Person], t0: float) -> None:
    """One worker runs the list; it restarts with its sent-state gone and replays from the top."""
    rng = world.rng
    w = world.workers[0]
    crash = rng.random() < 0.5
    stop = max(1, int(len(persons) * rng.uniform(0.3, 0.75))) if crash else len(persons)
    end = _one_pass(world, w, step, persons[:stop], t0, None, release_last=not crash)
    restart = end + (rng.uniform(20, 300) if crash else rng.uniform(2, 6) * HOUR)
    world.start(w, restart)
    again = persons if crash else persons[: max(1, int(len(persons) * rng.uniform(0.3, 1.0)))]
    _one_pass(world, w, step, again, restart + rng.uniform(5, 40), "state-loss")
    how = "crashed mid-run" if crash else "was redeployed hours later"
    world.stories.append(f"state-loss: {w.name} {how} at {_hhmm(restart)} UTC, lost its sent-state and "
                         f"re-ran {step.campaign} step {step.step} from the top")


def _one_pass(world: World, w, step: Step, persons: list[Person], t0: float, mech: str | None,
              release_last: bool = True) -> float:
    shards, t = world.split(persons), t0
    for k, (sid, group) in enumerate(shards):
        last = k == len(shards) - 1
        t = world.shard_run(w, step, sid, group, world.times(t, len(group)), mech,
                            release=release_last or not last) + world.rng.uniform(1, 8)
    return t


def ab_contamination(world: World, step: Step, persons: list[Person], t0: float, mechanism: str) -> None:
    """The variant is drawn per attempt, so whatever re-sends re-rolls it."""
    if mechanism == "retry":  # enough re-sends that the re-rolls show
        retry(world, step, persons, t0, rate=world.rng.uniform(0.05, 0.08))
    else:
        INCIDENTS[mechanism](world, step, persons, t0)
    world.stories.append(f"ab-contamination: {step.test_id} on {step.campaign} step {step.step} drew the "
                         f"variant per attempt, so the {mechanism} re-sends re-rolled it")


INCIDENTS = {"parallel-worker": parallel_worker, "retry": retry, "lease-expiry": lease_expiry,
             "state-loss": state_loss}


# --- the cases ------------------------------------------------------------------------

def single_case(world: World, kind: str) -> None:
    """One incident of `kind` on the primary campaign's first step, plus ordinary traffic."""
    primary = world.campaigns[0]
    first = _sample(world, 0.85)
    t0 = BASE + world.rng.uniform(0, 1800)
    if kind == "ab-contamination":
        mechanism = world.rng.choice(("state-loss", "retry", "state-loss", "parallel-worker"))
        ab_contamination(world, Step(primary, 1, TEST_ID), first, t0, mechanism)
    else:
        INCIDENTS[kind](world, Step(primary, 1), first, t0)
    ordinary_traffic(world, primary, first)


def mixed_case(world: World) -> None:
    """Several incidents, each on its own campaign and day, over ordinary traffic."""
    c = world.campaigns
    plan = [("parallel-worker", Step(c[0], 1)), ("retry", Step(c[1], 1)), ("state-loss", Step(c[2], 1)),
            ("ab-contamination", Step(c[3], 1, TEST_ID)), ("lease-expiry", Step(c[4], 1))]
    firsts = {}
    for day, (kind, step) in enumerate(plan):
        persons = _sample(world, 0.3)
        t0 = BASE + day * DAY + world.rng.uniform(0, 1800)
        if kind == "ab-contamination":
            ab_contamination(world, step, persons, t0, "retry")
        else:
            INCIDENTS[kind](world, step, persons, t0)
        firsts[step.campaign] = persons
    follow_ups(world, c[0], firsts[c[0]], 6)
    world.pool_run(Step(c[5], 1), _sample(world, 0.3), BASE + 1.5 * DAY)
    world.start(world.workers[-1], BASE + 6 * DAY - world.rng.uniform(600, 3600))


def build(kind: str, people: int, seed: int) -> World:
    world = World(seed, people)
    if kind in ("lease-expiry", "mixed"):  # a lease that runs out needs claims to show it
        world.claims = world.send_shard = True
    if kind == "mixed":
        mixed_case(world)
    else:
        single_case(world, kind)
    return world
