"""Slurm hostlist expressions through ClusterShell (Slurm's own agreement: tests/slurm)."""

from __future__ import annotations

import pytest
from capacity_broker.slurm.hostlist import HostlistError, expand, fold, validate
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("expression", "names"),
    [
        ("hpc-c5-[1-3]", ["hpc-c5-1", "hpc-c5-2", "hpc-c5-3"]),
        ("n[01-03,10]", ["n01", "n02", "n03", "n10"]),
        ("a,b", ["a", "b"]),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("hpc-c5-[9-11]", ["hpc-c5-9", "hpc-c5-10", "hpc-c5-11"]),
        ("", []),
    ],
)
def test_expand(expression: str, names: list[str]) -> None:
    assert expand(expression) == names


@pytest.mark.parametrize("bad", ["n[1-", "@group", "a!b", "a&b", "a^b", "n[3-1]", "a b"])
def test_what_slurm_would_not_take_is_refused(bad: str) -> None:
    with pytest.raises(HostlistError):
        expand(bad)


def test_an_empty_node_set_is_refused() -> None:
    with pytest.raises(HostlistError, match="names no node"):
        validate(" ")


def test_fold() -> None:
    assert fold(["hpc-c5-2", "hpc-c5-1", "hpc-c5-3", "x07"]) == "hpc-c5-[1-3],x07"
    with pytest.raises(HostlistError):
        fold(["a b"])


names = st.lists(
    st.tuples(st.sampled_from(["hpc-c5-", "n", "gpu"]), st.integers(0, 300)),
    min_size=1,
    max_size=40,
).map(lambda parts: [f"{prefix}{number}" for prefix, number in parts])


@given(names)
def test_fold_then_expand_gives_the_names_back(wanted: list[str]) -> None:
    assert sorted(expand(fold(wanted))) == sorted(set(wanted))
