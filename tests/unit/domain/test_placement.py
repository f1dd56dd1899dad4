"""Pairs in preference order."""

from __future__ import annotations

import pytest
from capacity_broker.domain.placement import Pair, pairs
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


@given(
    st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=10, unique=True),
    st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=20, unique=True),
)
def test_pairs_rank_every_combination(types: list[str], subnets: list[str]) -> None:
    ranked = pairs(types, subnets)
    assert len(ranked) == len(types) * len(subnets)
    assert [p.index for p in ranked] == list(range(len(ranked)))


def test_pair_is_frozen() -> None:
    pair = Pair("t", "s", 0)
    with pytest.raises(AttributeError):
        pair.index = 1  # type: ignore[misc]
