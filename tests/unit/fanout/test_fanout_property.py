"""Property: whatever the capacity, the latencies, the memory and the quota, the fan-out engine
answers what trying the candidates one at a time would answer, never holds more at once than
it may, and gives back every hold it does not keep.

The world is ``fanout_sim``'s discrete-event EC2 (no threads, no sleeping): each candidate has
capacity, none, an "unsupported", a permission error or an error no retry changes; its first
tries may end unanswered (throttled by EC2 or by the broker's rate budget, a server error, a
lost answer), or every try may, past the budget; a weight against a quota that may carry any
number of holds at once (or not even one of the request's alone); slow or fast answers that
take effect in EC2 at any point of their round trip; and the memory says anything, fresh or
stale, true or false, about any candidate and the quota.
"""

from __future__ import annotations

from capacity_broker.domain.fanout import DecisionKind
from capacity_broker.domain.memory import MemoryView, Seen, Tally, hour_of
from fanout_sim import REGION, TYPE, UNANSWERED, SimEc2, Spec, oracle, run
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

NOW = 1_000_000.0
# The budget of a world where some candidate never answers (sim seconds): every other
# candidate has long answered by then (latencies of seconds, a few unanswered tries each).
BUDGET = 200.0

specs = st.builds(
    Spec,
    kind=st.sampled_from(
        ["available"] * 3 + ["insufficient"] * 3 + ["unsupported", "permission", "error", "error"]
    ),
    weight=st.integers(1, 3),
    latency=st.sampled_from([0.05, 0.1, 0.1, 0.1, 0.3, 1.0, 2.5]),
    effect=st.sampled_from([0.0, 0.5, 0.9, 1.0]),
    unanswered=st.one_of(
        st.just(()), st.lists(st.sampled_from(sorted(UNANSWERED)), max_size=3).map(tuple)
    ),
    forever=st.sampled_from([False] * 15 + [True]),
)
memories = st.dictionaries(
    st.integers(0, 7),
    st.tuples(
        st.sampled_from([Seen.AVAILABLE, Seen.INSUFFICIENT, Seen.UNSUPPORTED]),
        st.sampled_from([1.0, 60.0, 179.0, 400.0]),  # seconds ago; 400 is stale
    ),
)


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, object]:
    world = draw(st.lists(specs, min_size=1, max_size=8))
    tally = Tally(REGION, TYPE, hour_of(NOW))
    for index, (seen, ago) in draw(memories).items():
        tally.last[(f"use1-az{index + 1}", seen)] = NOW - ago
    if draw(st.booleans()):
        tally.quota_at = NOW - draw(st.sampled_from([5.0, 400.0]))
        tally.quota_carried = draw(st.integers(0, 4))
    tally.latency = draw(st.dictionaries(st.integers(0, 12), st.integers(0, 30), max_size=4))
    return {
        "specs": world,
        # Mostly tight quotas: that is where the request's own holds get in its way.
        "limit": draw(st.one_of(st.integers(0, 3), st.integers(0, 8))),
        "quota_first": draw(st.booleans()),
        "give_back_latency": draw(st.sampled_from([0.05, 0.1, 0.4, 1.5])),
        "give_back_effect": draw(st.sampled_from([0.0, 0.5, 1.0])),
        "keep": draw(st.booleans()),
        "max_concurrency": draw(st.integers(1, 8)),
        "memory": MemoryView([tally], moment=NOW),
    }


def _measured_latency_only() -> MemoryView:
    tally = Tally(REGION, TYPE, hour_of(NOW))
    tally.latency = {1: 40}
    return MemoryView([tally], moment=NOW)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
# Found by hand (see test_fanout_scenarios): a retry next to a kept hold, refused again.
@example(
    {
        "specs": [Spec("available", weight=2, latency=1.0, effect=0.9)] + [Spec("available")] * 2,
        "limit": 2,
        "quota_first": True,
        "give_back_latency": 1.0,
        "give_back_effect": 1.0,
        "keep": True,
        "max_concurrency": 8,
        "memory": _measured_latency_only(),
    }
)
def test_the_engine_answers_what_one_at_a_time_would(world: dict[str, object]) -> None:
    specs_: list[Spec] = world["specs"]  # type: ignore[assignment]
    memory: MemoryView = world["memory"]  # type: ignore[assignment]
    keep: bool = world["keep"]  # type: ignore[assignment]
    max_concurrency: int = world["max_concurrency"]  # type: ignore[assignment]
    ec2 = SimEc2(
        specs_,
        limit=world["limit"],  # type: ignore[arg-type]
        quota_first=world["quota_first"],  # type: ignore[arg-type]
        give_back_latency=world["give_back_latency"],  # type: ignore[arg-type]
        give_back_effect=world["give_back_effect"],  # type: ignore[arg-type]
    )
    deadline = BUDGET if any(spec.forever for spec in specs_) else 1e9
    done = run(ec2, keep=keep, max_concurrency=max_concurrency, memory=memory, deadline=deadline)
    result = done.result
    expected = oracle(specs_, ec2.limit, ec2.quota_first)

    # The answer: the same decision, and the same outcome for every candidate up to it.
    assert not result.stalled
    assert result.decision.kind is expected.decision
    assert result.decision.index == expected.index
    upto = len(expected.outcomes)
    assert [r.outcome for r in result.reports[:upto]] == list(expected.outcomes)
    if expected.code is not None:
        assert result.reports[upto - 1].error_code == expected.code
    # Every candidate before the answer was really tried, in this request.
    assert set(range(upto)) <= set(ec2.created)

    # Holds: every one not kept was given back, once, and EC2 holds nothing else.
    won = expected.decision is DecisionKind.WON
    if keep and won:
        assert result.kept_index == expected.index
        assert list(ec2.live) == [result.kept]
        assert ec2.holds_made[result.kept] == expected.index
    else:
        assert result.kept is None
        assert ec2.live == {}
    returned = set(ec2.given_back)
    assert len(returned) == len(ec2.given_back)
    assert returned == set(ec2.holds_made) - ({result.kept} if result.kept else set())
    assert result.give_backs == len(ec2.given_back)
    assert result.creates == len(ec2.created)

    # Concurrency: never more creates in flight than allowed, never a start at or over the
    # cap, and never more holds at once than the quota was known (fresh memory) to carry.
    assert done.runtime.max_in_flight["try"] <= max_concurrency
    assert all(busy < cap for _, busy, cap in result.starts)
    known_cap = memory.quota_cap(list(_keys(len(specs_))))
    if known_cap is not None:
        assert result.max_busy <= max(known_cap, 1)
        assert ec2.max_live <= known_cap

    # Reservation-seconds: what the engine measured is what the sim's clock says.
    assert abs(result.reservation_seconds - done.runtime.reservation_seconds()) < 1e-6
    assert all(r.cancelled in (None, True) for r in result.reports)


def _keys(n: int):  # the memory keys of ``fanout_sim.candidates``
    from fanout_sim import candidates

    return [c.key for c in candidates(n)]
