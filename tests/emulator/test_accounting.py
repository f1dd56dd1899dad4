"""Capacity accounting under random sequences of operations (Hypothesis state machine).

Whatever happens (reservations created, modified, cancelled, expiring; instances launched
into pools or reservations, terminated; fleets), the pools must add up:

    pool used == slots of holding ODCRs + running instances outside them

never above the pool's capacity, and everything back to zero once all is terminated and
cancelled. Everything goes through boto3.
"""

from __future__ import annotations

import functools
from datetime import timedelta

import boto3
import pytest
from botocore.exceptions import ClientError
from emu_helpers import NO_RETRIES, NOW, REGION, SUBNET_A, SUBNET_B
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import emulator

pytestmark = pytest.mark.emulator

ZONES = {"us-east-1a": SUBNET_A, "us-east-1b": SUBNET_B}
TYPES = ("c5.large", "m5.large")
CAPACITY = {("us-east-1a", "c5.large"): 5, ("us-east-1b", "c5.large"): 3}
QUOTA = {"m5.large": 6}
# Anything else may fail; these are the answers a sequence may legitimately get.
EXPECTED = {
    "InsufficientInstanceCapacity",
    "InstanceLimitExceeded",
    "ReservationCapacityExceeded",
    "IncorrectState",
    "InvalidParameterValue",
    "InvalidParameterCombination",  # a targeted launch that does not match the reservation
}
SCENARIO = {
    # Accounting is checked against what EC2 shows at once: a consistent EC2 (eventual
    # consistency is tested on its own, in test_consistency.py).
    "settings": {"eventual_consistency": False},
    "regions": {
        REGION: {
            "vpcs": [
                {
                    "id": "vpc-0c0ffee000000001",
                    "cidr": "10.0.0.0/16",
                    "subnets": [
                        {"id": SUBNET_A, "availability_zone": "us-east-1a", "cidr": "10.0.1.0/24"},
                        {"id": SUBNET_B, "availability_zone": "us-east-1b", "cidr": "10.0.2.0/24"},
                    ],
                }
            ],
            "pools": [
                {"availability_zone": az, "instance_type": t, "capacity": n}
                for (az, t), n in CAPACITY.items()
            ],
            "quotas": {"instances": QUOTA},
            "launch_templates": [{"name": "nodes", "data": {"ImageId": "ami-00000000000000001"}}],
        }
    },
}

zones = st.sampled_from(sorted(ZONES))
types = st.sampled_from(TYPES)
counts = st.integers(min_value=1, max_value=4)


@functools.cache
def _client():
    return boto3.client("ec2", region_name=REGION, config=NO_RETRIES)


class Accounting(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._mock = emulator.mock(SCENARIO)
        self.emu = self._mock.__enter__()
        self.emu.freeze(NOW)
        # A test of capacity accounting, not of request rates: its raw client sends bursts
        # no pacer would, which EC2's buckets (on by default) would answer with throttles.
        self.emu.throttle(enabled=False)
        self.ec2 = _client()
        self.reservations: list[str] = []
        # instance id -> (AZ, type), from the launch responses
        self.instances: dict[str, tuple[str, str]] = {}

    def teardown(self) -> None:
        try:
            if self.instances:
                found = self.ec2.describe_instances(InstanceIds=list(self.instances))
                described = {
                    i["InstanceId"]: (i["Placement"]["AvailabilityZone"], i["InstanceType"])
                    for r in found["Reservations"]
                    for i in r["Instances"]
                    if i["State"]["Name"] == "running"
                }
                assert described == self.instances
                self.ec2.terminate_instances(InstanceIds=list(self.instances))
            for r in self._describe():
                if r["State"] in ("active", "pending"):
                    self.ec2.cancel_capacity_reservation(
                        CapacityReservationId=r["CapacityReservationId"]
                    )
            for az, instance_type in CAPACITY:
                assert self.emu.pool(REGION, az, instance_type)["used"] == 0
        finally:
            self._mock.__exit__(None, None, None)

    # -- helpers ---------------------------------------------------------------------------
    def _call(self, fn, **kwargs):
        try:
            return fn(**kwargs)
        except ClientError as error:
            code = error.response["Error"]["Code"]
        assert code in EXPECTED, code
        return None

    def _describe(self) -> list[dict]:
        return self.ec2.describe_capacity_reservations()["CapacityReservations"]

    # -- rules -----------------------------------------------------------------------------
    @rule(
        az=zones,
        instance_type=types,
        count=counts,
        targeted=st.booleans(),
        minutes=st.sampled_from([None, 5, 30]),
    )
    def create(self, az, instance_type, count, targeted, minutes):
        kwargs = {}
        if minutes:
            kwargs = {
                "EndDateType": "limited",
                "EndDate": self.emu.now() + timedelta(minutes=minutes),
            }
        response = self._call(
            self.ec2.create_capacity_reservation,
            InstanceType=instance_type,
            InstancePlatform="Linux/UNIX",
            AvailabilityZone=az,
            InstanceCount=count,
            InstanceMatchCriteria="targeted" if targeted else "open",
            **kwargs,
        )
        if response:
            self.reservations.append(response["CapacityReservation"]["CapacityReservationId"])

    @precondition(lambda self: self.reservations)
    @rule(data=st.data(), count=st.integers(min_value=0, max_value=6))
    def modify(self, data, count):
        rid = data.draw(st.sampled_from(self.reservations))
        self._call(
            self.ec2.modify_capacity_reservation, CapacityReservationId=rid, InstanceCount=count
        )

    @precondition(lambda self: self.reservations)
    @rule(data=st.data())
    def cancel(self, data):
        rid = data.draw(st.sampled_from(self.reservations))
        self._call(self.ec2.cancel_capacity_reservation, CapacityReservationId=rid)

    @rule(az=zones, instance_type=types, low=counts, extra=st.integers(0, 3), data=st.data())
    def run(self, az, instance_type, low, extra, data):
        kwargs = {}
        if self.reservations and data.draw(st.booleans()):
            rid = data.draw(st.sampled_from(self.reservations))
            kwargs["CapacityReservationSpecification"] = {
                "CapacityReservationTarget": {"CapacityReservationId": rid}
            }
        response = self._call(
            self.ec2.run_instances,
            ImageId="ami-00000000000000001",
            InstanceType=instance_type,
            MinCount=low,
            MaxCount=low + extra,
            SubnetId=ZONES[az],
            **kwargs,
        )
        if response:
            assert low <= len(response["Instances"]) <= low + extra
            for i in response["Instances"]:
                placed = (i["Placement"]["AvailabilityZone"], i["InstanceType"])
                assert placed == (az, instance_type)
                self.instances[i["InstanceId"]] = placed

    @rule(az=zones, instance_type=types, total=counts, minimum=st.booleans())
    def fleet(self, az, instance_type, total, minimum):
        options = {"SingleAvailabilityZone": True, "MinTargetCapacity": total} if minimum else {}
        response = self.ec2.create_fleet(
            Type="instant",
            LaunchTemplateConfigs=[
                {
                    "LaunchTemplateSpecification": {"LaunchTemplateName": "nodes", "Version": "1"},
                    "Overrides": [{"SubnetId": ZONES[az], "InstanceType": instance_type}],
                }
            ],
            TargetCapacitySpecification={
                "TotalTargetCapacity": total,
                "DefaultTargetCapacityType": "on-demand",
            },
            OnDemandOptions=options,
        )
        ids = [i for entry in response["Instances"] for i in entry["InstanceIds"]]
        assert len(ids) <= total
        if minimum:
            assert len(ids) in (0, total)
        assert {e["ErrorCode"] for e in response["Errors"]} <= EXPECTED
        self.instances.update(dict.fromkeys(ids, (az, instance_type)))

    @precondition(lambda self: self.instances)
    @rule(data=st.data())
    def terminate(self, data):
        instance_id = data.draw(st.sampled_from(list(self.instances)))
        self.ec2.terminate_instances(InstanceIds=[instance_id])
        del self.instances[instance_id]

    @rule(minutes=st.sampled_from([1, 10, 45]))
    def advance(self, minutes):
        self.emu.advance(minutes * 60)

    # -- the invariant ---------------------------------------------------------------------
    @invariant()
    def pools_add_up(self):
        reservations = self._describe()
        running: dict[tuple[str, str], int] = {}
        for key in self.instances.values():
            running[key] = running.get(key, 0) + 1
        held: dict[tuple[str, str], int] = {}
        inside: dict[tuple[str, str], int] = {}
        for r in reservations:
            assert 0 <= r["AvailableInstanceCount"] <= r["TotalInstanceCount"]
            if r["State"] in ("active", "pending"):
                key = (r["AvailabilityZone"], r["InstanceType"])
                held[key] = held.get(key, 0) + r["TotalInstanceCount"]
                inside[key] = inside.get(key, 0) + (
                    r["TotalInstanceCount"] - r["AvailableInstanceCount"]
                )
            else:
                assert r["AvailableInstanceCount"] == 0
        for key in set(running) | set(held) | set(CAPACITY):
            pool = self.emu.pool(REGION, *key)
            outside = running.get(key, 0) - inside.get(key, 0)
            assert outside >= 0
            assert pool["used"] == held.get(key, 0) + outside, (key, pool, held, running)
            if pool["capacity"] is not None:
                assert pool["used"] <= pool["capacity"]
        for instance_type, limit in QUOTA.items():
            total = sum(
                held.get(k, 0) + running.get(k, 0) - inside.get(k, 0)
                for k in set(held) | set(running)
                if k[1] == instance_type
            )
            assert total <= limit


Accounting.TestCase.settings = settings(
    max_examples=10,
    stateful_step_count=12,
    deadline=None,
    derandomize=True,
    database=None,
    # no shrinking: a failure prints its (unshrunk) steps at once instead of minutes later
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.usefixtures("_no_default_amis")
class TestAccounting(Accounting.TestCase):
    pass
