"""ClusterShell (the programs' hostlists) and Slurm's own ``scontrol show hostnames`` /
``show hostlist`` agree on the expressions either writes."""

from __future__ import annotations

import subprocess

import pytest
from capacity_broker.slurm.hostlist import expand, fold
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def scontrol(slurm_tools: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    # scontrol reads a configuration before anything, even to expand a hostlist.
    conf = tmp_path_factory.mktemp("hostlist") / "slurm.conf"
    conf.write_text("ClusterName=hostlist\nSlurmctldHost=localhost\nNodeName=n1\n")
    return [slurm_tools["scontrol"], str(conf)]


def slurm(scontrol: list[str], *args: str) -> str:
    tool, conf = scontrol
    done = subprocess.run(
        [tool, *args], env={"SLURM_CONF": conf}, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


names = st.lists(
    st.tuples(
        st.sampled_from(["hpc-c5-", "n", "gpu-a", "r1-n"]), st.integers(0, 120), st.booleans()
    ),
    min_size=1,
    max_size=30,
).map(lambda parts: [f"{p}{n:03d}" if pad else f"{p}{n}" for p, n, pad in parts])


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names)
def test_both_expand_each_others_expressions_alike(scontrol: list[str], wanted: list[str]) -> None:
    ours = fold(wanted)
    assert sorted(slurm(scontrol, "show", "hostnames", ours).split()) == sorted(set(wanted))
    theirs = slurm(scontrol, "show", "hostlist", ",".join(wanted)).strip()
    assert sorted(expand(theirs)) == sorted(set(wanted))


def test_multi_dimensional_expressions(scontrol: list[str]) -> None:
    expression = "rack[1-2]-node[01-03],hpc-c5-[7,9-11]"
    assert sorted(slurm(scontrol, "show", "hostnames", expression).split()) == sorted(
        expand(expression)
    )
