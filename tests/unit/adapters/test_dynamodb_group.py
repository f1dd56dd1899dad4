"""The grouped probes' answers (``logic.grouping.answers``) and items in the state table
(``adapters.dynamodb_group_items``): a member's answer goes through the table and back
unchanged, and whatever the shared table holds that is not a sound answer is dropped (the
member then probes alone), never believed."""

from __future__ import annotations

import json

from capacity_broker.adapters.dynamodb_group_items import (
    PREFIX,
    answer_item,
    group_item,
    kind_item,
)
from capacity_broker.adapters.dynamodb_group_items import kind as _kind
from capacity_broker.adapters.ec2 import Subnet
from capacity_broker.domain.errors import Outcome
from capacity_broker.domain.group import (
    GroupKey,
    GroupState,
)
from capacity_broker.domain.group_plan import (
    MemberAnswer,
    Seen,
    Verdict,
)
from capacity_broker.logic.grouping.answers import (
    ALONE,
    decode,
    decode_answer,
    decode_subnets,
    encode,
    encode_answer,
    encode_subnets,
)
from capacity_broker.logic.grouping.meeting import kind_id
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
    for item in (kind_item(kind_id(key)), group_item("group-abc"), answer_item("group-abc", 3)):
        assert item.startswith(PREFIX)
    # The caller's values are digested: no subnet id (nor a pattern in one) is in the id.
    assert "subnet" not in kind_id(key) and "*" not in kind_id(key)
    other = GroupKey("us-east-1", "g6.xlarge", ("subnet-?", "subnet-*"), "Linux/UNIX", "default")
    assert kind_id(key) != kind_id(other)  # the order of the subnets is part of the kind


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


def test_a_published_answer_is_read_back_only_for_the_member_s_own_subnets() -> None:
    text = encode(WON, 5, PLACES + PLACES[:2])
    wrong = decode(encode(WON, 5, PLACES), IDS)
    assert wrong.answer is None  # won at subnet 2 of a member with two
    found = decode(encode(WON, 5, [*PLACES, PLACES[0]]), [*IDS, IDS[0]])
    assert found.answer == WON and found.size == 5
    assert decode(text, IDS).answer is None
    assert decode(ALONE, IDS).answer is None  # the leader could not answer it
    for size in (0, 1, 201, True, "5", 2.5):
        data = json.loads(encode(WON, 5, [*PLACES, PLACES[0]]))
        data["n"] = size
        assert decode(json.dumps(data), [*IDS, IDS[0]]).answer is None, size
    assert decode("[" * 20_000, IDS).answer is None


def test_a_kind_s_item_is_read_as_a_shared_table_may_hold_it() -> None:
    """The kind's item is read from a shared table: a count or a patience that is not a finite
    number is taken as no slot and endless patience (nobody joins on a made-up number), and a
    state that is not one of the protocol's is none."""
    sound = {"gid": {"S": "group-" + "0" * 32}, "st": {"S": "open"}, "n": {"N": "3"}}
    found = _kind({**sound, "p": {"N": "12.5"}, "seen": {"S": "abc"}})
    assert (found.state, found.slots, found.patience, found.seen) == (
        GroupState.OPEN,
        3,
        12.5,
        "abc",
    )
    for broken in ("NaN", "1e400", "x", "-2"):
        odd = _kind({**sound, "n": {"N": broken}, "p": {"N": broken}})
        assert odd.slots == 0 and odd.patience == float("inf"), broken
    assert _kind({**sound, "st": {"S": "winning"}}).state is None
    assert _kind({**sound, "st": {"N": "1"}}).state is None


VPC = "vpc-0123456789abcdef0"


def test_local_and_wavelength_zones_are_zones() -> None:
    """A Local Zone's or a Wavelength Zone's subnets (VDI near its users) are sound places."""
    zones = [
        Subnet(
            "subnet-0a00000000000d401", "vpc-0123456789abcdef0", "us-west-2-lax-1a", "usw2-lax1-az1"
        ),
        Subnet(
            "subnet-0b00000000000d402", "vpc-0123456789abcdef0", "us-east-1-bos-1a", "use1-bos1-az1"
        ),
        Subnet(
            "subnet-0c00000000000d403",
            VPC,
            "us-east-1-wl1-bos-wlz-1",
            "use1-wl1-bos-wlz1",
        ),
    ]
    ids = [z.subnet_id for z in zones]
    assert decode_subnets(encode_subnets(zones), ids) == zones
