"""Ownership tags: the contract's keys, and who counts as owner."""

from __future__ import annotations

import pytest
from capacity_broker.domain import tags as t
from hypothesis import given
from hypothesis import strategies as st

CLUSTER = "hpc-prod"


def test_keys_are_the_contracts() -> None:
    assert t.TAG_CLUSTER_ID == "capacity-broker:cluster-id"
    assert t.TAG_PURPOSE == "capacity-broker:purpose"
    assert t.TAG_REQUEST_ID == "capacity-broker:request-id"
    assert t.TAG_JOB_ID == "capacity-broker:job-id"
    assert t.TAG_STACK_NAME == "capacity-broker:stack-name"
    assert t.TAG_SUBNET_ID == "capacity-broker:subnet-id"
    assert t.TAG_NAME == "Name"
    assert [p.value for p in t.Purpose] == ["probe", "hold"]


def test_hold_tags() -> None:
    tags = t.ownership_tags(
        CLUSTER,
        t.Purpose.HOLD,
        "job-1234-a1",
        "subnet-0b00000000000002",
        job_id="1234",
        stack_name="soca-job-1234",
        extra={"team": "cfd"},
    )
    assert tags == {
        "team": "cfd",
        "capacity-broker:cluster-id": CLUSTER,
        "capacity-broker:purpose": "hold",
        "capacity-broker:request-id": "job-1234-a1",
        "capacity-broker:subnet-id": "subnet-0b00000000000002",
        "capacity-broker:job-id": "1234",
        "capacity-broker:stack-name": "soca-job-1234",
        "Name": "capacity-broker-hold-job-1234-a1",
    }


def test_probe_tags_leave_out_job_and_stack() -> None:
    tags = t.ownership_tags(CLUSTER, "probe", "vdi-42", "subnet-0a00000000000001")
    assert t.TAG_JOB_ID not in tags
    assert t.TAG_STACK_NAME not in tags
    assert tags[t.TAG_PURPOSE] == "probe"
    assert tags["Name"] == "capacity-broker-probe-vdi-42"


def test_name_is_cut_to_ec2s_value_limit() -> None:
    tags = t.ownership_tags(CLUSTER, "hold", "r" * 128, "subnet-0a00000000000001")
    assert tags["Name"] == "capacity-broker-hold-" + "r" * 128
    long_name = t.name_tag("probe", "x" * 300)
    assert len(long_name) == 255
    assert long_name.startswith("capacity-broker-probe-x")


def test_ec2s_tag_limits() -> None:
    """EC2 User Guide, tag restrictions: keys up to 127, values up to 255 characters (the
    broker used to allow 128 and 256, which EC2 refuses)."""
    assert (t.MAX_KEY_LENGTH, t.MAX_VALUE_LENGTH, t.MAX_TAGS_PER_RESOURCE) == (127, 255, 50)
    fine = {"k" * 127: "v" * 255}
    assert t.ownership_tags(CLUSTER, "hold", "r1", "subnet-0a00000000000001", extra=fine)
    for extra in ({"k" * 128: "v"}, {"k": "v" * 256}):
        with pytest.raises(ValueError, match="tag"):
            t.ownership_tags(CLUSTER, "hold", "r1", "subnet-0a00000000000001", extra=extra)


def test_the_request_limit_leaves_room_for_the_broker_s_own_tags() -> None:
    """20 request tags (the contract's limit) plus every ownership tag stay within EC2's 50."""
    extra = {f"team-{i}": "x" for i in range(20)}
    tags = t.ownership_tags(
        CLUSTER,
        "hold",
        "r1",
        "subnet-0a00000000000001",
        "job",
        "stack",
        extra=extra,
        request_digest="d" * 48,
        group_id="group-" + "0" * 32,
    )
    assert len(tags) == 20 + len(t.OWNERSHIP_KEYS) <= t.MAX_TAGS_PER_RESOURCE
    with pytest.raises(ValueError, match="50 per resource"):
        t.ownership_tags(
            CLUSTER,
            "hold",
            "r1",
            "subnet-0a00000000000001",
            extra={f"k{i}": "x" for i in range(46)},  # + 5 of its own: 51
        )


def test_extra_tags_never_override_ownership() -> None:
    extra = {
        t.TAG_CLUSTER_ID: "other-cluster",
        t.TAG_PURPOSE: "probe",
        "CAPACITY-BROKER:job-id": "999",
        "aws:cloudformation:stack-name": "x",
        "Name": "mine",
        "keep": "me",
    }
    tags = t.ownership_tags(CLUSTER, "hold", "r1", "subnet-0a00000000000001", extra=extra)
    assert tags[t.TAG_CLUSTER_ID] == CLUSTER
    assert tags[t.TAG_PURPOSE] == "hold"
    assert tags["Name"] == "capacity-broker-hold-r1"
    assert "CAPACITY-BROKER:job-id" not in tags
    assert "aws:cloudformation:stack-name" not in tags
    assert tags["keep"] == "me"


@pytest.mark.parametrize("missing", ["cluster_id", "request_id", "subnet_id"])
def test_ownership_needs_its_identifiers(missing: str) -> None:
    args = {"cluster_id": CLUSTER, "request_id": "r1", "subnet_id": "subnet-0a00000000000001"}
    args[missing] = ""
    with pytest.raises(ValueError, match=missing):
        t.ownership_tags(purpose="hold", **args)


def test_unknown_purpose_is_refused() -> None:
    with pytest.raises(ValueError, match="spare"):
        t.ownership_tags(CLUSTER, "spare", "r1", "subnet-0a00000000000001")


def test_too_long_value_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than 255"):
        t.ownership_tags(CLUSTER, "hold", "r1", "subnet-0a00000000000001", job_id="j" * 256)


@pytest.mark.parametrize(
    ("key", "reserved"),
    [
        ("aws:createdBy", True),
        ("AWS:createdBy", True),
        ("Aws:x", True),
        ("capacity-broker:purpose", True),
        ("Capacity-Broker:purpose", True),
        ("capacity-broker:anything-new", True),
        ("Name", False),
        ("team", False),
        ("awsome", False),
        ("my-capacity-broker:x", False),
        ("capacity-broker", False),
    ],
)
def test_reserved_keys(key: str, reserved: bool) -> None:
    assert t.is_reserved_key(key) is reserved


@pytest.mark.parametrize(
    ("tags", "owned"),
    [
        ({t.TAG_CLUSTER_ID: CLUSTER, t.TAG_PURPOSE: "hold"}, True),
        ({t.TAG_CLUSTER_ID: CLUSTER, t.TAG_PURPOSE: "probe"}, True),
        ({t.TAG_CLUSTER_ID: CLUSTER}, False),
        ({t.TAG_PURPOSE: "hold"}, False),
        ({t.TAG_CLUSTER_ID: "other", t.TAG_PURPOSE: "hold"}, False),
        ({t.TAG_CLUSTER_ID: CLUSTER.upper(), t.TAG_PURPOSE: "hold"}, False),
        ({t.TAG_CLUSTER_ID: CLUSTER, t.TAG_PURPOSE: "something"}, False),
        ({t.TAG_CLUSTER_ID: CLUSTER, t.TAG_PURPOSE: ""}, False),
        ({}, False),
    ],
)
def test_is_owned(tags: dict[str, str], owned: bool) -> None:
    assert t.is_owned(tags, CLUSTER) is owned


def test_empty_cluster_owns_nothing() -> None:
    assert not t.is_owned({t.TAG_CLUSTER_ID: "", t.TAG_PURPOSE: "hold"}, "")


def test_tag_list_round_trip() -> None:
    as_list = [{"Key": "a", "Value": "1"}, {"Key": "b", "Value": ""}]
    assert t.tag_dict(as_list) == {"a": "1", "b": ""}
    assert t.tag_list({"a": "1", "b": ""}) == as_list
    assert t.tag_dict(None) == {}


# -- properties --------------------------------------------------------------------------

keys = st.one_of(
    st.sampled_from([t.TAG_CLUSTER_ID, t.TAG_PURPOSE, t.TAG_REQUEST_ID, "Name", "team"]),
    st.text(max_size=20),
)
values = st.one_of(st.sampled_from([CLUSTER, "probe", "hold", "other", ""]), st.text(max_size=10))


@given(st.dictionaries(keys, values), st.sampled_from([CLUSTER, "other", ""]))
def test_never_owned_without_both_tags(tags: dict[str, str], cluster: str) -> None:
    owned = t.is_owned(tags, cluster)
    if owned:
        assert tags[t.TAG_CLUSTER_ID] == cluster != ""
        assert tags[t.TAG_PURPOSE] in ("probe", "hold")
    if t.TAG_CLUSTER_ID not in tags or t.TAG_PURPOSE not in tags:
        assert not owned


@given(
    st.sampled_from(list(t.Purpose)),
    st.from_regex(r"[A-Za-z0-9._:-]{1,128}", fullmatch=True),
    st.dictionaries(keys.filter(lambda key: 0 < len(key) <= 127), values, max_size=20),
)
def test_created_tags_are_always_owned(
    purpose: t.Purpose, request_id: str, extra: dict[str, str]
) -> None:
    tags = t.ownership_tags(CLUSTER, purpose, request_id, "subnet-0a00000000000001", extra=extra)
    assert t.is_owned(tags, CLUSTER)
    assert not t.is_owned(tags, "another-cluster")
    assert t.purpose_of(tags) is purpose
    assert len(tags["Name"]) <= 255
