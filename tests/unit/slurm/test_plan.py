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
    assert plan.read_resume_file(text) == plan.ResumeFile(
        [(12, ["hpc-1", "hpc-2"]), (13, ["hpc-3"])],
        [],
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
    assert plan.read_resume_file(text) == plan.ResumeFile(
        [(140814, ["c1", "c2", "c3"])], [], ["c1", "c2", "c3"]
    )


@pytest.mark.parametrize("text", ["not json", "[1]", '{"jobs": {"job_id": 1}}', '{"jobs": 5}'])
def test_a_resume_file_slurm_did_not_write(text: str) -> None:
    with pytest.raises(plan.ResumeFileError):
        plan.read_resume_file(text)


# -- one entry that is not sound affects that entry alone (issue 19) ------------------------------
def _file(*entries: object, all_nodes: object = "hpc-[1-9]") -> str:
    return json.dumps({"all_nodes_resume": all_nodes, "jobs": list(entries)})


SOUND = {"job_id": 12, "nodes_resume": "hpc-[1-2]"}


@pytest.mark.parametrize(
    ("entry", "why", "nodes"),
    [
        # An entry without a job id (it was a whole-file error before: every job's nodes were
        # powered down for it).
        ({"nodes": "hpc-3"}, "job_id null is not a positive integer", ("hpc-3",)),
        # JSON true is a Python bool, and a bool is an int: not job 1.
        ({"job_id": True, "nodes_resume": "hpc-3"}, "job_id true is not", ("hpc-3",)),
        ({"job_id": False, "nodes_resume": "hpc-3"}, "job_id false is not", ("hpc-3",)),
        ({"job_id": 0, "nodes_resume": "hpc-3"}, "job_id 0 is not", ("hpc-3",)),
        ({"job_id": -4, "nodes_resume": "hpc-3"}, "job_id -4 is not", ("hpc-3",)),
        ({"job_id": 2**32, "nodes_resume": "hpc-3"}, "job_id 4294967296 is not", ("hpc-3",)),
        ({"job_id": 13.0, "nodes_resume": "hpc-3"}, "job_id 13.0 is not", ("hpc-3",)),
        ({"job_id": "13", "nodes_resume": "hpc-3"}, 'job_id "13" is not', ("hpc-3",)),
        ({"job_id": [13], "nodes_resume": "hpc-3"}, "job_id [13] is not", ("hpc-3",)),
        ({"job_id": 13, "nodes_resume": "hpc-[3-"}, "nodes: 'hpc-[3-'", None),
        ({"job_id": 13, "nodes_resume": "@all"}, "nodes: '@all' is not a Slurm hostlist", None),
        ({"job_id": 13, "nodes_resume": ["hpc-3"]}, "nodes: a node list that is not a", None),
        ({"job_id": 13, "nodes": 7}, "nodes: a node list that is not a string: 7", None),
        (
            {"job_id": True, "nodes_resume": "hpc-[3-"},
            "job_id true is not a positive integer; nodes: 'hpc-[3-'",
            None,
        ),
        ("hpc-3", "not a JSON object: 'hpc-3'", None),
        (None, "not a JSON object: None", None),
    ],
)
def test_an_entry_that_is_not_sound_is_reported_alone(
    entry: object, why: str, nodes: tuple[str, ...] | None
) -> None:
    later = {"job_id": 14, "nodes": "hpc-[4-5]"}
    read = plan.read_resume_file(_file(SOUND, entry, later))
    assert read.jobs == [(12, ["hpc-1", "hpc-2"]), (14, ["hpc-4", "hpc-5"])]
    [bad] = read.bad
    assert (bad.position, bad.nodes) == (2, nodes)
    assert bad.why.startswith(why), bad.why
    assert bad.label == "SLURM_RESUME_FILE job entry 2"


def test_a_job_id_at_slurms_bounds_is_sound() -> None:
    read = plan.read_resume_file(
        _file({"job_id": 1, "nodes": "hpc-1"}, {"job_id": 0xFFFFFFFD, "nodes": "hpc-2"})
    )
    assert (read.jobs, read.bad) == ([(1, ["hpc-1"]), (0xFFFFFFFD, ["hpc-2"])], [])


@pytest.mark.parametrize("all_nodes", ["hpc-[1-", 5, ["hpc-1"]])
def test_an_unreadable_all_nodes_costs_nothing(all_nodes: object) -> None:
    read = plan.read_resume_file(_file(SOUND, all_nodes=all_nodes))
    assert (read.jobs, read.bad, read.all_nodes) == ([(12, ["hpc-1", "hpc-2"])], [], None)


def _unusable(resumed: list[str], *entries: object) -> list[tuple[str, list[str]]]:
    found = plan.unusable(resumed, plan.read_resume_file(_file(*entries)))
    return [(entry.why, nodes) for entry, nodes in found]


def test_a_bad_entry_whose_nodes_are_known_claims_only_those() -> None:
    resumed = ["hpc-1", "hpc-2", "hpc-3", "hpc-4", "hpc-5"]
    # hpc-2 is also job 12's (a shared node): job 12 launches it; hpc-5 is no entry's.
    assert _unusable(resumed, SOUND, {"job_id": True, "nodes": "hpc-[2-4]"}) == [
        ("job_id true is not a positive integer", ["hpc-3", "hpc-4"])
    ]


def test_a_bad_entry_whose_nodes_cannot_be_known_claims_only_what_no_sound_entry_names() -> None:
    resumed = ["hpc-1", "hpc-2", "hpc-3", "hpc-4", "hpc-5"]
    found = _unusable(
        resumed,
        SOUND,
        {"job_id": 13, "nodes": "hpc-[3-"},
        {"job_id": 14, "nodes": "hpc-4"},
    )
    assert [nodes for _, nodes in found] == [["hpc-3", "hpc-5"]]
    assert found[0][0].startswith("nodes: 'hpc-[3-'")


def test_known_nodes_are_claimed_by_their_own_entry_before_an_unknown_one() -> None:
    resumed = ["hpc-1", "hpc-2", "hpc-3", "hpc-4", "hpc-5"]
    found = _unusable(
        resumed,
        {"job_id": 13, "nodes": "hpc-[3-"},
        {"job_id": 0, "nodes": "hpc-4"},
        SOUND,
    )
    assert [nodes for _, nodes in found] == [["hpc-4"], ["hpc-3", "hpc-5"]]


def test_without_a_bad_entry_nothing_is_unusable() -> None:
    assert _unusable(["hpc-1", "hpc-7"], SOUND) == []


_ENTRY_VALUES = st.one_of(
    st.integers(-2, 2**33),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.floats(allow_nan=False),
    st.lists(st.integers(), max_size=2),
)
_NODE_LISTS = st.one_of(
    st.lists(st.integers(1, 8), max_size=4).map(lambda ns: ",".join(f"hpc-{n}" for n in ns)),
    st.sampled_from(["hpc-[1-", "hpc-[2-3]", "@g", "hpc-1!x", ""]),
    _ENTRY_VALUES,
)


@given(
    entries=st.lists(
        st.one_of(
            st.fixed_dictionaries({"job_id": _ENTRY_VALUES, "nodes_resume": _NODE_LISTS}),
            st.fixed_dictionaries({"job_id": st.integers(1, 99), "nodes": _NODE_LISTS}),
            _ENTRY_VALUES,
        ),
        max_size=6,
    ),
    resumed=st.lists(st.integers(1, 9).map(lambda n: f"hpc-{n}"), unique=True, max_size=9),
)
def test_no_entry_reaches_another_entrys_nodes(entries: list[object], resumed: list[str]) -> None:
    read = plan.read_resume_file(_file(*entries))
    assert len(read.jobs) + len(read.bad) == len(entries)
    assert all(not isinstance(job, bool) and job >= 1 for job, _ in read.jobs)
    sound = {node for _, nodes in read.jobs for node in nodes}
    claimed = [node for _, nodes in plan.unusable(resumed, read) for node in nodes]
    assert len(claimed) == len(set(claimed))  # each node powered down once at most
    assert set(claimed) <= set(resumed) - sound  # never a sound entry's node
    if not any(entry.nodes is None for entry in read.bad):
        named = {node for entry in read.bad for node in entry.nodes or ()}
        assert set(claimed) == (set(resumed) - sound) & named


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
