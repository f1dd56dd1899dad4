"""Hostile input against every entry point, through the real handlers and the emulator.

Whatever arrives (wrong types, missing and extra fields, megabyte strings, odd Unicode,
negative and enormous counts, injected ``aws:``/``capacity-broker:`` tag keys in any case,
lists, strings, numbers, null), each handler answers with a structured answer and never an
exception; an ``invalid_request`` answer made no call that changes anything (the emulator's
call log holds only Describe*/Get*/List* calls, of any service); the answer serializes to
JSON (strict: no NaN, no lone surrogate), stays small whatever the input's size and never
echoes a long input string; its ``request_id`` is the event's own when valid, otherwise a
generated one. Reservations the broker does not own are never changed by any event.

Most events are valid ones with one field corrupted (random garbage rarely gets past the first
validator); the rest are valid events, which may be answered validly and may then reserve and
cancel (the call log is only judged for ``invalid_request`` answers), and pure garbage. When a
corruption is certain to make the event invalid (a missing required field, an unknown field, a
value of the wrong JSON type, an out-of-range number, a megabyte or NUL-bearing string, a
reserved tag key, a text event), the answer must be ``invalid_request``.

Example counts are per entry point (the ``EXAMPLES`` table); ``BROKER_PROOF_SCALE=10``
multiplies them and ``BROKER_PROOF_RANDOM=1`` draws fresh examples instead of the fixed,
derandomized set CI runs (see docs/reliability.md).
"""

from __future__ import annotations

import copy
import json
import os
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest
from capacity_broker.handlers import capacity, cleaner, probe, release, reserve
from capacity_broker.models import (
    CapacityRequest,
    ProbeRequest,
    ReleaseRequest,
    ReserveRequest,
    SweepRequest,
    is_request_id,
)
from hypothesis import HealthCheck, Phase, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:Exception\\(AnyServiceError\\):UserWarning"),
]

SCALE = max(1, int(os.environ.get("BROKER_PROOF_SCALE", "1")))
RANDOM = os.environ.get("BROKER_PROOF_RANDOM", "") == "1"
EXAMPLES = {
    "probe": 150,
    "reserve": 200,
    "release": 120,
    "cleaner_schedule": 100,
    "cleaner_stack": 100,
    "cleaner_sweep": 100,
    "capacity": 120,
}


def hostile(entry_point: str) -> settings:
    return settings(
        max_examples=EXAMPLES[entry_point] * SCALE,
        deadline=None,
        derandomize=not RANDOM,
        database=settings.default.database if RANDOM else None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
        # One emulator and one world per test function; each example starts from a cleared
        # call log (and re-seeds what it needs), so no example judges another's calls.
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )


# -- the world ----------------------------------------------------------------------------------

CLUSTER = "demo-cluster"  # tests/integration/conftest.py's broker fixture
REGION = "us-east-1"
SUBNETS = ["subnet-01a0000000000000a", "subnet-01b0000000000000b", "subnet-01c0000000000000c"]
UNKNOWN_SUBNET = "subnet-0ffffffffffffff00"  # well-formed, not in the account
IMAGES = ["ami-0de00000000000001", "ami-0de00000000000003"]
TEMPLATE_ID = "lt-0f000000000000001"
STACK = "soca-job-1234"
OURS = {
    "capacity-broker:cluster-id": CLUSTER,
    "capacity-broker:request-id": "seeded",
    "capacity-broker:subnet-id": SUBNETS[0],
}


def _hold(name: str, tags: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "instance_type": "c7i.48xlarge",
        "availability_zone": f"{REGION}a",
        "count": 1,
        "created": "-60s",
        "end_date": "+4m",
        "match": "targeted",
        "tags": tags,
        **extra,
    }


OUR_HOLD = _hold(
    "our-hold",
    OURS | {"capacity-broker:purpose": "hold", "capacity-broker:stack-name": STACK},
)
WORLD: dict[str, Any] = {
    "settings": {"expiry_lag_seconds": 3600},
    "regions": {
        REGION: {
            "vpcs": [
                {
                    "id": "vpc-0c1a5e00000000001",
                    "cidr": "10.10.0.0/16",
                    "subnets": [
                        {"id": s, "availability_zone": f"{REGION}{z}", "cidr": f"10.10.{i}.0/24"}
                        for i, (s, z) in enumerate(zip(SUBNETS, "abc", strict=True), 1)
                    ],
                }
            ],
            "pools": [
                {"availability_zone": f"{REGION}a", "instance_type": "g6.xlarge", "capacity": 0},
                {"availability_zone": f"{REGION}b", "instance_type": "g6.xlarge", "capacity": 8},
                {"availability_zone": f"{REGION}c", "instance_type": "g6.xlarge", "capacity": 8},
                {"availability_zone": f"{REGION}a", "instance_type": "c7i.48xlarge", "capacity": 4},
                {
                    "availability_zone": f"{REGION}c",
                    "instance_type": "c7i.48xlarge",
                    "capacity": 64,
                },
            ],
            "images": [
                {"id": IMAGES[0], "name": "linux", "platform_details": "Linux/UNIX"},
                {"id": IMAGES[1], "name": "windows", "platform_details": "Windows"},
            ],
            "launch_templates": [
                {
                    "id": TEMPLATE_ID,
                    "name": "hpc",
                    "data": {"ImageId": IMAGES[0], "InstanceType": "c7i.48xlarge"},
                }
            ],
            "reservations": [
                # never to be changed by any event: a team's ODCR, another cluster's hold, a
                # reservation with this cluster's id but no purpose
                _hold("user-odcr", {"team": "ml"}, match="open", count=4, used=1, end_date=None),
                _hold(
                    "other-cluster",
                    OURS
                    | {
                        "capacity-broker:cluster-id": "other-cluster",
                        "capacity-broker:purpose": "hold",
                        "capacity-broker:stack-name": STACK,
                    },
                    created="-2h",
                    end_date="-1h",
                ),
                _hold("no-purpose", OURS, created="-2h"),
                OUR_HOLD,
                _hold(
                    "our-old-probe",
                    OURS | {"capacity-broker:purpose": "probe"},
                    created="-10m",
                    end_date="-8m",
                ),
            ],
            "capacity_blocks": [
                {
                    "name": "block-ours",
                    "instance_type": "p5.48xlarge",
                    "availability_zone": f"{REGION}b",
                    "count": 2,
                    "start": "-1d",
                    "duration_hours": 72,
                    "tags": OURS
                    | {"capacity-broker:purpose": "hold", "capacity-broker:stack-name": STACK},
                },
            ],
        }
    },
}
PROTECTED = ("user-odcr", "other-cluster", "no-purpose", "block-ours")
# Calls that would change a reservation itself (using one, e.g. as a launch template's
# target, is not changing it).
CHANGES_A_RESERVATION = {
    "CancelCapacityReservation",
    "ModifyCapacityReservation",
    "CreateTags",
    "DeleteTags",
    "MoveCapacityReservationInstances",
}


@dataclass
class World:
    emulator: Any
    ids: dict[str, str]
    stack_id: str

    @property
    def protected(self) -> set[str]:
        return {self.ids[name] for name in PROTECTED}


@pytest.fixture
def world(broker: Any) -> World:
    """One small account per test function: three subnets, pools, images, a launch template,
    this cluster's reservations and everything it must never touch, and a stack."""
    ids = dict(broker.load_scenario(copy.deepcopy(WORLD)).reservations)
    client = boto3.client("cloudformation", region_name=REGION)
    stack_id = client.create_stack(
        StackName=STACK,
        TemplateBody=json.dumps({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}}),
    )["StackId"]
    return World(broker, ids, stack_id)


# -- hostile values -----------------------------------------------------------------------------

ODD = [
    "\x00",  # NUL
    "\ud800",  # lone surrogates
    "\udfff",
    "\u200f",  # right-to-left mark
    "\u202e",  # right-to-left override
    "\u0301",  # combining acute accent
    "e\u0308",  # e + combining diaeresis
    "\U0001f600",  # emoji
    "\U0001f469\u200d\U0001f469\u200d\U0001f467",  # ZWJ family
    "\ufeff",  # BOM
    "\u2028",  # line separator
    "\x7f",
    "\t",
    "\n",
    "\uff21\uff37\uff33:",  # full-width AWS:
    "\u0130",  # dotted capital I (casefolds to two characters)
    "\U0010ffff",
    "a",
    "-",
    ":",
    "subnet-",
]


def _classes(text: str) -> frozenset[str]:
    cats = {unicodedata.category(c) for c in text}
    found = set()
    if "Cc" in cats:
        found.add("control")
    if "Cs" in cats:
        found.add("surrogate")
    return frozenset(found)


@dataclass(frozen=True)
class Hostile:
    """A hostile value and what makes it certainly invalid for some fields."""

    value: Any
    label: str
    huge: bool = False  # longer than any bounded string field
    bad_chars: bool = False  # NUL/control or a lone surrogate: refused by every string field


def _odd(parts: list[str]) -> Hostile:
    text = "".join(parts)
    return Hostile(text, "odd unicode", bad_chars=bool(_classes(text)))


def _huge(size: int, unit: str) -> Hostile:
    return Hostile(unit * size, f"{size}x{unit!r}", huge=True, bad_chars=bool(_classes(unit)))


def as_hostile(value: Any) -> Hostile:
    """A plain value, classified like the generated ones."""
    text = value if isinstance(value, str) else ""
    return Hostile(value, "value", huge=len(text) > 1_000, bad_chars=bool(_classes(text)))


BIG_INTS = [-1, 0, 1001, 100_001, 2**31, 2**63, 2**64, 10**30, -(10**30)]
hostile_values = st.one_of(
    st.just(Hostile(None, "null")),
    st.booleans().map(lambda b: Hostile(b, "bool")),
    st.sampled_from(BIG_INTS).map(lambda n: Hostile(n, "int")),
    st.integers().map(lambda n: Hostile(n, "int")),
    st.sampled_from([1.0, -0.0, 2.5, 1e308, float("inf"), float("-inf"), float("nan")]).map(
        lambda f: Hostile(f, "float")
    ),
    st.text(max_size=12).map(lambda t: Hostile(t, "text", bad_chars=bool(_classes(t)))),
    st.lists(st.sampled_from(ODD), min_size=1, max_size=8).map(_odd),
    st.builds(
        _huge,
        st.sampled_from([300, 5_000, 100_000, 1_000_000]),
        st.sampled_from(["x", "\u00e9", "\U0001f600", "\x00", "\u200f"]),
    ),
    st.sampled_from(["5", "true", "null", "[]", "{}", "1e3", " 1", "ami-", "cr-"]).map(
        lambda t: Hostile(t, "look-alike text")
    ),
    st.lists(st.integers(), max_size=3).map(lambda v: Hostile(v, "list")),
    st.dictionaries(st.sampled_from(["id", "a", ""]), st.integers(), max_size=2).map(
        lambda v: Hostile(v, "object")
    ),
    st.lists(st.just("subnet-01a0000000000000a"), min_size=21, max_size=25).map(
        lambda v: Hostile(v, "long list")
    ),
)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    return "object"


# -- the shapes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class F:
    """What a field accepts, as far as certainty about a corruption goes."""

    kind: str  # "str" | "int" | "bool" | "list" | "object" | "time" (lax: str, int, float)
    required: bool = False
    nullable: bool = False
    bounded: bool = True  # strings: a length bound and a pattern or character check
    lo: int | None = None
    hi: int | None = None
    text_ok: bool = False  # some text is accepted too (EventBridge Scheduler's detail "{}")

    def certainly_refuses(self, h: Hostile) -> bool:
        kind = json_type(h.value)
        if kind == "null":
            return not self.nullable
        if self.kind == "time":
            return kind in ("bool", "list", "object") or (kind == "str" and h.bad_chars)
        if kind == "str" and self.text_ok:
            return False
        if kind != self.kind:
            return True
        if kind == "int" and self.lo is not None and self.hi is not None:
            return not self.lo <= h.value <= self.hi
        if kind == "str" and self.bounded:
            return h.huge or h.bad_chars
        return False


@dataclass(frozen=True)
class Shape:
    name: str
    fields: Mapping[str, F]  # dotted paths for nested fields
    closed: bool = True  # unknown top-level fields refused (the broker's own models)
    tags: bool = False  # a "tags" object the request may carry
    lists: Mapping[str, int] = field(default_factory=dict)  # list field -> max length


PLACEMENT = {
    "request_id": F("str", nullable=True),
    "instance_platform": F("str"),
    "image_id": F("str", nullable=True),
    "tenancy": F("str"),
    "tags": F("object", nullable=True),
}
SHAPES = {
    "probe": Shape(
        "probe",
        {
            "instance_type": F("str", required=True),
            "subnet_ids": F("list", required=True),
            "instance_count": F("int", lo=1, hi=1000),
            **PLACEMENT,
        },
        tags=True,
        lists={"subnet_ids": 20},
    ),
    "reserve": Shape(
        "reserve",
        {
            "job_id": F("str", required=True),
            "instance_types": F("list", required=True),
            "subnet_ids": F("list", required=True),
            "instance_count": F("int", required=True, lo=1, hi=1000),
            "stack_name": F("str", nullable=True),
            "launch_template": F("object", nullable=True),
            "launch_template.id": F("str", required=True),
            "launch_template.version": F("str"),
            "capacity_reservation_id": F("str", nullable=True),
            "placement_group_arn": F("str", nullable=True),
            "provision": F("bool"),
            "strict": F("bool", nullable=True),
            "attempt": F("int", nullable=True, lo=0, hi=100_000),
            **PLACEMENT,
        },
        tags=True,
        lists={"subnet_ids": 20, "instance_types": 10},
    ),
    "release": Shape(
        "release",
        {
            "request_id": F("str", nullable=True),
            "job_id": F("str", nullable=True),
            "stack_name": F("str", nullable=True),
            "reservation_id": F("str", nullable=True),
        },
    ),
    "cleaner_sweep": Shape(
        "cleaner_sweep",
        {
            "action": F("str", required=True),
            "dry_run": F("bool"),
            "regions": F("list", nullable=True),
            "request_id": F("str", nullable=True),
        },
        lists={"regions": 40},
    ),
    "cleaner_schedule": Shape(
        "cleaner_schedule",
        {
            "version": F("str", bounded=False),
            "id": F("str", required=True, bounded=False),
            "detail-type": F("str", required=True),
            "source": F("str", required=True),
            "account": F("str", required=True, bounded=False),
            "time": F("time", required=True),
            "region": F("str", required=True, bounded=False),
            "resources": F("list", required=True),
            "detail": F("object", required=True, text_ok=True),
        },
        closed=False,
    ),
    "cleaner_stack": Shape(
        "cleaner_stack",
        {
            "version": F("str", required=True, bounded=False),
            "id": F("str", required=True, bounded=False),
            "detail-type": F("str", required=True),
            "source": F("str", required=True),
            "account": F("str", required=True, bounded=False),
            "time": F("time", required=True),
            "region": F("str", required=True),
            "resources": F("list", required=True),
            "detail": F("object", required=True),
            "detail.stack-id": F("str", required=True),
            "detail.status-details": F("object", required=True),
            "detail.status-details.status": F("str", required=True),
        },
        closed=False,
    ),
    "capacity": Shape(
        "capacity",
        {
            "reservation_type": F("str"),
            "instance_types": F("list", nullable=True),
            "regions": F("list", nullable=True),
            "gpu_only": F("bool"),
            "available_only": F("bool"),
            "min_capacity": F("int", lo=0, hi=100_000),
            "include_inactive": F("bool"),
            "request_id": F("str", nullable=True),
        },
        lists={"instance_types": 50, "regions": 40},
    ),
}


# -- valid events -------------------------------------------------------------------------------

request_ids = st.sampled_from(["vdi-42", "job-1234-a1", "r.1:2_3-4", "x" * 128])
small_tags = st.dictionaries(
    st.sampled_from(["team", "project", "Name", "cost-center", "awsome", "capacity-broker"]),
    # up to EC2's 255-character tag value (EC2 User Guide, tag restrictions)
    st.sampled_from(["ml", "", "\u00e9t\u00e9", "\U0001f600", "x" * 255]),
    max_size=3,
)
subnet_lists = st.lists(
    st.sampled_from([*SUBNETS, UNKNOWN_SUBNET]), min_size=1, max_size=4, unique=True
)
platforms = st.sampled_from(["Linux/UNIX", "Windows", "Red Hat Enterprise Linux"])


@st.composite
def placement_extras(draw: st.DrawFn) -> dict[str, Any]:
    extra = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "request_id": request_ids,
                "tenancy": st.sampled_from(["default", "dedicated"]),
                "tags": small_tags,
            },
        )
    )
    source = draw(st.sampled_from(["none", "platform", "image"]))
    if source == "platform":
        extra["instance_platform"] = draw(platforms)
    elif source == "image":
        extra["image_id"] = draw(st.sampled_from([*IMAGES, "ami-0ffffffffffffff00"]))
    return extra


@st.composite
def probe_events(draw: st.DrawFn) -> dict[str, Any]:
    event = {
        "instance_type": draw(st.sampled_from(["g6.xlarge", "c7i.48xlarge", "zz9.huge"])),
        "subnet_ids": draw(subnet_lists),
    }
    if draw(st.booleans()):
        event["instance_count"] = draw(st.sampled_from([1, 2, 8, 1000]))
    return event | draw(placement_extras())


@st.composite
def reserve_events(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {
        "job_id": draw(st.sampled_from(["1234", "job \u00e9t\u00e9 \U0001f600", "x" * 128])),
        "instance_types": draw(
            st.lists(
                st.sampled_from(["c7i.48xlarge", "g6.xlarge", "hpc7a.96xlarge"]),
                min_size=1,
                max_size=3,
                unique=True,
            )
        ),
        "subnet_ids": draw(subnet_lists),
        "instance_count": draw(st.sampled_from([1, 2, 4, 1000])),
    }
    optional = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "stack_name": st.sampled_from([STACK, "Job-2"]),
                "launch_template": st.fixed_dictionaries(
                    {"id": st.sampled_from([TEMPLATE_ID, "lt-0fffffffffffffff0"])},
                    optional={"version": st.sampled_from(["$Latest", "$Default", "1", "99"])},
                ),
                "strict": st.booleans(),
                "attempt": st.integers(min_value=0, max_value=100_000),
                "capacity_reservation_id": st.sampled_from(["cr-0fffffffffffffff0"]),
            },
        )
    )
    event |= optional
    if "launch_template" in event and draw(st.booleans()):
        event["provision"] = draw(st.booleans())
    return event | draw(placement_extras())


@st.composite
def release_events(draw: st.DrawFn) -> dict[str, Any]:
    selector = draw(st.sampled_from(["job_id", "stack_name", "reservation_id"]))
    value = {
        "job_id": st.sampled_from(["1234", "job \u00e9t\u00e9"]),
        "stack_name": st.sampled_from([STACK, "Job-2"]),
        # protected and owned ids are added per world (see test_release)
        "reservation_id": st.sampled_from(["cr-0fffffffffffffff0"]),
    }[selector]
    event = {selector: draw(value)}
    if draw(st.booleans()):
        event["request_id"] = draw(request_ids)
    return event


SCHEDULE = {
    "version": "0",
    "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
    "detail-type": "Scheduled Event",
    "source": "aws.events",
    "account": "111122223333",
    "time": "2026-11-21T10:05:00Z",
    "region": REGION,
    "resources": ["arn:aws:events:us-east-1:111122223333:rule/capacity-broker-cleaner-sweep"],
    "detail": {},
}


@st.composite
def schedule_events(draw: st.DrawFn) -> dict[str, Any]:
    event = dict(SCHEDULE)
    if draw(st.booleans()):
        event["source"] = "aws.scheduler"
        event["detail"] = draw(st.sampled_from([{}, "{}"]))
    if draw(st.booleans()):
        del event["version"]
    return event


STACK_STATUSES = [
    "CREATE_IN_PROGRESS",
    "CREATE_COMPLETE",
    "CREATE_FAILED",
    "ROLLBACK_COMPLETE",
    "UPDATE_COMPLETE",
    "UPDATE_ROLLBACK_COMPLETE",
    "DELETE_COMPLETE",
    "REVIEW_IN_PROGRESS",
]
EVENT_TIMES = [
    "2026-11-21T10:03:12Z",
    "2026-11-21T10:03:12.123Z",
    "2026-11-21T12:03:12+02:00",
    "2020-01-01T00:00:00Z",
    "2099-12-31T23:59:59Z",
    1795240992,  # Unix seconds
]


@st.composite
def stack_events(draw: st.DrawFn, stack_id: str) -> dict[str, Any]:
    other = stack_id.rsplit("/", 1)[0] + "/6a7e8feb-b491-4cf7-a9f1-bf3703467718"
    arn = draw(
        st.sampled_from(
            [
                stack_id,
                other,  # an earlier stack of the same name
                "arn:aws:cloudformation:us-east-1:111122223333:stack/Job-2/6a7e8feb-b491",
            ]
        )
    )
    return {
        "version": "0",
        "id": "8c0a1f4e-3b4d-4c8e-9a0b-1c2d3e4f5a61",
        "detail-type": "CloudFormation Stack Status Change",
        "source": "aws.cloudformation",
        "account": "111122223333",
        "time": draw(st.sampled_from(EVENT_TIMES)),
        "region": REGION,
        "resources": [arn],
        "detail": {
            "stack-id": arn,
            "status-details": {
                "status": draw(st.sampled_from(STACK_STATUSES)),
                "status-reason": "",
            },
            "client-request-token": "Console-CreateStack-7f59c3cf",
        },
    }


@st.composite
def sweep_events(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {"action": "sweep"}
    event |= draw(
        st.fixed_dictionaries(
            {},
            optional={
                "dry_run": st.booleans(),
                "regions": st.lists(
                    st.sampled_from([REGION, "us-west-2", "eu-west-1"]),
                    min_size=1,
                    max_size=2,
                    unique=True,
                ),
                "request_id": request_ids,
            },
        )
    )
    return event


@st.composite
def capacity_events(draw: st.DrawFn) -> dict[str, Any]:
    return draw(
        st.fixed_dictionaries(
            {},
            optional={
                "reservation_type": st.sampled_from(["odcr", "capacity-block", "all"]),
                "instance_types": st.lists(
                    st.sampled_from(["p5.*", "c7i.48xlarge", "g6.xlarge", "*"]),
                    min_size=1,
                    max_size=3,
                    unique=True,
                ),
                "regions": st.lists(
                    st.sampled_from([REGION, "us-west-2"]), min_size=1, max_size=2, unique=True
                ),
                "gpu_only": st.booleans(),
                "available_only": st.booleans(),
                "min_capacity": st.integers(min_value=0, max_value=100_000),
                "include_inactive": st.booleans(),
                "request_id": request_ids,
            },
        )
    )


# -- corruption ---------------------------------------------------------------------------------

RESERVED_KEYS = st.builds(
    lambda prefix, flips, rest: (
        "".join(c.upper() if f else c for c, f in zip(prefix, flips, strict=False)) + rest
    ),
    st.sampled_from(["aws:", "capacity-broker:"]),
    st.lists(st.booleans(), min_size=16, max_size=16),
    st.sampled_from(["", "cluster-id", "purpose", "x", "cloudformation:stack-name"]),
)
EXTRA_KEYS = st.sampled_from(
    [
        "unknown",
        "Request_Id",
        "request_id ",
        "instanceType",
        "subnet_ids\x00",
        "\ud800",
        "__class__",
        "",
    ]
) | st.integers(min_value=129, max_value=100_000).map(lambda n: "k" * n)


@dataclass
class Case:
    event: Any
    how: str
    must_be_invalid: bool


def _get(event: dict[str, Any], path: str) -> tuple[dict[str, Any], str] | None:
    """The mapping holding ``path``'s last key, when every step is a mapping."""
    *parents, last = path.split(".")
    node: Any = event
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return None
    return node, last


OTHER_ARN = "arn:aws:cloudformation:{region}:111122223333:stack/{name}/6a7e8feb-b491"
# Per field: values a careless producer (or a confused scheduler) sends; some are valid, so
# none is "certainly invalid". This is where the odd-but-parseable inputs live.
NEAR_MISSES: dict[str, list[Any]] = {
    "request_id": ["a" * 129, "id\n", "id ", "", "\u00fcn\u00ef", "id/1", "*", "a" * 128],
    "instance_count": [0, 1001, -1, True, 1.0, "1", 1000],
    "attempt": [-1, 100_001, True, 1.5, 0],
    "min_capacity": [-1, 100_001, True, 0],
    "instance_type": ["G6.XLARGE", "g6", ".xlarge", "g6.xlarge ", "g6..xlarge", "p5.*"],
    "job_id": ["", "a" * 129, "job\u200f1", "job\t1", "\U0001f600", " "],
    "stack_name": ["1job", "job_1", "a" * 129, "-job", "Job-2", STACK.upper()],
    "reservation_id": ["cr-", "CR-0FFFFFFFFFFFFFFF0", "cr-0fffffffffffffff0 ", "cr-0ffff"],
    "capacity_reservation_id": ["cr-", "cr-0fffffffffffffff", "cr-0g00000000000000"],
    "launch_template.id": ["lt-", "LT-0f000000000000001", "lt-0f00000000000000"],
    "launch_template.version": ["0", "-1", "$latest", "1.0", "9" * 19, "$Latest "],
    "image_id": ["ami-", "AMI-0de00000000000001", "ami-0de0000000000000"],
    "instance_platform": ["linux", "Linux/Unix", "Windows ", "", "Linux with SQL Server Web"],
    "tenancy": ["host", "Default", ""],
    "action": ["Sweep", "sweep ", "clean", ""],
    "reservation_type": ["ODCR", "capacity_block", "blocks", "all "],
    "source": ["aws.events ", "AWS.EVENTS", "aws.cloudformation", "aws.scheduler", "aws.ec2"],
    "detail-type": [
        "scheduled event",
        "Scheduled Event ",
        "CloudFormation Stack Status Change",
        "Scheduled Event",
    ],
    # EventBridge always sends UTC "...Z"; a producer that does not might send any of these
    "time": [
        "2026-11-21T10:03:12",  # naive
        "2026-11-21T10:03:12+14:00",
        "0001-01-01T00:00:00+14:00",  # before year 1 in UTC
        "9999-12-31T23:59:59-14:00",  # after year 9999 in UTC
        "2026-11-21",
        "now",
        1e20,
        -1,
        253402300800,  # year 10000 in Unix seconds
    ],
    "region": ["US-EAST-1", "us-east-1 ", "us-west-2", "eu-west-1", "us-east-1\n", "x" * 33],
    "detail.stack-id": [
        OTHER_ARN.format(region="eu-west-1", name=STACK),  # another region than the event's
        OTHER_ARN.format(region="us-east-1", name="a" * 129),
        OTHER_ARN.format(region="us-east-1", name="1bad"),
        "arn:aws-cn:cloudformation:cn-north-1:111122223333:stack/soca-job-1234/6a7e8feb",
        "arn:aws:cloudformation:us-east-1:1111:stack/soca-job-1234/6a7e8feb",
        f"arn:aws:cloudformation:us-east-1:111122223333:stack/{STACK}/",
        STACK,
    ],
    "detail.status-details.status": [
        "create_complete",
        "CREATE_COMPLETE ",
        "",
        "DELETE_COMPLETE\n",
        "X" * 65,
        "ROLLBACK",
        "CREATE-COMPLETE",
        "IMPORT_COMPLETE",
    ],
}
NEAR = {path: st.sampled_from(values) for path, values in NEAR_MISSES.items()}


@st.composite
def corrupted(draw: st.DrawFn, shape: Shape, valid: st.SearchStrategy[Any]) -> Case:
    """A valid event with one thing wrong (or, sometimes, one odd but harmless change)."""
    event = copy.deepcopy(draw(valid))
    ops = ["replace", "replace", "replace", "drop", "extra", "list item", "too long"]
    if shape.tags:
        ops += ["reserved tag", "reserved tag"]
    op = draw(st.sampled_from(ops))
    paths = sorted(shape.fields)
    if op == "replace":
        path = draw(st.sampled_from(paths))
        spec = shape.fields[path]
        found = _get(event, path)
        near = NEAR.get(path)
        if near is not None and draw(st.booleans()):
            if found is None:
                return Case(event, f"near miss {path}: no parent", False)
            value = draw(near)
            found[0][found[1]] = value
            return Case(event, f"near miss {path}", spec.certainly_refuses(as_hostile(value)))
        h = draw(hostile_values)
        if found is None:
            return Case(event, f"replace {path}: no parent", False)
        parent, key = found
        parent[key] = h.value
        return Case(event, f"replace {path} with {h.label}", spec.certainly_refuses(h))
    if op == "drop":
        path = draw(st.sampled_from(paths))
        found = _get(event, path)
        if found is None or found[1] not in found[0]:
            return Case(event, f"drop {path}: absent", False)
        del found[0][found[1]]
        return Case(event, f"drop {path}", shape.fields[path].required)
    if op == "extra":
        key = draw(EXTRA_KEYS)
        if key in event:
            return Case(event, "extra: exists", False)
        event[key] = draw(hostile_values).value
        return Case(event, "extra field", shape.closed)
    if op == "list item" and shape.lists:
        name = draw(st.sampled_from(sorted(shape.lists)))
        if not isinstance(event.get(name), list) or not event[name]:
            return Case(event, f"list item {name}: absent", False)
        index = draw(st.integers(min_value=0, max_value=len(event[name]) - 1))
        if draw(st.booleans()):  # every list of the contract refuses repeats
            event[name].append(event[name][index])
            return Case(event, f"list item {name}: repeated", True)
        h = draw(hostile_values)
        event[name][index] = h.value
        certain = json_type(h.value) != "str" or h.huge or h.bad_chars or h.value == ""
        return Case(event, f"list item {name}: {h.label}", certain)
    if op == "too long" and shape.lists:
        name = draw(st.sampled_from(sorted(shape.lists)))
        limit = shape.lists[name]
        event[name] = [f"x{i}" for i in range(limit + 1)]
        return Case(event, f"too long {name}", True)
    if op == "reserved tag":
        tags = event.get("tags") if isinstance(event.get("tags"), dict) else {}
        tags = dict(tags)
        tags[draw(RESERVED_KEYS)] = draw(st.sampled_from(["demo-cluster", "hold", "x"]))
        event["tags"] = tags
        return Case(event, "reserved tag key", True)
    return Case(event, f"{op}: not applicable", False)


NON_OBJECTS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=20),
    st.sampled_from(["", "{}", "null", "[]", '{"action": "sweep"}', "\ud800", "\x00" * 100]),
    st.lists(st.integers() | st.text(max_size=5), max_size=4),
    st.builds(lambda n: "x" * n, st.sampled_from([10_000, 1_000_000])),
)


KINDS = ["corrupted"] * 6 + ["valid"] * 2 + ["text", "non-object", "garbage"]


@st.composite
def cases(draw: st.DrawFn, shape: Shape, valid: st.SearchStrategy[Any]) -> Case:
    """Mostly valid events with one field corrupted (random garbage alone rarely gets past the
    first validator); some valid ones, also sent as JSON text; some non-objects and garbage."""
    kind = draw(st.sampled_from(KINDS))
    if kind == "corrupted":
        return draw(corrupted(shape, valid))
    if kind == "valid":
        return Case(draw(valid), "valid", False)
    if kind == "text":
        # contract: requests are JSON objects, not text holding one
        return Case(json.dumps(draw(valid)), "valid event as JSON text", True)
    if kind == "non-object":
        value = draw(NON_OBJECTS)
        # a capacity request may be empty: null reads as {}
        return Case(
            value,
            f"non-object {json_type(value)}",
            not (shape.name == "capacity" and value is None),
        )
    garbage = draw(
        st.dictionaries(
            st.sampled_from(sorted(shape.fields)) | EXTRA_KEYS | st.text(max_size=8),
            hostile_values.map(lambda h: h.value),
            min_size=1,
            max_size=6,
        )
    )
    return Case(garbage, "garbage object", False)


# -- the judgement ------------------------------------------------------------------------------

ANSWER_LIMIT = 32_768  # bytes of JSON, whatever the input's size
STATUSES = {
    "probe": {"available", "unavailable", "skipped", "error", "invalid_request"},
    "reserve": {
        "reserved",
        "provisioned",
        "unreserved",
        "no_capacity",
        "skipped",
        "rejected",
        "error",
        "invalid_request",
    },
    "release": {"released", "partial", "error", "invalid_request"},
    "cleaner": {"ok", "partial", "error", "invalid_request"},
    "capacity": {"ok", "partial", "error", "invalid_request"},
}


def _long_strings(value: Any, found: list[str]) -> list[str]:
    """Input strings longer than any field the answer may carry back (a tag value: 255)."""
    if isinstance(value, str) and len(value) > 1_000:
        found.append(value)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _long_strings(key, found)
            _long_strings(item, found)
    elif isinstance(value, list):
        for item in value:
            _long_strings(item, found)
    return found


def judge(entry_point: str, world: World, case: Case, answer: Any) -> None:
    from emulator.state import world as emulator_world

    calls = list(emulator_world.hub.calls)
    assert isinstance(answer, dict), answer
    text = json.dumps(answer, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")  # no lone surrogate survived into the answer
    assert len(text.encode("utf-8")) <= ANSWER_LIMIT, f"{len(text)} bytes"
    for long in _long_strings(case.event, []):
        assert long[:300] not in text, "the answer echoes a long input string"

    status = answer.get("status")
    assert status in STATUSES[entry_point], status
    assert isinstance(answer.get("message"), str) and answer["message"]
    assert answer.get("error_code") != "InternalError", answer  # an exception escaped the flow
    given_id = case.event.get("request_id") if isinstance(case.event, Mapping) else None
    if is_request_id(given_id):
        assert answer["request_id"] == given_id
    else:
        assert re.fullmatch(rf"{entry_point}-[0-9a-f]{{32}}", str(answer["request_id"])), answer

    changes = [
        c
        for c in calls
        if c.action in CHANGES_A_RESERVATION
        and any(rid in json.dumps(c.params, default=str) for rid in world.protected)
    ]
    assert changes == [], f"{[c.action for c in changes]} changed a protected reservation"

    if status == "invalid_request":
        errors = answer.get("errors")
        assert isinstance(errors, list) and errors, answer
        for error in errors:
            assert set(error) == {"field", "message"}, error
            assert isinstance(error["field"], str) and isinstance(error["message"], str)
        writes = [
            f"{c.service}:{c.action}"
            for c in calls
            if not c.action.startswith(("Describe", "Get", "List"))
        ]
        assert writes == [], f"invalid_request after {writes}"
    elif case.must_be_invalid:
        pytest.fail(f"{case.how}: answered {status}, not invalid_request")
    if currently_in_test_context():
        event(f"{case.how.split(':')[0]} -> {status}")


def run(
    entry_point: str,
    handler: Callable[[Any, Any], Any],
    world: World,
    context: Any,
    case: Case,
) -> None:
    world.emulator.clear_calls()
    answer = handler(case.event, context)
    judge(entry_point, world, case, answer)


def live_hold(world: World) -> None:
    """A live hold tagged with the stack, so that a valid stack event has something to act on
    (and the guard against late events, which looks the stack up, runs): re-seeded once an
    earlier example's event has cancelled it."""
    live = world.emulator.capacity(REGION)
    live.refresh()
    if live.reservations[world.ids["our-hold"]].state != "active":
        seeded = world.emulator.load_scenario(
            {"regions": {REGION: {"reservations": [copy.deepcopy(OUR_HOLD)]}}}
        )
        world.ids["our-hold"] = seeded.reservations["our-hold"]


# -- one test per entry point (and per trigger of the cleaner) --------------------------------


@hostile("probe")
@given(case=cases(SHAPES["probe"], probe_events()))
def test_probe(world: World, context: Any, case: Case) -> None:
    run("probe", probe.handler, world, context, case)


@hostile("reserve")
@given(case=cases(SHAPES["reserve"], reserve_events()))
def test_reserve(world: World, context: Any, case: Case) -> None:
    run("reserve", reserve.handler, world, context, case)


@hostile("release")
@given(case=cases(SHAPES["release"], release_events()), data=st.data())
def test_release(world: World, context: Any, case: Case, data: st.DataObject) -> None:
    if isinstance(case.event, dict) and case.event.get("reservation_id") == "cr-0fffffffffffffff0":
        # the world's own ids: protected ones must be skipped, owned ones may be cancelled
        case.event["reservation_id"] = data.draw(st.sampled_from(sorted(world.ids.values())))
    run("release", release.handler, world, context, case)


@hostile("cleaner_schedule")
@given(case=cases(SHAPES["cleaner_schedule"], schedule_events()))
def test_cleaner_schedule(world: World, context: Any, case: Case) -> None:
    run("cleaner", cleaner.handler, world, context, case)


@hostile("cleaner_stack")
@given(data=st.data())
def test_cleaner_stack_status_change(world: World, context: Any, data: st.DataObject) -> None:
    live_hold(world)
    case = data.draw(cases(SHAPES["cleaner_stack"], stack_events(world.stack_id)), label="case")
    run("cleaner", cleaner.handler, world, context, case)


@hostile("cleaner_sweep")
@given(case=cases(SHAPES["cleaner_sweep"], sweep_events()))
def test_cleaner_sweep(world: World, context: Any, case: Case) -> None:
    run("cleaner", cleaner.handler, world, context, case)


@hostile("capacity")
@given(case=cases(SHAPES["capacity"], capacity_events()))
def test_capacity(world: World, context: Any, case: Case) -> None:
    run("capacity", capacity.handler, world, context, case)


# -- every near miss, at least once -----------------------------------------------------------
#
# Boundary values (a count of 0 or 1001, a naive time, a lowercase status...) are where the
# bugs live, and a random draw reaches each of them rarely: one valid event per entry point,
# each near miss of each of its fields in turn, judged like the generated cases.

BASES: dict[str, dict[str, Any]] = {
    "probe": {"instance_type": "g6.xlarge", "subnet_ids": SUBNETS[1:], "request_id": "vdi-42"},
    "reserve": {
        "job_id": "1234",
        "instance_types": ["c7i.48xlarge"],
        "subnet_ids": [SUBNETS[2]],
        "instance_count": 1,
        "attempt": 1,
        "stack_name": "Job-2",
        "launch_template": {"id": TEMPLATE_ID, "version": "$Latest"},
        "capacity_reservation_id": "cr-0fffffffffffffff0",
        "image_id": IMAGES[0],
        "tenancy": "default",
    },
    "release": {"stack_name": "Job-2"},
    "cleaner_schedule": SCHEDULE,
    "cleaner_sweep": {"action": "sweep", "dry_run": True, "regions": [REGION]},
    "capacity": {"reservation_type": "all", "min_capacity": 1, "request_id": "c-1"},
}
HANDLERS: dict[str, tuple[str, Callable[[Any, Any], Any]]] = {
    "probe": ("probe", probe.handler),
    "reserve": ("reserve", reserve.handler),
    "release": ("release", release.handler),
    "cleaner_schedule": ("cleaner", cleaner.handler),
    "cleaner_stack": ("cleaner", cleaner.handler),
    "cleaner_sweep": ("cleaner", cleaner.handler),
    "capacity": ("capacity", capacity.handler),
}


@pytest.mark.parametrize("shape_name", sorted(HANDLERS))
def test_every_near_miss(world: World, context: Any, shape_name: str) -> None:
    shape = SHAPES[shape_name]
    entry_point, handler = HANDLERS[shape_name]
    base = BASES.get(shape_name) or {
        **SCHEDULE,
        "detail-type": "CloudFormation Stack Status Change",
        "source": "aws.cloudformation",
        "resources": [world.stack_id],
        "detail": {
            "stack-id": world.stack_id.rsplit("/", 1)[0] + "/6a7e8feb-b491",
            "status-details": {"status": "CREATE_COMPLETE"},
        },
    }
    tried = 0
    for path in sorted(set(shape.fields) & set(NEAR_MISSES)):
        spec = shape.fields[path]
        for value in NEAR_MISSES[path]:
            event = copy.deepcopy(base)
            found = _get(event, path)
            assert found is not None, path
            found[0][found[1]] = value
            certain = spec.certainly_refuses(as_hostile(value))
            if shape_name == "cleaner_stack":
                live_hold(world)
            run(entry_point, handler, world, context, Case(event, f"{path}={value!r}", certain))
            tried += 1
    assert tried >= 5 or shape_name == "cleaner_sweep", tried


# -- the generators' own honesty ------------------------------------------------------------------

MODELS = {
    "probe": (ProbeRequest, probe_events()),
    "reserve": (ReserveRequest, reserve_events()),
    "release": (ReleaseRequest, release_events()),
    "cleaner_sweep": (SweepRequest, sweep_events()),
    "capacity": (CapacityRequest, capacity_events()),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_valid_generators_make_valid_requests(name: str) -> None:
    """A corrupted event is only telling if the event was valid before the corruption."""
    model, valid = MODELS[name]

    @settings(max_examples=100, derandomize=True, database=None, deadline=None)
    @given(valid)
    def check(event: dict[str, Any]) -> None:
        model.model_validate(event)

    check()


def test_the_valid_trigger_events_are_understood() -> None:
    from capacity_broker.handlers.cleaner import (
        ScheduledEvent,
        StackStatusChangeEvent,
        parse_trigger,
    )

    @settings(max_examples=50, derandomize=True, database=None, deadline=None)
    @given(
        schedule_events(),
        stack_events(
            "arn:aws:cloudformation:us-east-1:123456789012:stack/"
            f"{STACK}/0b5e1f3c-0000-4000-8000-000000000000"
        ),
    )
    def check(schedule: dict[str, Any], stack: dict[str, Any]) -> None:
        assert isinstance(parse_trigger(schedule), ScheduledEvent)
        assert isinstance(parse_trigger(stack), StackStatusChangeEvent)

    check()
