"""The grouped probes' items in the state table (``adapters.dynamodb_group``): a member's answer
goes through the table and back unchanged, and whatever the shared table holds that is not a
sound answer is dropped (the member then probes alone), never believed."""

from __future__ import annotations

import json
import math

from capacity_broker.adapters.dynamodb_group import (
    PREFIX,
    answer_item,
    decode_answer,
    decode_subnets,
    encode_answer,
    encode_subnets,
    group_item,
    key_id,
)
from capacity_broker.adapters.ec2 import Subnet
from capacity_broker.domain.errors import Outcome
from capacity_broker.domain.group import GroupKey, MemberAnswer, Seen, Verdict
from hypothesis import given
from hypothesis import strategies as st

SUBNETS = 4

codes = st.one_of(
    st.none(), st.sampled_from(["InsufficientInstanceCapacity", "RequestLimitExceeded"])
)
reservations = st.one_of(st.none(), st.from_regex(r"cr-[0-9a-f]{17}", fullmatch=True))
seen = st.builds(
    Seen,
    subnet=st.integers(0, SUBNETS - 1),
    outcome=st.sampled_from(list(Outcome)),
    error_code=codes,
    reservation_id=reservations,
)


@st.composite
def answers(draw: st.DrawFn) -> MemberAnswer:
    verdict = draw(st.sampled_from([v for v in Verdict if v is not Verdict.UNDECIDED]))
    attempts = draw(st.lists(seen, max_size=SUBNETS))
    subnet, reservation = None, draw(reservations)
    if verdict is Verdict.WON:
        # A member answered "won" only where its group's hold was confirmed.
        subnet = draw(st.integers(0, SUBNETS - 1))
        reservation = draw(st.from_regex(r"cr-[0-9a-f]{17}", fullmatch=True))
        attempts.append(Seen(subnet, Outcome.AVAILABLE, None, reservation))
    return MemberAnswer(
        verdict=verdict,
        subnet=subnet,
        seen=tuple(attempts),
        error_code=draw(codes),
        reservation_id=reservation,
        cancelled=draw(st.sampled_from([True, False, None])),
        reservation_seconds=draw(st.floats(0, 3600, allow_nan=False)),
    )


@given(answers())
def test_an_answer_comes_back_as_it_was_published(answer: MemberAnswer) -> None:
    assert decode_answer(encode_answer(answer), SUBNETS) == answer


WON = MemberAnswer(
    verdict=Verdict.WON,
    subnet=2,
    seen=(
        Seen(0, Outcome.INSUFFICIENT_CAPACITY, "InsufficientInstanceCapacity"),
        Seen(2, Outcome.AVAILABLE, None, "cr-0123456789abcdef0"),
    ),
    error_code=None,
    reservation_id="cr-0123456789abcdef0",
    cancelled=True,
    reservation_seconds=1.5,
)


def forged(**changes: object) -> str:
    data = json.loads(encode_answer(WON))
    data.update(changes)
    return json.dumps(data)


def test_what_is_not_a_sound_answer_is_dropped() -> None:
    assert decode_answer(encode_answer(WON), SUBNETS) == WON
    for text in (
        forged(s=7),  # a subnet the member never asked about
        forged(s=-1),
        forged(s=True),
        forged(v="undecided"),
        forged(v="winner"),
        forged(s=None),  # won, but nowhere
        forged(r="cr-*"),  # not a reservation id
        forged(r="cr-0123456789abcdef0 OR 1=1"),
        forged(e="Insufficient*"),
        forged(rs=-1),
        forged(rs=float("inf")),
        forged(c="yes"),
        forged(seen=[[9, "available", None, None]]),
        forged(seen=[[0, "maybe", None, None]]),
        "not json",
        "[]",
        "{}",
    ):
        assert decode_answer(text, SUBNETS) is None, text


def test_every_item_is_under_the_groups_own_prefix() -> None:
    key = GroupKey("us-east-1", "g6.xlarge", ("subnet-*", "subnet-?"), "Linux/UNIX", "default")
    for item in (key_id(key), group_item("group-abc"), answer_item("group-abc", "0" * 32)):
        assert item.startswith(PREFIX)
    # The caller's values are digested: no subnet id (nor a pattern in one) is in the id.
    assert "subnet" not in key_id(key) and "*" not in key_id(key)
    other = GroupKey("us-east-1", "g6.xlarge", ("subnet-?", "subnet-*"), "Linux/UNIX", "default")
    assert key_id(key) != key_id(other)  # the order of the subnets is part of the kind


PLACES = [
    Subnet("subnet-0a00000000000d401", "vpc-0123456789abcdef0", "us-east-1a", "use1-az1"),
    Subnet("subnet-0b00000000000d402", "vpc-0123456789abcdef0", "us-east-1b", "use1-az2"),
]
IDS = [s.subnet_id for s in PLACES]


def test_the_leaders_look_up_is_taken_only_for_the_members_own_subnets() -> None:
    assert decode_subnets(encode_subnets(PLACES), IDS) == PLACES
    assert decode_subnets(encode_subnets(PLACES), list(reversed(IDS))) is None  # order
    assert decode_subnets(encode_subnets(PLACES[:1]), IDS) is None  # one missing
    swapped = [
        Subnet("subnet-0fffffffffffff999", "vpc-0123456789abcdef0", "us-east-1a", "use1-az1")
    ]
    assert decode_subnets(encode_subnets(swapped), IDS[:1]) is None  # another subnet
    bad_az = [Subnet(PLACES[0].subnet_id, PLACES[0].vpc_id, "us-east-1a; rm", "use1-az1")]
    assert decode_subnets(encode_subnets(bad_az), IDS[:1]) is None
    bad_vpc = [Subnet(PLACES[0].subnet_id, "vpc-*", "us-east-1a", "use1-az1")]
    assert decode_subnets(encode_subnets(bad_vpc), IDS[:1]) is None
    for text in ("nope", "{}", "[[1, 2, 3, 4]]", '[["a", "b"]]'):
        assert decode_subnets(text, IDS[:1]) is None


def test_answers_that_claim_what_no_hold_confirmed_are_dropped() -> None:
    deep = "[" * 20_000
    assert decode_answer(deep, SUBNETS) is None  # no RecursionError escapes
    assert decode_subnets(deep, IDS) is None
    assert decode_answer(forged(c=0), SUBNETS) is None  # a number is not a bool
    assert decode_answer(forged(c=1), SUBNETS) is None
    assert decode_answer(forged(r=None), SUBNETS) is None  # won with no hold
    nowhere = [[0, "insufficient_capacity", "InsufficientInstanceCapacity", None]]
    assert decode_answer(forged(seen=nowhere), SUBNETS) is None  # won, nothing available there


def test_a_pointer_whose_leader_count_is_not_one_names_no_group() -> None:
    """The kind's item is read from a shared table: a leader's count that is not a whole
    number of at least one (or not a finite number at all) makes it name no group, so the
    arrival opens one of its own instead of joining on a made-up count."""
    from capacity_broker.adapters.dynamodb_group import _lobby

    gid = "group-" + "0" * 32
    pointer = {"gid": {"S": gid}, "closes": {"N": "100"}}
    assert _lobby({**pointer, "lead": {"N": "3"}}).leader_count == 3
    assert _lobby(pointer).group_id == gid  # (a pointer written before the count was kept)
    for broken in ("0", "1.5", "-2", "1e400", "NaN", "x"):
        found = _lobby({**pointer, "lead": {"N": broken}})
        assert found.group_id is None and found.leader_count == 1, broken


def test_a_pointer_to_an_older_version_s_group_is_not_joined_but_replaced() -> None:
    """A pointer without this version's format names a group an older version opened: its
    members are written so that this version's leader cannot read them, nor the older
    leader this version's. The arrival does not join it (no time left to join: ``closes``
    is behind it) but knows its id, so its own group replaces it."""
    from capacity_broker.adapters.dynamodb_group import FORMAT, _lobby

    gid = "group-" + "0" * 32
    pointer = {"gid": {"S": gid}, "closes": {"N": "100"}, "lead": {"N": "1"}}
    assert _lobby({**pointer, "format": {"S": FORMAT}}).closes == 100.0
    for older in (
        pointer,
        {**pointer, "format": {"S": "lists"}},
        {**pointer, "format": {"N": "3"}},
    ):
        found = _lobby(older)
        assert found.group_id == gid and found.closes == -math.inf
