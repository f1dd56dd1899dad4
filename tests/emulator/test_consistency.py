"""EC2's eventual consistency, as the emulator reproduces it by default.

EC2 API reference, "Eventual consistency in the Amazon EC2 API": a resource just created may be
unknown to the next calls that name it; EC2 User Guide, "View the state of a Capacity
Reservation": a new reservation may show `pending` for a while, and CancelCapacityReservation
cancels only `assessing` or `active` ones. The emulator makes it deterministic: counted calls
(the clock is frozen here), or ``lag_seconds`` on the emulator clock.
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError
from emu_helpers import REGION, Api, error_of

pytestmark = pytest.mark.emulator

TAGS = [{"ResourceType": "capacity-reservation", "Tags": [{"Key": "team", "Value": "hpc"}]}]
BY_TAG = [{"Name": "tag:team", "Values": ["hpc"]}]


@pytest.fixture
def realistic(emu: Any, world: Any) -> Any:
    """The test world (which turns consistency off for the other emulator tests) with EC2's
    eventual consistency back at the emulator's defaults."""
    from emulator.state import Settings

    defaults = Settings()
    emu.configure(
        eventual_consistency=True,
        lag_unknown_calls=defaults.lag_unknown_calls,
        lag_pending_calls=defaults.lag_pending_calls,
        lag_listing_calls=defaults.lag_listing_calls,
        lag_instance_calls=defaults.lag_instance_calls,
        lag_seconds=defaults.lag_seconds,
        quota_lag_checks=defaults.quota_lag_checks,
        quota_lag_seconds=defaults.quota_lag_seconds,
    )
    return emu


@pytest.fixture
def api(emu: Any, ec2: Any, realistic: Any) -> Api:
    return Api(emu, ec2)


def code_of(call: Any, **kwargs: Any) -> str | None:
    try:
        call(**kwargs)
    except ClientError as error:
        return error_of(error)[0]
    return None


def test_eventual_consistency_is_the_default() -> None:
    from emulator.state import Settings

    settings = Settings()
    assert settings.eventual_consistency
    assert settings.lag_unknown_calls >= 1
    assert settings.lag_pending_calls >= 1
    assert settings.lag_listing_calls >= 1


def test_a_new_reservation_is_unknown_then_pending_then_active_to_calls_naming_it(api, ec2):
    made = api.reserve(count=2)
    rid = made["CapacityReservationId"]
    assert made["State"] == "pending"
    with pytest.raises(ClientError) as exc:
        api.get(rid)
    assert error_of(exc) == ("InvalidCapacityReservationId.NotFound", 400)
    assert api.get(rid)["State"] == "pending"
    assert api.get(rid)["State"] == "active"
    assert api.get(rid)["State"] == "active"


def test_capacity_is_held_from_the_start(api):
    api.reserve(count=3)
    assert api.free("us-east-1a", "c5.large") == 1


def test_a_new_reservation_cannot_be_cancelled_until_ec2_knows_it_is_active(api, ec2):
    rid = api.reserve(count=2)["CapacityReservationId"]
    cancel = ec2.cancel_capacity_reservation
    assert code_of(cancel, CapacityReservationId=rid) == "InvalidCapacityReservationId.NotFound"
    assert code_of(cancel, CapacityReservationId=rid) == "IncorrectState"
    assert api.free("us-east-1a", "c5.large") == 2  # neither answer gave anything back
    assert code_of(cancel, CapacityReservationId=rid) is None
    assert api.get(rid)["State"] == "cancelled"
    assert api.free("us-east-1a", "c5.large") == 4


def test_modify_and_create_tags_name_it_too(api, ec2):
    rid = api.reserve(count=1)["CapacityReservationId"]
    tag = [{"Key": "k", "Value": "v"}]
    assert code_of(ec2.create_tags, Resources=[rid], Tags=tag) == (
        "InvalidCapacityReservationId.NotFound"
    )
    modify = ec2.modify_capacity_reservation
    assert code_of(modify, CapacityReservationId=rid, InstanceCount=2) == "IncorrectState"
    assert code_of(modify, CapacityReservationId=rid, InstanceCount=2) is None
    assert code_of(ec2.create_tags, Resources=[rid], Tags=tag) is None
    assert api.get(rid)["TotalInstanceCount"] == 2


def test_describe_by_several_ids_fails_whole_while_one_is_unknown(api, ec2, world):
    old = api.reserve(count=1)["CapacityReservationId"]
    api.emu.settle()
    new = api.reserve(count=1)["CapacityReservationId"]
    describe = ec2.describe_capacity_reservations
    assert code_of(describe, CapacityReservationIds=[old, new]) == (
        "InvalidCapacityReservationId.NotFound"
    )
    found = describe(CapacityReservationIds=[old, new])["CapacityReservations"]
    assert {r["CapacityReservationId"]: r["State"] for r in found} == {
        old: "active",
        new: "pending",
    }


def test_a_tag_filtered_listing_misses_it_and_an_unfiltered_one_shows_no_tags(api, ec2):
    rid = api.reserve(count=1, TagSpecifications=TAGS)["CapacityReservationId"]
    assert api.ids(Filters=BY_TAG) == set()
    [listed] = api.all()
    assert listed["CapacityReservationId"] == rid
    assert listed["Tags"] == []
    assert listed["State"] == "pending"
    # two listings that would show it have gone by (the settings' lag_listing_calls)
    [found] = api.all(Filters=BY_TAG)
    assert found["Tags"] == [{"Key": "team", "Value": "hpc"}]
    assert api.ids(Filters=BY_TAG) == {rid}


def test_only_listings_that_would_show_it_count(api, ec2):
    rid = api.reserve(count=1, TagSpecifications=TAGS)["CapacityReservationId"]
    for _ in range(3):  # another type: these listings would not show it
        assert api.ids(Filters=[{"Name": "instance-type", "Values": ["m5.large"]}]) == set()
    assert api.ids(Filters=BY_TAG) == set()
    assert api.ids(Filters=BY_TAG) == set()
    assert api.ids(Filters=BY_TAG) == {rid}


def test_a_state_filter_sees_the_state_the_call_sees(api, ec2):
    rid = api.reserve(count=1)["CapacityReservationId"]
    pending = [{"Name": "state", "Values": ["pending"]}]
    assert api.ids(Filters=pending) == {rid}
    api.emu.settle()
    assert api.ids(Filters=pending) == set()
    assert api.ids(Filters=[{"Name": "state", "Values": ["active"]}]) == {rid}


def test_it_settles_on_the_emulator_clock_too(api, emu):
    rid = api.reserve(count=1, TagSpecifications=TAGS)["CapacityReservationId"]
    emu.advance(1.9)
    assert code_of(api.get, reservation_id=rid) == "InvalidCapacityReservationId.NotFound"
    emu.advance(0.1)  # lag_seconds (2 s) after it was made
    assert api.get(rid)["State"] == "active"
    assert api.ids(Filters=BY_TAG) == {rid}


def test_a_client_token_replay_shows_it_as_it_is_without_counting(api, ec2):
    first = api.reserve(count=1, ClientToken="token-1")
    again = api.reserve(count=1, ClientToken="token-1")
    assert again["CapacityReservationId"] == first["CapacityReservationId"]
    assert again["State"] == "pending"
    # the replay did not count as a call naming it: the next one is still the first
    assert code_of(api.get, reservation_id=first["CapacityReservationId"]) == (
        "InvalidCapacityReservationId.NotFound"
    )


def test_a_launch_can_use_a_reservation_that_still_shows_pending(api, ec2):
    # EC2 User Guide: a pending reservation "might already be available for use, in which
    # case attempts to launch instances into the Capacity Reservation would succeed".
    rid = api.reserve(count=2, InstanceMatchCriteria="targeted")["CapacityReservationId"]
    [instance] = api.run(
        count=1,
        CapacityReservationSpecification={
            "CapacityReservationTarget": {"CapacityReservationId": rid}
        },
    )
    assert instance.startswith("i-")
    assert api.emu.capacity(REGION).reservations[rid].used_instance_count == 1


def test_a_reservation_cancelled_is_shown_cancelled_at_once(api, ec2):
    rid = api.reserve(count=1)["CapacityReservationId"]
    for _ in range(2):
        code_of(ec2.cancel_capacity_reservation, CapacityReservationId=rid)
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    [listed] = api.all()
    assert listed["State"] == "cancelled"


def test_a_tag_filtered_instance_listing_misses_instances_just_launched(api, ec2):
    ids = api.run(
        count=2,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "job", "Value": "7"}]}],
    )

    def by_tag() -> set[str]:
        found = ec2.describe_instances(Filters=[{"Name": "tag:job", "Values": ["7"]}])
        return {i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]}

    assert by_tag() == set()
    # by id: unknown to the first call (EC2's own example), there to the next; neither
    # settles the tag index
    with pytest.raises(ClientError) as exc:
        ec2.describe_instances(InstanceIds=ids)
    assert error_of(exc) == ("InvalidInstanceID.NotFound", 400)
    assert len(ec2.describe_instances(InstanceIds=ids)["Reservations"]) == 1
    assert by_tag() == set()
    assert by_tag() == set(ids)


def test_the_same_calls_see_the_same_things(emu, ec2, realistic):
    def story() -> list[str | None]:
        api = Api(emu, ec2)
        rid = api.reserve(count=1, TagSpecifications=TAGS)["CapacityReservationId"]
        seen = [code_of(ec2.cancel_capacity_reservation, CapacityReservationId=rid)]
        seen.append(str(rid in api.ids(Filters=BY_TAG)))
        seen.append(code_of(ec2.cancel_capacity_reservation, CapacityReservationId=rid))
        seen.append(str(rid in api.ids(Filters=BY_TAG)))
        seen.append(code_of(ec2.cancel_capacity_reservation, CapacityReservationId=rid))
        seen.append(str(rid in api.ids(Filters=BY_TAG)))
        return seen

    first = story()
    assert story() == first
    assert first == [
        "InvalidCapacityReservationId.NotFound",
        "False",
        "IncorrectState",
        "False",
        None,
        "True",
    ]


@pytest.mark.parametrize(
    "knobs",
    [
        {"eventual_consistency": False},
        {"lag_unknown_calls": 0, "lag_pending_calls": 0, "lag_listing_calls": 0},
    ],
)
def test_knobs_turn_it_off(api, ec2, emu, knobs):
    emu.configure(**knobs)
    made = api.reserve(count=1, TagSpecifications=TAGS)
    rid = made["CapacityReservationId"]
    assert made["State"] == "active"
    assert api.ids(Filters=BY_TAG) == {rid}
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    [instance] = api.run(
        count=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "job", "Value": "8"}]}],
    )
    found = ec2.describe_instances(Filters=[{"Name": "tag:job", "Values": ["8"]}])
    assert [i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]] == [instance]


def test_longer_lags_are_a_setting(api, ec2, emu):
    emu.configure(lag_unknown_calls=3, lag_pending_calls=0)
    rid = api.reserve(count=1)["CapacityReservationId"]
    codes = [code_of(api.get, reservation_id=rid) for _ in range(4)]
    assert codes == ["InvalidCapacityReservationId.NotFound"] * 3 + [None]


def test_a_scenario_can_set_the_knobs(emu):
    emu.load_scenario({"settings": {"eventual_consistency": False, "lag_listing_calls": 5}})
    from emulator.state import world

    assert world.settings.eventual_consistency is False
    assert world.settings.lag_listing_calls == 5


def test_reservations_a_scenario_seeds_are_settled(emu, ec2):
    ids = emu.load_scenario(
        {
            "regions": {
                REGION: {
                    "reservations": [
                        {
                            "name": "old",
                            "instance_type": "c5.large",
                            "availability_zone": "us-east-1a",
                            "count": 1,
                            "tags": {"team": "hpc"},
                        }
                    ]
                }
            }
        }
    )
    rid = ids.reservations["old"]
    found = ec2.describe_capacity_reservations(Filters=BY_TAG)["CapacityReservations"]
    assert [r["CapacityReservationId"] for r in found] == [rid]
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)


# -- a lag fault: EC2 lagging at one call site (the fault matrix's eventual-consistency kind) --


def test_a_lag_fault_hides_what_was_made_from_the_next_calls_of_one_action(api, ec2, emu):
    rid = api.reserve(count=1)["CapacityReservationId"]
    emu.settle()
    emu.fail("CancelCapacityReservation", mode="lag", times=2)
    cancel = ec2.cancel_capacity_reservation
    assert api.get(rid)["State"] == "active"  # another action: not lagging
    assert code_of(cancel, CapacityReservationId=rid) == "InvalidCapacityReservationId.NotFound"
    assert code_of(cancel, CapacityReservationId=rid) == "InvalidCapacityReservationId.NotFound"
    assert code_of(cancel, CapacityReservationId=rid) is None
    calls = emu.calls("CancelCapacityReservation")
    assert [(c.lagged, c.fresh) for c in calls] == [(True, True), (True, True), (False, True)]


def test_a_lag_fault_on_a_create_makes_what_it_makes_settle_later(api, ec2, emu):
    emu.fail("CreateCapacityReservation", mode="lag", times=3)
    rid = api.reserve(count=1, TagSpecifications=TAGS)["CapacityReservationId"]
    [create] = emu.calls("CreateCapacityReservation")
    assert create.lagged
    codes = [code_of(api.get, reservation_id=rid) for _ in range(6)]
    not_found = "InvalidCapacityReservationId.NotFound"
    assert codes == [not_found] * 4 + [None, None]  # 3 more than the default 1
    assert [rid in api.ids(Filters=BY_TAG) for _ in range(6)] == [False] * 5 + [True]


def test_a_lag_fault_reaches_only_what_was_made_in_this_world(api, ec2, emu, world):
    emu.fail("DescribeSubnets", mode="lag", times=5)
    emu.fail("DescribeCapacityReservations", mode="lag", times=5)
    emu.load_scenario(
        {
            "regions": {
                REGION: {
                    "reservations": [
                        {
                            "name": "old",
                            "instance_type": "m5.large",
                            "availability_zone": "us-east-1a",
                            "count": 1,
                        }
                    ]
                }
            }
        }
    )
    ec2.describe_subnets(SubnetIds=list(world.subnets.values()))
    assert len(api.all()) == 1
    for call in emu.calls():
        assert (call.fresh, call.lagged) == (False, False), call.action


def test_a_lag_fault_on_a_tag_filtered_instance_listing(api, ec2, emu):
    tagged = [{"ResourceType": "instance", "Tags": [{"Key": "job", "Value": "9"}]}]
    ids = set(api.run(count=2, TagSpecifications=tagged))
    emu.settle()
    emu.fail("DescribeInstances", mode="lag", times=1)

    def by_tag() -> set[str]:
        found = ec2.describe_instances(Filters=[{"Name": "tag:job", "Values": ["9"]}])
        return {i["InstanceId"] for r in found["Reservations"] for i in r["Instances"]}

    assert by_tag() == set()
    assert by_tag() == ids


# -- instance ids (EC2's own example) --------------------------------------------------------


def test_an_instance_just_launched_is_unknown_to_the_next_call_naming_it(api, ec2):
    """ "If you successfully run the RunInstances command, and then immediately run another
    command using the instance ID that was provided in the response of RunInstances, it might
    return an InvalidInstanceID.NotFound error" (Eventual consistency in the Amazon EC2 API);
    the emulator used to know every instance at once."""
    [instance] = api.run()
    with pytest.raises(ClientError) as exc:
        ec2.describe_instances(InstanceIds=[instance])
    assert error_of(exc) == ("InvalidInstanceID.NotFound", 400)
    assert instance in exc.value.response["Error"]["Message"]
    [reservation] = ec2.describe_instances(InstanceIds=[instance])["Reservations"]
    assert reservation["Instances"][0]["InstanceId"] == instance


def test_a_terminate_naming_an_unknown_instance_terminates_nothing(api, ec2, emu):
    """ "If you get an InvalidInstanceID.NotFound error after running TerminateInstances, this
    doesn't mean that the instance was or will be terminated": nothing is."""
    ids = api.run(count=2)
    with pytest.raises(ClientError) as exc:
        ec2.terminate_instances(InstanceIds=ids)
    assert error_of(exc) == ("InvalidInstanceID.NotFound", 400)
    states = {i.id: i.state for i in emu.capacity().ec2.all_instances()}
    assert {states[i] for i in ids} == {"running"}
    ec2.terminate_instances(InstanceIds=ids)
    states = {i.id: i.state for i in emu.capacity().ec2.all_instances()}
    assert {states[i] for i in ids} == {"terminated"}


def test_create_tags_on_an_instance_just_launched_may_not_find_it(api, ec2):
    [instance] = api.run()
    tag = [{"Key": "Name", "Value": "node-1"}]
    with pytest.raises(ClientError) as exc:
        ec2.create_tags(Resources=[instance], Tags=tag)
    assert error_of(exc) == ("InvalidInstanceID.NotFound", 400)
    ec2.create_tags(Resources=[instance], Tags=tag)


def test_instance_lag_is_a_knob_and_settles_on_the_clock(api, ec2, emu):
    emu.configure(lag_instance_calls=0)
    [instance] = api.run()
    ec2.describe_instances(InstanceIds=[instance])
    emu.configure(lag_instance_calls=5)
    [later] = api.run()
    emu.advance(2)  # lag_seconds
    ec2.describe_instances(InstanceIds=[later])


# -- a phase bounded by the clock alone --------------------------------------------------------


def test_pending_can_last_minutes_on_the_emulator_clock(api, ec2, emu):
    """The slow preset's "pending for minutes": no call count ends it, only the clock ("it
    can take up to 5 minutes for the state of the Capacity Reservation to reflect that it is
    active")."""
    emu.configure(lag_pending_calls=None, lag_pending_seconds=300)
    rid = api.reserve(count=1)["CapacityReservationId"]
    assert code_of(ec2.cancel_capacity_reservation, CapacityReservationId=rid) == (
        "InvalidCapacityReservationId.NotFound"
    )
    for _ in range(20):
        assert code_of(ec2.cancel_capacity_reservation, CapacityReservationId=rid) == (
            "IncorrectState"
        )
    assert api.get(rid)["State"] == "pending"
    emu.advance(299)
    assert api.get(rid)["State"] == "pending"
    emu.advance(1)
    assert api.get(rid)["State"] == "active"
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)


# -- quotas count what was given back a moment ago ---------------------------------------------


def test_a_cancelled_reservation_keeps_counting_toward_the_limit_for_a_while(api, ec2, emu):
    """EC2 lists InstanceLimitExceeded among its eventually consistent errors ("terminated
    instances count toward your instance limit for a while after termination"); a cancelled
    reservation's capacity the same way. The emulator used to free the quota at the cancel."""
    rid = api.reserve("m5.large", "us-east-1a", 10)["CapacityReservationId"]
    emu.settle()
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    with pytest.raises(ClientError) as exc:
        api.reserve("m5.large", "us-east-1a", 10)
    assert error_of(exc) == ("InstanceLimitExceeded", 400)
    api.reserve("m5.large", "us-east-1a", 10)  # the next check no longer counts it


def test_the_quota_lag_ends_on_the_clock_too(api, ec2, emu):
    emu.configure(quota_lag_checks=None, quota_lag_seconds=30)
    rid = api.reserve("m5.large", "us-east-1a", 10)["CapacityReservationId"]
    emu.settle()
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    for _ in range(3):
        with pytest.raises(ClientError):
            api.reserve("m5.large", "us-east-1a", 1)
    emu.advance(30)
    api.reserve("m5.large", "us-east-1a", 10)


def test_a_terminated_instance_keeps_counting_toward_the_limit_for_a_while(api, ec2, emu):
    ids = api.run(instance_type="m5.large", count=10)
    emu.settle()
    ec2.terminate_instances(InstanceIds=ids)
    with pytest.raises(ClientError) as exc:
        api.run(instance_type="m5.large", count=1)
    assert error_of(exc) == ("InstanceLimitExceeded", 400)
    api.run(instance_type="m5.large", count=10)


def test_one_call_is_one_quota_check(api, ec2, emu):
    """A launch may plan several sizes (MinCount..MaxCount): still one check of the lag."""
    rid = api.reserve("m5.large", "us-east-1a", 10)["CapacityReservationId"]
    emu.settle()
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    with pytest.raises(ClientError):
        api.run(instance_type="m5.large", MinCount=1, MaxCount=10)
    assert len(api.run(instance_type="m5.large", MinCount=1, MaxCount=10)) == 10


def test_without_eventual_consistency_the_quota_is_free_at_once(api, ec2, emu):
    emu.configure(eventual_consistency=False)
    rid = api.reserve("m5.large", "us-east-1a", 10)["CapacityReservationId"]
    ec2.cancel_capacity_reservation(CapacityReservationId=rid)
    api.reserve("m5.large", "us-east-1a", 10)
