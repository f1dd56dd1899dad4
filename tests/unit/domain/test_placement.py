"""Pairs in preference order and the preferred winner."""

from __future__ import annotations

import random

import pytest
from capacity_broker.domain.placement import Pair, first_success, pairs, subnets_in_az
from hypothesis import given
from hypothesis import strategies as st


def test_pairs_are_type_major() -> None:
    result = pairs(["c7i.48xlarge", "c6i.32xlarge"], ["subnet-a", "subnet-b", "subnet-c"])
    assert [(p.instance_type, p.subnet_id, p.index) for p in result] == [
        ("c7i.48xlarge", "subnet-a", 0),
        ("c7i.48xlarge", "subnet-b", 1),
        ("c7i.48xlarge", "subnet-c", 2),
        ("c6i.32xlarge", "subnet-a", 3),
        ("c6i.32xlarge", "subnet-b", 4),
        ("c6i.32xlarge", "subnet-c", 5),
    ]


@pytest.mark.parametrize(
    ("types", "subnets", "match"),
    [
        ([], ["subnet-a"], "instance_types"),
        (["c7i.large"], [], "subnet_ids"),
        (["c7i.large", "c7i.large"], ["subnet-a"], "twice"),
        (["c7i.large"], ["subnet-a", "subnet-a"], "twice"),
    ],
)
def test_pairs_refuse_empty_or_repeated(types: list[str], subnets: list[str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        pairs(types, subnets)


def test_first_success_prefers_the_lowest_index() -> None:
    all_pairs = pairs(["t1.a", "t2.a"], ["s1", "s2"])
    results = [(all_pairs[3], True), (all_pairs[1], True), (all_pairs[0], False)]
    assert first_success(results) == all_pairs[1]
    assert first_success(dict(results)) == all_pairs[1]
    assert first_success([(p, False) for p in all_pairs]) is None
    assert first_success([]) is None


def test_subnets_in_az_keep_request_order() -> None:
    az_of = {"s1": "use1-az1", "s2": "use1-az2", "s3": "use1-az1"}
    assert subnets_in_az(["s3", "s2", "s1"], az_of, "use1-az1") == ["s3", "s1"]
    assert subnets_in_az(["s4"], az_of, "use1-az1") == []


@given(
    st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=10, unique=True),
    st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=20, unique=True),
    st.randoms(use_true_random=False),
    st.data(),
)
def test_winner_is_the_first_winning_pair_in_preference_order(
    types: list[str], subnets: list[str], rng: random.Random, data: st.DataObject
) -> None:
    ranked = pairs(types, subnets)
    assert len(ranked) == len(types) * len(subnets)
    assert [p.index for p in ranked] == list(range(len(ranked)))
    won = data.draw(st.lists(st.booleans(), min_size=len(ranked), max_size=len(ranked)))
    results = list(zip(ranked, won, strict=True))
    rng.shuffle(results)  # completion order is arbitrary
    expected = next((p for p, w in zip(ranked, won, strict=True) if w), None)
    assert first_success(results) == expected


def test_pair_is_frozen() -> None:
    pair = Pair("t", "s", 0)
    with pytest.raises(AttributeError):
        pair.index = 1  # type: ignore[misc]
