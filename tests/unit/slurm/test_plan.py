"""The Slurm integration's rules: units, request ids, node ↔ instance, reasons."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from capacity_broker.models.common import REQUEST_ID_PATTERN
from capacity_broker.slurm import plan
from hypothesis import given
from hypothesis import strategies as st


def test_the_resume_file_of_slurm_22_05() -> None:
    text = json.dumps(
        {
            "jobs": [{"job_id": 12, "nodes": "hpc-[1-2]"}, {"job_id": 13, "nodes": "hpc-3"}],
            "all_nodes": "hpc-[1-4]",
        }
    )
    assert plan.read_resume_file(text) == (
        [(12, ["hpc-1", "hpc-2"]), (13, ["hpc-3"])],
        ["hpc-1", "hpc-2", "hpc-3", "hpc-4"],
    )


def test_the_resume_file_of_later_releases() -> None:
    text = json.dumps(
        {
            "all_nodes_resume": "c[1-3]",
            "jobs": [
                {
                    "job_id": 140814,
                    "nodes_alloc": "c[1-4]",
                    "nodes_resume": "c[1-3]",
                    "partition": "cloud",
                    "features": "c1,c2",
                }
            ],
        }
    )
    assert plan.read_resume_file(text) == ([(140814, ["c1", "c2", "c3"])], ["c1", "c2", "c3"])


@pytest.mark.parametrize("text", ["not json", "[1]", '{"jobs": [{"nodes": "a"}]}'])
def test_a_resume_file_slurm_did_not_write(text: str) -> None:
    with pytest.raises(plan.ResumeFileError):
        plan.read_resume_file(text)


def test_units_per_job_then_per_node() -> None:
    units = plan.units(
        ["a1", "a2", "a3", "a4", "a5"],
        [(12, ["a1", "a2"]), (13, ["a2", "a3", "x9"]), (14, ["x9"])],
    )
    assert units == [
        plan.Unit(12, ("a1", "a2")),
        # a2 launches once, with job 12; x9 is not being resumed
        plan.Unit(13, ("a3",)),
        plan.Unit(None, ("a4",)),
        plan.Unit(None, ("a5",)),
    ]


def test_request_ids_are_stable_per_try_and_change_with_the_restart_count() -> None:
    first = plan.request_id("hpc", 12, 0, "c5", ["n2", "n1"])
    assert first == plan.request_id("hpc", 12, 0, "c5", ["n1", "n2"])
    assert first != plan.request_id("hpc", 12, 1, "c5", ["n1", "n2"])
    assert first != plan.request_id("hpc", 12, 0, "m5", ["n1", "n2"])
    assert first != plan.request_id("hpc", 12, 0, "c5", ["n1", "n3"])
    assert first != plan.request_id("other", 12, 0, "c5", ["n1", "n2"])
    assert first.startswith("slurm.hpc.job-12.r0.")


@given(
    cluster=st.text(min_size=1, max_size=300),
    job=st.integers(0, 2**32),
    restarts=st.integers(0, 10**6),
    nodes=st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=20),
)
def test_request_ids_are_always_valid_for_the_broker(
    cluster: str, job: int, restarts: int, nodes: list[str]
) -> None:
    assert re.match(REQUEST_ID_PATTERN, plan.request_id(cluster, job, restarts, "set", nodes))
    node_id = plan.node_request_id(cluster, nodes[0], "1795466870000000000")
    assert re.match(REQUEST_ID_PATTERN, node_id)
    assert node_id.startswith(plan.node_request_prefix(cluster, nodes[0]))


def test_pairing_keeps_earlier_bindings() -> None:
    assert plan.pair(["n1", "n2"], {"i-b": None, "i-a": None}) == [("n1", "i-a"), ("n2", "i-b")]
    assert plan.pair(["n1", "n2"], {"i-a": "n2", "i-b": None}) == [("n1", "i-b"), ("n2", "i-a")]
    # a tag naming another node is not a binding to keep
    assert plan.pair(["n1"], {"i-a": "n9"}) == [("n1", "i-a")]
    with pytest.raises(ValueError, match="1 instances for 2 nodes"):
        plan.pair(["n1", "n2"], {"i-a": None})


def test_reasons_start_with_the_prefix_and_name_the_status() -> None:
    text = plan.reason("no_capacity", "No single place\ncan hold 2 × c5.large")
    assert text == "capacity-broker: no_capacity: No single place can hold 2 × c5.large"
    assert len(plan.reason("error", "x" * 1000)) == plan.MAX_REASON


def test_the_brokers_job_id() -> None:
    assert plan.job_tag(plan.Unit(12, ("a",))) == "12"
    assert plan.job_tag(plan.Unit(None, ("a7",))) == "slurm-node-a7"


def test_a_binding_is_one_word_slurm_keeps_and_reads_back() -> None:
    when = datetime(2026, 11, 23, 22, 52, 6, tzinfo=UTC)
    binding = plan.Binding("i-0123456789abcdef0", when)
    text = binding.text()
    assert text == "capacity-broker:instance=i-0123456789abcdef0,bound=2026-11-23T22:52:06Z"
    assert " " not in text
    assert plan.Binding.read(text) == binding


@pytest.mark.parametrize(
    "comment",
    [
        None,
        "",
        "rebooted by Ann, ticket 42",
        "capacity-broker:instance=i-0123456789abcdef0",
        "capacity-broker:instance=vol-0123456789abcdef0,bound=2026-11-23T22:52:06Z",
        "capacity-broker:instance=i-0123456789abcdef0,bound=2026-11-23T22:52:06Z; and more",
    ],
)
def test_anything_else_in_a_comment_is_no_binding(comment: str | None) -> None:
    assert plan.Binding.read(comment) is None


def test_a_binding_is_fresh_while_ec2_would_still_show_its_instance_terminated() -> None:
    when = datetime(2026, 11, 23, 22, 0, 0, tzinfo=UTC)
    binding = plan.Binding("i-0123456789abcdef0", when)
    assert binding.fresh(when + timedelta(seconds=5))
    assert binding.fresh(when + plan.FRESH_BINDING - timedelta(seconds=1))
    assert not binding.fresh(when + plan.FRESH_BINDING)
    # EC2 shows a terminated instance for about an hour: a fresh binding's is still there.
    assert timedelta(hours=1) > plan.FRESH_BINDING


def test_only_the_instances_this_clusters_programs_launched_are_owned() -> None:
    def launched_by(request_id: str) -> dict[str, str]:
        return {"capacity-broker:request-id": request_id}

    assert plan.owns("hpc", launched_by(plan.request_id("hpc", 12, 0, "c5", ["n1"])))
    assert plan.owns("hpc", launched_by(plan.node_request_id("hpc", "n", "1")))
    assert not plan.owns("hpc", launched_by(plan.request_id("hpc2", 12, 0, "c5", ["n1"])))
    assert not plan.owns("hpc", launched_by("web-fleet-1"))
    assert not plan.owns("hpc", {})
