"""Reserved concurrency as a deploy option (issue 23, docs/deploy.md): ``-c
reservedConcurrency=probe=N,...`` caps how many environments of a function run at once (how
many EC2 pacers a burst starts); the cleaner's stays 1."""

from __future__ import annotations

from typing import Any

import pytest
from infra_helpers import FUNCTIONS, Synth, synthesize

from infra.config import BrokerConfig, ConfigError

pytestmark = pytest.mark.infra


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    return synthesize(
        {"clusterId": "demo", "reservedConcurrency": "probe=50,reserve=20"},
        outdir=tmp_path_factory.mktemp("cdk-reserved"),
    )


def reserved(synth: Synth, name: str) -> Any:
    _, resource = synth.function(name)
    return resource["Properties"].get("ReservedConcurrentExecutions")


def test_reserved_concurrency_per_function(capped: Synth) -> None:
    got = {name: reserved(capped, name) for name in FUNCTIONS}
    assert got == {
        "probe": 50,
        "reserve": 20,
        "release": None,
        "cleaner": 1,
        "capacity": None,
    }


def test_without_the_option_only_the_cleaner_is_capped(broker: Synth) -> None:
    assert {name: reserved(broker, name) for name in FUNCTIONS}["probe"] is None
    assert reserved(broker, "cleaner") == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ()),
        ("", ()),
        ("probe=50", (("probe", 50),)),
        ({"probe": 10, "capacity": 2}, (("probe", 10), ("capacity", 2))),
    ],
)
def test_reserved_concurrency_values(value: object, expected: object) -> None:
    config = BrokerConfig.from_context({"clusterId": "demo", "reservedConcurrency": value})
    assert config.reserved_concurrency == expected


@pytest.mark.parametrize(
    "value",
    ["cleaner=2", "probe=0", "probe=-1", "probe=1001", "probe=two", "probe=1,probe=2", 5, "x=1"],
)
def test_reserved_concurrency_refuses_nonsense(value: object) -> None:
    with pytest.raises(ConfigError, match="reservedConcurrency"):
        BrokerConfig.from_context({"clusterId": "demo", "reservedConcurrency": value})


def test_provisioned_concurrency_must_fit_in_the_reserved() -> None:
    with pytest.raises(ConfigError, match="exceeds probe's reservedConcurrency"):
        BrokerConfig.from_context(
            {
                "clusterId": "demo",
                "reservedConcurrency": "probe=4",
                "probeProvisionedConcurrency": "8",
            }
        )
