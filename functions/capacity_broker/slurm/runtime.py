"""What a Slurm program works with: the broker (direct or deployed), EC2 for the instances it
binds and gives back, scontrol (and the bindings it keeps in the nodes' Comment), and Slurm's
cluster name that scopes the instances' tags."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from ..adapters.ec2 import Ec2
from ..client import CapacityBroker
from ..client.in_process import process_environment
from .config import SlurmConfig
from .plan import Binding
from .scontrol import Scontrol

log = logging.getLogger("capacity_broker.slurm")


@contextlib.contextmanager
def aws_environment(config: SlurmConfig) -> Iterator[None]:
    """The configuration's ``aws`` settings as the AWS SDK's own environment of this process
    (profile, shared files, endpoints), for as long as the block runs."""
    with process_environment(config.aws.environment()):
        yield


def aws_session(config: SlurmConfig) -> Any:
    """A boto3 session for the configured region; made inside ``aws_environment``."""
    import boto3

    return boto3.session.Session(region_name=config.region)


@dataclass
class Runtime:
    config: SlurmConfig
    session: Any
    scontrol: Scontrol
    broker: CapacityBroker
    ec2: Ec2

    @classmethod
    def build(cls, config: SlurmConfig, environ: Mapping[str, str] | None = None) -> Runtime:
        session = aws_session(config)
        if config.function_prefix:
            broker = CapacityBroker.deployed(
                function_prefix=config.function_prefix, session=session, regions=[config.region]
            )
        else:
            broker = CapacityBroker(
                regions=[config.region], session=session, cluster_id=config.cluster_id
            )
        return cls(
            config=config,
            session=session,
            scontrol=Scontrol(config.scontrol, environ),
            broker=broker,
            ec2=Ec2(config.region, session=lambda: session),
        )

    @cached_property
    def cluster(self) -> str:
        """Slurm's ClusterName (configured, else asked of slurmctld)."""
        return self.config.slurm_cluster or self.scontrol.cluster_name()

    def bindings(self, nodes: Sequence[str]) -> dict[str, Binding]:
        """Which instance each node was bound to, as Slurm keeps it (the node's Comment);
        nodes without one are left out. Slurm is the record the programs trust: EC2's
        tag-filtered listings may not show an instance made a moment ago."""
        found = self.scontrol.nodes(list(nodes))
        return {
            name: binding
            for name, node in found.items()
            if (binding := Binding.read(node.comment)) is not None
        }
