"""A member's answer as its leader writes it for the member to read (one text per slot).

The store is shared (a state table any of the account's principals may write), so what is read
is checked: an answer that is not sound (an unknown verdict or outcome, a subnet outside the
member's own list, a reservation id that is not one, "won" with no hold EC2 confirmed) is
dropped, and the member probes alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...adapters.ec2 import Subnet
from ...domain.errors import Outcome
from ...domain.group import (
    MAX_MEMBERS,
)
from ...domain.group_plan import (
    MemberAnswer,
    Seen,
    Verdict,
)

_RESERVATION = re.compile(r"cr-[0-9a-f]{8,32}")
_CODE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
_MAX_SECONDS = 24 * 60 * 60.0
# What a leader writes for a member it cannot answer: probe alone, at once.
ALONE = "alone"


@dataclass(frozen=True)
class Published:
    """A member's answer as read back (``answer`` None: the member probes alone), the size of
    its group, and the leader's look-up of the member's subnets."""

    answer: MemberAnswer | None
    size: int
    subnets: list[Subnet]


def encode(answer: MemberAnswer, size: int, subnets: Sequence[Subnet]) -> str:
    """One member's published answer: its verdict, its group's size and the subnets it indexes."""
    return json.dumps(
        {
            "a": json.loads(encode_answer(answer)),
            "n": size,
            "p": json.loads(encode_subnets(subnets)),
        },
        separators=(",", ":"),
    )


def decode(text: str, subnet_ids: Sequence[str]) -> Published:
    """A published text, checked against the member's own subnets."""
    none = Published(None, 0, [])
    if text == ALONE:
        return none
    try:
        data = json.loads(text[:40_000])
        size = data["n"]
        if type(size) is not int or not 2 <= size <= MAX_MEMBERS:
            return none
        subnets = decode_subnets(json.dumps(data["p"]), subnet_ids)
        answer = decode_answer(json.dumps(data["a"]), len(subnet_ids))
    except (KeyError, TypeError, ValueError, RecursionError):
        return none
    if subnets is None or answer is None:
        return none
    return Published(answer, size, subnets)


# AZ names and ids as EC2 spells them, Local Zones and Wavelength Zones included
# ("us-west-2-lax-1a", "usw2-lax1-az1", "use1-wl1-bos-wlz1").
_AZ = re.compile(r"[a-z]{2}(-[a-z0-9]+){2,6}")
_AZ_ID = re.compile(r"[a-z]{3,4}[0-9]?(-[a-z0-9]+){1,4}")
_VPC = re.compile(r"vpc-[0-9a-f]{8,17}")


def encode_subnets(subnets: Sequence[Subnet]) -> str:
    return json.dumps(
        [[s.subnet_id, s.vpc_id, s.availability_zone, s.availability_zone_id] for s in subnets],
        separators=(",", ":"),
    )


def decode_subnets(text: str, subnet_ids: Sequence[str]) -> list[Subnet] | None:
    """The leader's look-up of the member's subnets: exactly the member's ids, in its order,
    with AZ names and ids that are such; None otherwise."""
    try:
        rows = json.loads(text[:20_000])
        subnets = [Subnet(*row) for row in rows if isinstance(row, list) and len(row) == 4]
    except (TypeError, ValueError, RecursionError):
        return None
    if [s.subnet_id for s in subnets] != list(subnet_ids) or len(subnets) != len(rows):
        return None
    for s in subnets:
        fields = (s.vpc_id, s.availability_zone, s.availability_zone_id)
        if not all(isinstance(f, str) for f in fields):
            return None
        if not (
            _VPC.fullmatch(s.vpc_id)
            and _AZ.fullmatch(s.availability_zone)
            and _AZ_ID.fullmatch(s.availability_zone_id)
        ):
            return None
    return subnets


def encode_answer(answer: MemberAnswer) -> str:
    return json.dumps(
        {
            "v": answer.verdict.value,
            "s": answer.subnet,
            "seen": [
                [s.subnet, s.outcome.value, s.error_code, s.reservation_id] for s in answer.seen
            ],
            "e": answer.error_code,
            "r": answer.reservation_id,
            "c": answer.cancelled,
            "rs": answer.reservation_seconds,
        },
        separators=(",", ":"),
    )


def decode_answer(text: str, subnets: int) -> MemberAnswer | None:
    """A published answer, checked; None when any part of it is not sound."""
    try:
        data = json.loads(text[:20_000])
        verdict = Verdict(data["v"])
        if verdict is Verdict.UNDECIDED:
            return None
        seen = tuple(
            Seen(_index(at, subnets), Outcome(outcome), _code(code), _reservation(rid))
            for at, outcome, code, rid in data["seen"]
        )
        subnet = None if data["s"] is None else _index(data["s"], subnets)
        if (verdict is Verdict.WON) != (subnet is not None):
            return None
        cancelled = data["c"]
        seconds = float(data["rs"])
        if not (cancelled is None or type(cancelled) is bool) or not 0 <= seconds <= _MAX_SECONDS:
            return None
        reservation = _reservation(data["r"])
        if verdict is Verdict.WON and not (
            reservation is not None
            and any(
                s.subnet == subnet and s.outcome is Outcome.AVAILABLE and s.reservation_id
                for s in seen
            )
        ):
            return None  # "won" with no hold that EC2 confirmed there is not an answer
        return MemberAnswer(
            verdict=verdict,
            subnet=subnet,
            seen=seen,
            error_code=_code(data["e"]),
            reservation_id=reservation,
            cancelled=cancelled,
            reservation_seconds=seconds,
        )
    except (KeyError, TypeError, ValueError, RecursionError):
        return None


def _index(value: Any, subnets: int) -> int:
    if type(value) is not int or not 0 <= value < subnets:
        raise ValueError("not one of the member's subnets")
    return value


def _code(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _CODE.fullmatch(value):
        raise ValueError("not an error code")
    return value


def _reservation(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not _RESERVATION.fullmatch(value):
        raise ValueError("not a reservation id")
    return value
