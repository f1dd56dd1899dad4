"""The Slurm programs' YAML: what it accepts, how it says what is wrong, where it is found."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from capacity_broker.slurm.config import (
    BESIDE_SLURM_CONF,
    DEFAULT_PATH,
    ConfigError,
    config_path,
    load,
)

NODESET = {
    "nodes": "hpc-c5-[1-64]",
    "instance_types": ["c5.large", "c5a.large"],
    "subnet_ids": ["subnet-0a000000000000001", "subnet-0b000000000000002"],
    "launch_template": {"id": "lt-0f000000000000001", "version": "$Latest"},
    "strict": True,
}
CONTRACT_EXAMPLE = {
    "region": "us-east-1",
    "cluster_id": "hpc-prod",
    "function_prefix": "capacity-broker-hpc-prod",
    "nodesets": [NODESET],
}


def write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "slurm.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def test_the_contracts_example_loads(tmp_path: Path) -> None:
    config = load(write(tmp_path, CONTRACT_EXAMPLE))
    assert config.mode == "deployed"
    nodeset = config.nodesets[0]
    assert len(nodeset.members()) == 64
    assert config.nodeset_of("hpc-c5-17") is nodeset
    assert config.nodeset_of("hpc-c5-65") is None
    assert str(config.scontrol) == "/usr/bin/scontrol"


def test_a_node_set_may_say_its_platform(tmp_path: Path) -> None:
    """Contract v3: node sets accept ``instance_platform`` or ``image_id`` (not both), passed
    to reserve; neither leaves the platform to the template's image."""
    rhel = NODESET | {"instance_platform": "Red Hat Enterprise Linux"}
    config = load(write(tmp_path, CONTRACT_EXAMPLE | {"nodesets": [rhel]}))
    assert config.nodesets[0].platform_options() == {
        "instance_platform": "Red Hat Enterprise Linux"
    }
    imaged = NODESET | {"image_id": "ami-0123456789abcdef0"}
    config = load(write(tmp_path, CONTRACT_EXAMPLE | {"nodesets": [imaged]}))
    assert config.nodesets[0].platform_options() == {"image_id": "ami-0123456789abcdef0"}
    assert load(write(tmp_path, CONTRACT_EXAMPLE)).nodesets[0].platform_options() == {}
    both = rhel | {"image_id": "ami-0123456789abcdef0"}
    with pytest.raises(ConfigError, match="instance_platform or image_id, not both"):
        load(write(tmp_path, CONTRACT_EXAMPLE | {"nodesets": [both]}))
    with pytest.raises(ConfigError, match=r"nodesets\.0\.instance_platform"):
        load(
            write(
                tmp_path, CONTRACT_EXAMPLE | {"nodesets": [NODESET | {"instance_platform": "RHEL"}]}
            )
        )


def test_a_node_set_may_name_the_block_it_launches_into(tmp_path: Path) -> None:
    block = NODESET | {"capacity_reservation_id": "cr-0b10c0000000000b1"}
    config = load(write(tmp_path, CONTRACT_EXAMPLE | {"nodesets": [block]}))
    assert config.nodesets[0].capacity_reservation_id == "cr-0b10c0000000000b1"
    bad = NODESET | {"capacity_reservation_id": "cr-*"}
    with pytest.raises(ConfigError, match=r"nodesets\.0\.capacity_reservation_id"):
        load(write(tmp_path, CONTRACT_EXAMPLE | {"nodesets": [bad]}))


def test_a_reserved_first_node_set_may_allow_on_demand(tmp_path: Path) -> None:
    """Issue 43: ``allow_on_demand`` is passed to reserve with ``capacity: reserved-first``, and
    refused without it (at load, naming the file)."""
    from capacity_broker.models import ReserveRequest

    ladder = NODESET | {"capacity": "reserved-first", "allow_on_demand": True}
    config = load(write(tmp_path, CONTRACT_EXAMPLE | {"nodesets": [ladder]}))
    options = config.nodesets[0].capacity_options()
    assert options == {"capacity": "reserved-first", "allow_on_demand": True}
    # What reserve receives is a request its model takes as the same opt-in.
    request = ReserveRequest.model_validate(
        {
            "job_id": "7",
            "instance_types": NODESET["instance_types"],
            "subnet_ids": NODESET["subnet_ids"],
            "instance_count": 2,
            "launch_template": {"id": "lt-0f000000000000001"},
            "provision": True,
            **options,
        }
    )
    assert request.allow_on_demand is True
    plain = NODESET | {"capacity": "reserved-first"}
    assert load(write(tmp_path, CONTRACT_EXAMPLE | {"nodesets": [plain]})).nodesets[
        0
    ].capacity_options() == {"capacity": "reserved-first"}
    alone = NODESET | {"allow_on_demand": True}
    path = write(tmp_path, CONTRACT_EXAMPLE | {"nodesets": [alone]})
    with pytest.raises(ConfigError, match="allow_on_demand is used only with capacity") as error:
        load(path)
    assert str(path) in str(error.value)


def test_the_stacks_alias_is_the_qualifier(tmp_path: Path) -> None:
    config = load(write(tmp_path, CONTRACT_EXAMPLE | {"function_qualifier": "live"}))
    assert config.function_qualifier == "live"
    assert load(write(tmp_path, CONTRACT_EXAMPLE)).function_qualifier is None
    with pytest.raises(ConfigError, match="function_qualifier"):
        load(write(tmp_path, CONTRACT_EXAMPLE | {"function_qualifier": "live:1"}))
    # The programs' broker invokes the alias.
    from capacity_broker.slurm.runtime import Runtime

    built = Runtime.build(load(write(tmp_path, CONTRACT_EXAMPLE | {"function_qualifier": "live"})))
    assert built.broker.function_qualifier == "live"


def test_a_numeric_template_version_is_text(tmp_path: Path) -> None:
    data = CONTRACT_EXAMPLE | {
        "nodesets": [NODESET | {"launch_template": {"id": "lt-0f000000000000001", "version": 7}}]
    }
    assert load(write(tmp_path, data)).nodesets[0].launch_template.version == "7"


def test_a_region_aws_does_not_have_is_refused_at_once(tmp_path: Path) -> None:
    """The CLI's rule (botocore's partitions, no call): a typo used to cost every job a
    56-second connection time-out and a misleading error."""
    path = write(tmp_path, CONTRACT_EXAMPLE | {"region": "us-east-7"})
    with pytest.raises(ConfigError) as error:
        load(path)
    assert "region: 'us-east-7' is not an AWS region (did you mean" in str(error.value)
    assert "'us-east-1'" in str(error.value)
    assert load(write(tmp_path, CONTRACT_EXAMPLE | {"region": "eu-west-3"})).region == "eu-west-3"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"region": "us-east"}, "region"),
        ({"cluster_id": None, "function_prefix": None}, "set cluster_id (direct mode"),
        ({"scontrol": "scontrol"}, "scontrol: must be an absolute path"),
        ({"log_file": "broker.log"}, "log_file: must be an absolute path"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
        ({"nodesets": []}, "nodesets: List should have at least 1 item"),
        ({"nodesets": [NODESET | {"nodes": "hpc-[1-"}]}, "nodesets.0.nodes"),
        ({"nodesets": [NODESET | {"nodes": "@compute"}]}, "not a Slurm hostlist expression"),
        ({"nodesets": [NODESET | {"subnet_ids": ["subnet-x"]}]}, "nodesets.0.subnet_ids.0"),
        (
            {
                "nodesets": [
                    NODESET
                    | {"launch_template": {"id": "lt-0f000000000000001", "version": "latest"}}
                ]
            },
            "nodesets.0.launch_template.version",
        ),
        (
            {"nodesets": [NODESET, NODESET | {"nodes": "hpc-c5-[64-70]"}]},
            "node hpc-c5-64 is in two node sets",
        ),
        ({"aws": {"config_file": "aws/config"}}, "aws.config_file: must be an absolute path"),
        ({"aws": {"endpoint_url": "localhost:5055"}}, "aws.endpoint_url"),
        ({"aws": {"endpoint_urls": {"EC2!": "http://x"}}}, "is not a service id"),
    ],
)
def test_mistakes_are_named_with_the_file_and_the_field(
    tmp_path: Path, change: dict[str, Any], expected: str
) -> None:
    path = write(tmp_path, CONTRACT_EXAMPLE | change)
    with pytest.raises(ConfigError) as error:
        load(path)
    assert str(path) in str(error.value)
    assert expected in str(error.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("region: [unclosed", "not valid YAML"),
        ("- a list", "the configuration is a mapping"),
    ],
)
def test_a_file_that_is_not_a_mapping(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load(write(tmp_path, text))


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read"):
        load(tmp_path / "missing.yaml")


def test_where_the_file_is_found(tmp_path: Path) -> None:
    slurm_conf = tmp_path / "slurm.conf"
    # slurmctld passes SLURM_CONF only: the file beside slurm.conf, when there is one.
    assert config_path({"SLURM_CONF": str(slurm_conf)}) == DEFAULT_PATH
    (tmp_path / BESIDE_SLURM_CONF).write_text("{}")
    assert config_path({"SLURM_CONF": str(slurm_conf)}) == tmp_path / BESIDE_SLURM_CONF
    explicit = {"SLURM_CONF": str(slurm_conf), "CAPACITY_BROKER_SLURM_CONFIG": "/srv/x.yaml"}
    assert config_path(explicit) == Path("/srv/x.yaml")
    assert config_path({}) == DEFAULT_PATH


def test_the_aws_section_is_the_sdks_own_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each field is the SDK setting of the same name, set on the programs' session (never
    on the process: slurmctld gives it no environment, and nothing of it is changed)."""
    from capacity_broker.slurm.runtime import aws_session

    credentials = tmp_path / "credentials"
    credentials.write_text("[broker]\naws_access_key_id = AKIABROKER\naws_secret_access_key = s\n")
    config_file = tmp_path / "config"
    config_file.write_text("")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    data = CONTRACT_EXAMPLE | {
        "aws": {
            "profile": "broker",
            "credentials_file": str(credentials),
            "config_file": str(config_file),
            "endpoint_url": "http://127.0.0.1:5055",
            "endpoint_urls": {"ec2": "https://vpce-1.ec2.us-east-1.vpce.amazonaws.com"},
        }
    }
    before = dict(os.environ)
    session = aws_session(load(write(tmp_path, data)))
    assert dict(os.environ) == before
    core = session._session
    assert core.get_config_variable("profile") == "broker"
    assert core.get_config_variable("credentials_file") == str(credentials)
    assert core.get_config_variable("config_file") == str(config_file)
    assert session.region_name == "us-east-1"
    ec2 = session.client("ec2")
    assert ec2.meta.endpoint_url == "https://vpce-1.ec2.us-east-1.vpce.amazonaws.com"
    assert ec2._request_signer._credentials.access_key == "AKIABROKER"
    assert session.client("lambda").meta.endpoint_url == "http://127.0.0.1:5055"
    # Nothing configured: the SDK's own defaults.
    plain = aws_session(load(write(tmp_path, CONTRACT_EXAMPLE)))
    assert "amazonaws.com" in plain.client("ec2").meta.endpoint_url


def test_the_log_destination(tmp_path: Path) -> None:
    config = load(write(tmp_path, CONTRACT_EXAMPLE | {"log_file": "/var/log/cb.log"}))
    assert config.log_destination({}) == Path("/var/log/cb.log")
    assert config.log_destination({"CAPACITY_BROKER_SLURM_LOG": "/tmp/x.log"}) == Path("/tmp/x.log")
    assert load(write(tmp_path, CONTRACT_EXAMPLE)).log_destination({}) is None
