"""A reserve request that uses none of issue 43's fields keeps the identity (and hold digest)
it had before they existed: a retry of it across the upgrade is the same request."""

from __future__ import annotations

import json
from hashlib import sha256

from capacity_broker.domain.tokens import IDENTITY_DIGEST_CHARS, identity_digest
from capacity_broker.models import ReserveRequest

PLAIN = {
    "request_id": "job-1",
    "job_id": "1",
    "instance_types": ["c7i.48xlarge"],
    "subnet_ids": ["subnet-0a000000000000001"],
    "instance_count": 2,
}
ISSUE_43 = ("capacity", "pool", "allow_on_demand")


def before(body: dict[str, object]) -> str:
    """The digest as it was computed before issue 43's fields: the body without them."""
    kept = {k: v for k, v in body.items() if k not in ISSUE_43 and k != "attempt"}
    canonical = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return sha256(canonical.encode("ascii")).hexdigest()[:IDENTITY_DIGEST_CHARS]


def test_a_plain_request_keeps_its_identity() -> None:
    body = ReserveRequest.model_validate(PLAIN).model_dump(mode="json")
    assert set(ISSUE_43) <= set(body)
    assert identity_digest(body) == before(body)


def test_the_on_demand_opt_in_is_part_of_the_identity() -> None:
    ladder = PLAIN | {
        "capacity": "reserved-first",
        "provision": True,
        "launch_template": {"id": "lt-0f000000000000001"},
    }
    without = ReserveRequest.model_validate(ladder).model_dump(mode="json")
    with_on_demand = ReserveRequest.model_validate(ladder | {"allow_on_demand": True}).model_dump(
        mode="json"
    )
    assert identity_digest(without) != identity_digest(with_on_demand)
