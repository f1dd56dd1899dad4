"""One Slurm cluster's programs never reach another's instances: every request id they make
starts ``slurm.<CLUSTER>.`` (the head node's IAM pattern, docs/slurm.md), and no cluster's
ids start with another's (``prod`` and ``prod.x`` used to overlap)."""

from __future__ import annotations

import fnmatch

from capacity_broker.domain.tags import TAG_REQUEST_ID
from capacity_broker.slurm import plan
from hypothesis import given, settings
from hypothesis import strategies as st


def ids_of(cluster: str) -> list[str]:
    return [
        plan.request_id(cluster, 7, 0, "c5", ["hpc-1", "hpc-2"]),
        plan.node_request_id(cluster, "hpc-1", "20261121T100000Z"),
    ]


def head_node_pattern(cluster: str) -> str:
    """The IAM ``StringLike`` value of the head node's policy: ``slurm.CLUSTER.*``, CLUSTER
    being what the cluster's ids carry between ``slurm.`` and the next ``.``."""
    return "slurm." + ids_of(cluster)[0].split(".")[1] + ".*"


def test_prod_cannot_reach_prod_x() -> None:
    for request_id in ids_of("prod.x"):
        assert not fnmatch.fnmatchcase(request_id, head_node_pattern("prod"))
        assert not plan.owns("prod", {TAG_REQUEST_ID: request_id})
    for request_id in ids_of("prod"):
        assert fnmatch.fnmatchcase(request_id, head_node_pattern("prod"))
        assert plan.owns("prod", {TAG_REQUEST_ID: request_id})


def test_names_that_used_to_share_a_label_do_not() -> None:
    for first, second in [("prod.x", "prod-x"), ("a" * 40 + "1", "a" * 40 + "2"), ("p_q", "p-q")]:
        for request_id in ids_of(second):
            assert not plan.owns(first, {TAG_REQUEST_ID: request_id}), (first, second)


NAMES = st.text(alphabet="ab.-_1", min_size=1, max_size=45)


@settings(max_examples=300)
@given(first=NAMES, second=NAMES)
def test_no_clusters_ids_match_anothers_pattern(first: str, second: str) -> None:
    if first == second:
        return
    for request_id in ids_of(second):
        assert not fnmatch.fnmatchcase(request_id, head_node_pattern(first)), (first, second)
        assert not plan.owns(first, {TAG_REQUEST_ID: request_id}), (first, second)
