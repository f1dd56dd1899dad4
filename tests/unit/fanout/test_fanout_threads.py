"""The fan-out engine with real threads and a real clock (its default runtime): the same
answers as the sequential oracle, every hold given back, for a fixed set of worlds. Latencies
are a few milliseconds; nothing here asserts a duration."""

from __future__ import annotations

import random
import threading
import time

import pytest
from capacity_broker.domain.fanout import DecisionKind, Tried
from capacity_broker.domain.memory import MemoryView, Seen, Tally, hour_of
from capacity_broker.logic.fanout import Fanout
from fanout_sim import REGION, TYPE, SimEc2, Spec, candidates, oracle

SCALE = 0.02  # a sim second is 20 ms here


class ThreadEc2:
    """``SimEc2`` behind a lock, each call sleeping its latency around its effect."""

    def __init__(self, ec2: SimEc2) -> None:
        self.ec2 = ec2
        self.lock = threading.Lock()
        self.threads: set[str] = set()

    def try_one(self, index: int, round_: int) -> Tried[str]:
        self.threads.add(threading.current_thread().name)
        spec = self.ec2.specs[index]
        time.sleep(spec.latency * spec.effect * SCALE)
        with self.lock:
            answer = self.ec2.try_one(index, round_)
        time.sleep(spec.latency * (1 - spec.effect) * SCALE)
        return answer

    def give_back(self, hold: str) -> bool:
        latency = self.ec2.give_back_latency * SCALE
        time.sleep(latency * self.ec2.give_back_effect)
        with self.lock:
            ok = self.ec2.give_back(hold)
        time.sleep(latency * (1 - self.ec2.give_back_effect))
        return ok


def fanout(world: ThreadEc2, keep: bool, max_concurrency: int = 8) -> Fanout[int, str]:
    return Fanout(world.try_one, world.give_back, keep=keep, max_concurrency=max_concurrency)


def warm(out: list[int], available: list[int]) -> MemoryView:
    now = time.time()
    tally = Tally(REGION, TYPE, hour_of(now))
    for index in out:
        tally.last[(f"use1-az{index + 1}", Seen.INSUFFICIENT)] = now - 5
    for index in available:
        tally.last[(f"use1-az{index + 1}", Seen.AVAILABLE)] = now - 5
    tally.latency = {1: 10}
    return MemoryView([tally], moment=now)


def test_capacity_everywhere_one_create_one_cancel() -> None:
    world = ThreadEc2(SimEc2([Spec("available")] * 6))
    result = fanout(world, keep=False).run(candidates(6), time.monotonic() + 30)
    assert result.decision.kind is DecisionKind.WON and result.decision.index == 0
    assert world.ec2.created == [0] and len(world.ec2.given_back) == 1
    assert world.ec2.live == {}
    assert result.reservation_seconds > 0


def test_warm_memory_runs_the_creates_in_parallel_threads() -> None:
    world = ThreadEc2(SimEc2([Spec("insufficient")] * 5 + [Spec("available")]))
    memory = warm(out=[0, 1, 2, 3, 4], available=[5])
    result = fanout(world, keep=False).run(candidates(6), time.monotonic() + 30, memory=memory)
    assert result.decision.index == 5
    assert sorted(world.ec2.created) == [0, 1, 2, 3, 4, 5]
    assert len(world.threads) > 1
    assert world.ec2.live == {}


def test_quota_room_for_one_with_a_slow_first_answer() -> None:
    ec2 = SimEc2(
        [Spec("available", latency=2.0, effect=0.9)] + [Spec("available")] * 5,
        limit=1,
        give_back_latency=1.0,
    )
    world = ThreadEc2(ec2)
    deadline = time.monotonic() + 30
    result = fanout(world, keep=False).run(candidates(6), deadline, memory=warm([], []))
    assert result.decision.kind is DecisionKind.WON and result.decision.index == 0
    assert ec2.max_live == 1
    assert ec2.live == {}


def test_a_throttled_first_candidate_is_tried_again_after_a_pause_and_wins() -> None:
    # Nothing is in flight during the pause: the coordinator sleeps it (ThreadRuntime), and the
    # second subnet, which has room, is not the answer (nor even tried: the hedge is 2 s).
    world = ThreadEc2(SimEc2([Spec("available", unanswered=("throttled",)), Spec("available")]))
    result = fanout(world, keep=False).run(candidates(2), time.monotonic() + 30)
    assert result.decision.kind is DecisionKind.WON and result.decision.index == 0
    assert world.ec2.created == [0, 0]
    assert world.ec2.live == {}


@pytest.mark.parametrize("seed", range(12))
def test_random_worlds_answer_as_one_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    specs = [
        Spec(
            rng.choice(["available", "insufficient", "insufficient", "unsupported", "error"]),
            weight=rng.randint(1, 2),
            latency=rng.choice([0.1, 0.3, 1.0]),
            effect=rng.choice([0.5, 1.0]),
        )
        for _ in range(rng.randint(2, 6))
    ]
    ec2 = SimEc2(specs, limit=rng.randint(1, 3), quota_first=rng.random() < 0.5)
    keep = rng.random() < 0.5
    world = ThreadEc2(ec2)
    memory = warm(out=[i for i in range(len(specs)) if rng.random() < 0.4], available=[])
    result = fanout(world, keep=keep, max_concurrency=rng.randint(1, 6)).run(
        candidates(len(specs)), time.monotonic() + 30, memory=memory
    )
    expected = oracle(specs, ec2.limit, ec2.quota_first)
    assert (result.decision.kind, result.decision.index) == (expected.decision, expected.index)
    assert [r.outcome for r in result.reports[: len(expected.outcomes)]] == list(expected.outcomes)
    if keep and expected.decision is DecisionKind.WON:
        assert list(ec2.live) == [result.kept]
    else:
        assert ec2.live == {}


class Killed(BaseException):
    """What ends an invocation from outside (Lambda's sandbox going away, an interrupt): no
    ``except Exception`` catches it."""


@pytest.mark.parametrize("where", ["try", "give_back"])
def test_an_invocation_killed_in_a_worker_ends_the_fan_out_instead_of_hanging(where: str) -> None:
    def try_one(index: int, round_: int) -> Tried[str]:
        if where == "try":
            raise Killed
        return Tried(hold=f"cr-{index}", reservation_id=f"cr-{index}")

    def give_back(hold: str) -> bool:
        raise Killed

    engine = Fanout(try_one, give_back, keep=False, max_concurrency=4)
    finished = threading.Event()
    raised: list[BaseException] = []

    def run() -> None:
        try:
            engine.run(candidates(3), time.monotonic() + 5)
        except BaseException as error:
            raised.append(error)
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    # A generous bound: the fan-out either ends at once or waits forever.
    assert finished.wait(30), "the fan-out waited forever for a worker that was killed"
    assert len(raised) == 1 and isinstance(raised[0], Killed)
