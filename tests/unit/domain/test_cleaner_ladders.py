"""The cleaner's rule for reserved-first ladders left half-done (``abandoned_ladders``), at its
boundaries and as properties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from capacity_broker.domain.cleaner import (
    Graces,
    LadderNode,
    abandoned_ladders,
    is_ladder_node,
)
from capacity_broker.domain.graces import LADDER_GRACE, RESERVE_MAX_RUN
from capacity_broker.domain.pool import LADDER_DONE, TAG_LADDER, TAG_LADDER_STATE
from capacity_broker.domain.tags import TAG_CLUSTER_ID
from hypothesis import given
from hypothesis import strategies as st

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
CLUSTER = "demo"
WINDOW = Graces().ladder


def node(
    instance_id: str,
    ladder: str | None = "job-1",
    age: timedelta | None = WINDOW + timedelta(seconds=1),
    cluster: str | None = CLUSTER,
    done: bool = False,
) -> LadderNode:
    tags: dict[str, str] = {}
    if cluster is not None:
        tags[TAG_CLUSTER_ID] = cluster
    if ladder is not None:
        tags[TAG_LADDER] = ladder
    if done:
        tags[TAG_LADDER_STATE] = LADDER_DONE
    return LadderNode(instance_id, tags, None if age is None else NOW - age)


def ended(*nodes: LadderNode) -> dict[str, tuple[str, ...]]:
    return {a.ladder: a.instance_ids for a in abandoned_ladders(nodes, CLUSTER, NOW, WINDOW)}


def test_the_window_is_reserves_longest_run_plus_the_grace() -> None:
    assert WINDOW == RESERVE_MAX_RUN + LADDER_GRACE > RESERVE_MAX_RUN


def test_a_ladder_without_its_record_ends_only_past_the_window() -> None:
    assert ended(node("i-1", age=WINDOW)) == {}
    assert ended(node("i-1", age=WINDOW + timedelta(seconds=1))) == {"job-1": ("i-1",)}


def test_the_youngest_node_decides() -> None:
    """A retry that launched the missing rungs a moment ago may still be running: its ladder
    waits, however old its first nodes are."""
    old, young = node("i-1", age=timedelta(hours=5)), node("i-2", age=timedelta(seconds=30))
    assert ended(old, young) == {}
    assert ended(old, node("i-2", age=WINDOW * 2)) == {"job-1": ("i-1", "i-2")}


def test_a_node_with_the_done_record_is_never_ended() -> None:
    assert ended(node("i-1", age=timedelta(days=30), done=True)) == {}
    assert ended(node("i-1", done=True), node("i-2", done=True)) == {}


def test_a_stray_beside_a_done_ladder_is_ended_past_the_window() -> None:
    """Reserve writes the record on every node it claims before answering, so a node of a done
    ladder without it is one no answer gave a job (a node a retry's listing did not show yet):
    it is ended like an unfinished ladder's, once the youngest node is past the window, and
    the recorded nodes beside it never are."""
    assert ended(node("i-1", done=True), node("i-2")) == {"job-1": ("i-2",)}
    assert ended(node("i-1", done=True), node("i-2", age=timedelta(seconds=30))) == {}


def test_an_unknown_launch_time_keeps_its_ladder() -> None:
    assert ended(node("i-1"), node("i-2", age=None)) == {}


def test_a_launch_time_in_the_future_is_brand_new() -> None:
    assert ended(node("i-1", age=-timedelta(hours=2))) == {}


def test_only_this_clusters_ladder_nodes() -> None:
    assert ended(node("i-1", cluster="other")) == {}
    assert ended(node("i-1", cluster=None)) == {}
    assert ended(node("i-1", cluster="DEMO")) == {}
    assert ended(node("i-1", ladder=None)) == {}
    assert ended(node("i-1", ladder="")) == {}
    assert not is_ladder_node({TAG_CLUSTER_ID: "", TAG_LADDER: "x"}, "")
    # Another cluster's node in a ladder of the same id is neither ended nor counted.
    assert ended(node("i-1"), node("i-2", cluster="other", age=timedelta(0))) == {"job-1": ("i-1",)}


def test_ladders_are_judged_apart() -> None:
    assert ended(
        node("i-1", ladder="a"),
        node("i-2", ladder="b", done=True),
        node("i-3", ladder="c", age=timedelta(seconds=5)),
        node("i-4", ladder="d"),
    ) == {"a": ("i-1",), "d": ("i-4",)}


NODES = st.builds(
    node,
    st.text("abcdef", min_size=1, max_size=4).map(lambda s: f"i-{s}"),
    st.sampled_from(["job-1", "job-2", "", None]),
    st.one_of(st.none(), st.integers(-600, 7200).map(lambda s: timedelta(seconds=s))),
    st.sampled_from([CLUSTER, "other", None]),
    st.booleans(),
)


@given(st.lists(NODES, max_size=12, unique_by=lambda n: n.instance_id))
def test_what_is_ended_is_always_this_clusters_old_unrecorded_ladder(
    nodes: list[LadderNode],
) -> None:
    by_id = {n.instance_id: n for n in nodes}
    for ladder in abandoned_ladders(nodes, CLUSTER, NOW, WINDOW):
        members = [
            n
            for n in nodes
            if is_ladder_node(n.tags, CLUSTER) and n.tags[TAG_LADDER] == ladder.ladder
        ]
        unrecorded = [n for n in members if TAG_LADDER_STATE not in n.tags]
        assert sorted(ladder.instance_ids) == sorted(n.instance_id for n in unrecorded)
        assert all(n.launched is not None and NOW - n.launched > WINDOW for n in members)
        for instance_id in ladder.instance_ids:
            found = by_id[instance_id]
            assert found.tags.get(TAG_CLUSTER_ID) == CLUSTER
            assert found.tags.get(TAG_LADDER) == ladder.ladder
            assert TAG_LADDER_STATE not in found.tags
            assert found.launched is not None and NOW - found.launched > WINDOW
        assert ladder.youngest_age > WINDOW
