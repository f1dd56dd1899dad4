"""domain.discovery: patterns, durations, accelerators, the summary and the decision guide."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from capacity_broker.domain import discovery as rules
from hypothesis import given
from hypothesis import strategies as st
from moto.ec2.models.instance_types import INSTANCE_TYPES

T0 = datetime(2026, 11, 21, 11, 30, tzinfo=UTC)

# -- patterns --------------------------------------------------------------------------------

alphabet = st.sampled_from("ab.-5")
patterns = st.text(alphabet=st.sampled_from("ab.-5*?"), max_size=8)
texts = st.text(alphabet=alphabet, max_size=10)


@given(patterns, texts)
def test_wildcards_match_like_ec2_filters(pattern: str, text: str) -> None:
    # EC2 filter wildcards: "*" any run, "?" exactly one character (fnmatch without [] sets)
    assert rules.wildcard_match(pattern, text) == fnmatch.fnmatchcase(text, pattern)


@pytest.mark.parametrize(
    ("patterns", "instance_type", "expected"),
    [
        (["p5"], "p5.48xlarge", True),
        (["p5"], "p5e.48xlarge", False),  # a family is not a prefix of other families
        (["p6"], "p6-b200.48xlarge", True),  # ... but covers its variants
        (["p6"], "p6e-gb200.36xlarge", False),
        (["g6.*"], "g6.2xlarge", True),
        (["g6*"], "g6e.xlarge", True),
        (["P5.48XLARGE"], "p5.48xlarge", True),
        (["inf2.xlarge", "g6.xlarge"], "g6.xlarge", True),
        (["m7i.large"], "m7i.large2", False),
        ([], "anything.large", True),
        (None, "anything.large", True),
    ],
)
def test_instance_type_filters(
    patterns: list[str] | None, instance_type: str, expected: bool
) -> None:
    assert rules.matches_any(instance_type, patterns) is expected


def test_exact_types_only_without_wildcards() -> None:
    assert rules.exact_types(["p5.48xlarge", "g6.xlarge"]) == ["p5.48xlarge", "g6.xlarge"]
    assert rules.exact_types(["p5.48xlarge", "g6.*"]) is None
    assert rules.exact_types(["p5"]) is None  # a family expands to wildcards
    assert rules.exact_types([]) is None


# -- durations -------------------------------------------------------------------------------

VALID = [24 * d for d in range(1, 15)] + [24 * d for d in range(21, 183, 7)]


@pytest.mark.parametrize("hours", VALID)
def test_valid_block_durations(hours: int) -> None:
    assert rules.valid_block_hours(hours)
    assert rules.block_duration_error(hours) is None


@pytest.mark.parametrize("hours", [0, -24, 1, 23, 25, 15 * 24, 20 * 24, 22 * 24, 189 * 24, 4380])
def test_invalid_block_durations(hours: int) -> None:
    assert not rules.valid_block_hours(hours)
    message = rules.block_duration_error(hours)
    assert message is not None
    assert str(hours) in message


@given(st.integers(min_value=0, max_value=200 * 24))
def test_every_valid_duration_is_in_the_table(hours: int) -> None:
    assert rules.valid_block_hours(hours) == (hours in VALID)


@pytest.mark.parametrize(
    ("days", "hours"),
    [
        (0.5, 24),
        (1, 24),
        (7, 168),
        (10, 240),
        (14, 336),
        (15, 504),
        (21, 504),
        (22, 672),
        (182, 4368),
        (183, None),
    ],
)
def test_shortest_block_covering_days(days: float, hours: int | None) -> None:
    assert rules.block_hours_for_days(days) == hours
    if hours is not None:
        assert rules.valid_block_hours(hours)


def test_durations_are_tidy() -> None:
    assert rules.duration_hours(T0, T0 + timedelta(days=7)) == 168
    assert isinstance(rules.duration_hours(T0, T0 + timedelta(days=7)), int)
    assert rules.duration_hours(T0, T0 + timedelta(minutes=65)) == 1.08
    assert rules.duration_hours(T0, None) is None
    assert rules.duration_hours(None, T0) is None


# -- prices ----------------------------------------------------------------------------------


def test_price_per_instance_hour_and_savings() -> None:
    assert rules.per_instance_hour(84575.23, 16, 168) == pytest.approx(31.464, abs=1e-3)
    assert rules.per_instance_hour(100.0, 0, 24) is None
    assert rules.savings_percent(0.3, 1.0) == 70.0
    assert rules.savings_percent(0.3, None) is None
    assert rules.savings_percent(0.3, 0) is None
    assert rules.parse_price("0.3012") == 0.3012
    assert rules.parse_price("n/a") is None
    assert rules.parse_price("-1") is None
    assert rules.parse_price("nan") is None


def test_offerings_sort_cheapest_then_soonest() -> None:
    offers = [
        ("b", 31.4, T0 + timedelta(days=1)),
        ("a", 29.8, T0 + timedelta(days=3)),
        ("c", 29.8, T0 + timedelta(days=2)),
        ("d", None, T0),
    ]
    ordered = sorted(offers, key=lambda o: rules.offering_order(o[1], None, o[2], "az", o[0]))
    assert [o[0] for o in ordered] == ["c", "a", "b", "d"]


def test_latest_price_per_type_and_zone() -> None:
    point = rules.PricePoint
    points = [
        point("g6.xlarge", "us-east-1a", "Linux/UNIX", 0.35, T0 - timedelta(days=1)),
        point("g6.xlarge", "us-east-1a", "Linux/UNIX", 0.30, T0),
        point("g6.xlarge", "us-east-1b", "Linux/UNIX", 0.29, T0 - timedelta(hours=3)),
    ]
    latest = sorted(rules.latest_prices(points), key=lambda p: p.availability_zone)
    assert [(p.availability_zone, p.price) for p in latest] == [
        ("us-east-1a", 0.30),
        ("us-east-1b", 0.29),
    ]


# -- accelerators: EC2's own facts, never a family list ---------------------------------------


@pytest.mark.parametrize(
    ("instance_type", "accelerated", "label"),
    [
        ("p5.48xlarge", True, "8x NVIDIA H100 (640 GiB)"),
        ("p6-b200.48xlarge", True, "8x NVIDIA B200"),
        ("p6-b300.48xlarge", True, "8x NVIDIA B300"),
        ("g6.xlarge", True, "1x NVIDIA L4"),
        ("trn1.32xlarge", True, "16x Trainium"),
        ("trn2.48xlarge", True, "16x Trainium2"),
        ("inf2.xlarge", True, "1x Inferentia2"),  # a Neuron device (and an accelerator)
        ("c7i.48xlarge", False, ""),
        ("m7i.large", False, ""),
    ],
)
def test_accelerators_come_from_ec2_descriptions(
    instance_type: str, accelerated: bool, label: str
) -> None:
    facts = rules.accelerators_of(INSTANCE_TYPES[instance_type])
    assert facts.accelerated is accelerated
    assert facts.label.startswith(label)


def test_every_gpu_type_ec2_describes_counts_as_accelerated() -> None:
    for name, info in INSTANCE_TYPES.items():
        if (info.get("GpuInfo") or {}).get("Gpus"):
            assert rules.accelerators_of(info).accelerated, name


def test_instance_facts_and_fit() -> None:
    facts = rules.instance_facts(INSTANCE_TYPES["g6.2xlarge"])
    assert (facts.vcpus, facts.memory_gib, facts.architectures) == (8, 32, ("x86_64",))
    assert rules.fits(facts, "x86_64", 8, 32, gpu_only=True)
    assert not rules.fits(facts, "arm64")
    assert not rules.fits(facts, min_vcpus=9)
    assert not rules.fits(facts, min_memory_gib=32.5)
    plain = rules.instance_facts(INSTANCE_TYPES["m7i.large"])
    assert not rules.fits(plain, gpu_only=True)
    assert rules.fits(plain)


# -- the summary -----------------------------------------------------------------------------


@dataclass
class Row:
    reservation_type: str
    instance_type: str
    region: str
    total_capacity: int
    available_capacity: int
    duration_hours: float | None = None
    ultra_cluster_placement: bool | None = None
    used: int | None = None

    @property
    def used_capacity(self) -> int:
        return self.total_capacity - self.available_capacity if self.used is None else self.used


def test_summary_adds_up() -> None:
    rows = [
        Row("odcr", "inf2.xlarge", "us-east-1", 32, 12),
        Row("odcr", "g6.xlarge", "us-west-2", 64, 24),
        Row("odcr", "g6.2xlarge", "eu-west-1", 16, 4),
        Row("odcr", "p4d.24xlarge", "us-east-1", 16, 2),
    ]
    summary = rules.summarize(rows)
    # the seeds' ODCR example: 128 instances, 42 available (32.8% free)
    assert summary.total_capacity == 128
    assert summary.available_capacity == 42
    assert summary.used_capacity == 86
    assert summary.free_percent == 32.8
    assert summary.by_type == {"odcr": 4}
    assert summary.instance_types == ("g6.2xlarge", "g6.xlarge", "inf2.xlarge", "p4d.24xlarge")
    assert summary.regions == ("eu-west-1", "us-east-1", "us-west-2")
    assert summary.block_hours is None
    assert summary.ultra_cluster_placement is None


def test_block_summary() -> None:
    rows = [
        Row("capacity-block", "p5.48xlarge", "us-east-1", 32, 32, 168, True),
        Row("capacity-block", "p5.48xlarge", "us-west-2", 16, 16, 336, None),
        Row("capacity-block", "trn1.32xlarge", "us-east-1", 64, 64, 168, False),
        Row("odcr", "g6.xlarge", "us-east-1", 4, 0, 2.5, False),
    ]
    summary = rules.summarize(rows)
    assert summary.by_type == {"capacity-block": 3, "odcr": 1}
    assert summary.by_instance_type == {"g6.xlarge": 1, "p5.48xlarge": 2, "trn1.32xlarge": 1}
    assert summary.block_hours == (168, 336)  # the ODCR's 2.5 h is not a block duration
    assert summary.ultra_cluster_placement is True


def test_a_block_that_has_not_started_is_neither_free_nor_used() -> None:
    """Its size counts in the total (EC2 tags a scheduled block with it), its capacity is not
    available yet (EC2: "the available capacity appears as zero") and nothing uses it."""
    rows = [
        Row("capacity-block", "p5.48xlarge", "us-east-1", 4, 0, 24, None, used=0),
        Row("odcr", "g6.xlarge", "us-east-1", 4, 1, None, None),
    ]
    summary = rules.summarize(rows)
    assert (summary.total_capacity, summary.available_capacity) == (8, 1)
    assert summary.used_capacity == 3


@pytest.mark.parametrize(
    ("reservation_type", "total", "tags", "size"),
    [
        ("capacity-block", 0, {rules.BLOCK_SIZE_TAG: "4"}, 4),
        ("capacity-block", 4, {rules.BLOCK_SIZE_TAG: "4"}, 4),
        ("capacity-block", 2, {}, 2),
        ("capacity-block", 0, {rules.BLOCK_SIZE_TAG: "four"}, 0),
        ("default", 3, {rules.BLOCK_SIZE_TAG: "9"}, 3),
    ],
)
def test_reserved_size(reservation_type: str, total: int, tags: dict[str, str], size: int) -> None:
    assert rules.reserved_size(reservation_type, total, tags) == size


def test_empty_summary() -> None:
    summary = rules.summarize([])
    assert (summary.reservations, summary.total_capacity, summary.free_percent) == (0, 0, 0.0)


@given(
    st.lists(
        st.tuples(st.integers(0, 1000), st.integers(0, 1000)).map(lambda t: (max(t), min(t))),
        max_size=30,
    )
)
def test_summary_totals_are_the_sum_of_the_rows(sizes: list[tuple[int, int]]) -> None:
    rows = [Row("odcr", "m7i.large", "us-east-1", total, free) for total, free in sizes]
    summary = rules.summarize(rows)
    assert summary.total_capacity == sum(t for t, _ in sizes)
    assert summary.available_capacity == sum(f for _, f in sizes)
    assert summary.used_capacity == summary.total_capacity - summary.available_capacity
    assert 0 <= summary.free_percent <= 100


# -- the decision guide ----------------------------------------------------------------------


def test_fixed_training_gets_a_capacity_block() -> None:
    choice = rules.recommend("training", 32, 10, accelerated=True)
    assert choice.reservation_type is rules.ReservationKind.CAPACITY_BLOCK
    assert choice.block_hours == 240
    assert any("UltraCluster" in reason for reason in choice.reasons)


def test_training_durations_round_up_to_what_ec2_sells() -> None:
    choice = rules.recommend("training", 8, 17, accelerated=True)
    assert choice.block_hours == 21 * 24
    assert choice.notes


@pytest.mark.parametrize(
    ("workload", "count", "days", "accelerated", "why"),
    [
        ("inference", 20, None, True, "inference"),
        ("dev", 2, 3, True, "dev"),
        ("training", 8, None, True, "without a fixed schedule"),
        ("training", 8, 200, True, "182"),
        ("training", 8, 7, False, "accelerat"),
    ],
)
def test_everything_else_gets_an_odcr(
    workload: str, count: int, days: float | None, accelerated: bool, why: str
) -> None:
    choice = rules.recommend(workload, count, days, accelerated)
    assert choice.reservation_type is rules.ReservationKind.ODCR
    assert choice.block_hours is None
    assert any(why in reason for reason in choice.reasons)


def test_unknown_acceleration_does_not_rule_out_blocks() -> None:
    choice = rules.recommend("training", 8, 7, accelerated=None)
    assert choice.reservation_type is rules.ReservationKind.CAPACITY_BLOCK


def test_unknown_workload_is_refused() -> None:
    with pytest.raises(ValueError, match="batch"):
        rules.recommend("batch", 1, 1, True)


def test_more_instances_than_one_block_are_several_blocks() -> None:
    # v3 "plan": split across blocks (it used to fall back to an ODCR past 64 instances).
    choice = rules.recommend("training", 65, 7, accelerated=True)
    assert choice.reservation_type is rules.ReservationKind.CAPACITY_BLOCK
    assert any("64" in note and "split" in note for note in choice.notes)


def test_the_block_a_run_needs_counts_ec2s_stop() -> None:
    # v3 "plan": a block covers a run only with the run's hours left before EC2 stops it, so
    # a 7-day run needs an 8-day block (the seeds' check, whole days of the block, said 7).
    choice = rules.recommend("training", 32, 7, True, block_hours=192)
    assert choice.block_hours == 192
    assert any("block of 8 days" in note for note in choice.notes)


def test_verdicts() -> None:
    assert [v.value for v in rules.Verdict] == ["ready", "buy", "split", "extend", "unavailable"]
    assert [v.exists for v in rules.Verdict] == [True, True, True, True, False]
    assert rules.listing_verdict(True, rules.Verdict.BUY) is rules.Verdict.BUY
    assert rules.listing_verdict(False, rules.Verdict.READY) is rules.Verdict.UNAVAILABLE


def test_kinds_and_usable_states() -> None:
    assert rules.kinds_for("all") == frozenset(rules.ReservationKind)
    assert rules.kinds_for("odcr") == {rules.ReservationKind.ODCR}
    assert rules.kind_of("capacity-block") is rules.ReservationKind.CAPACITY_BLOCK
    assert rules.kind_of("default") is rules.ReservationKind.ODCR
    assert rules.kind_of(None) is rules.ReservationKind.ODCR
    assert rules.is_usable(rules.ReservationKind.CAPACITY_BLOCK, "scheduled")
    # v3 "Future-dated ODCRs": capacity lists them on their way (an ODCR is scheduled only
    # when future-dated); one EC2 will not deliver is inactive.
    for state in ("assessing", "scheduled", "delayed"):
        assert rules.is_usable(rules.ReservationKind.ODCR, state)
    assert not rules.is_usable(rules.ReservationKind.ODCR, "unsupported")
    assert not rules.is_usable(rules.ReservationKind.ODCR, "cancelled")
