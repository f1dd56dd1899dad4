"""What a Slurm program works with: the broker (direct or deployed), EC2 for the instances it
binds and gives back, scontrol (and the bindings it keeps in the nodes' Comment), and Slurm's
cluster name that scopes the instances' tags."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import boto3
import botocore.session

from ..adapters.ec2 import Ec2
from ..client import CapacityBroker
from .config import AwsAccess, SlurmConfig
from .plan import Binding
from .scontrol import Scontrol

log = logging.getLogger("capacity_broker.slurm")


class EndpointSession(boto3.session.Session):
    """A boto3 session whose clients go to the configured endpoints (``aws.endpoint_url`` for
    every service, ``aws.endpoint_urls`` per service id), as the SDK's ``AWS_ENDPOINT_URL`` and
    ``AWS_ENDPOINT_URL_<SERVICE>`` would send them, without setting either in the process."""

    def __init__(self, endpoints: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.endpoints = dict(endpoints)

    def client(self, service_name: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("endpoint_url") is None:
            url = self.endpoints.get(service_name.lower(), self.endpoints.get(""))
            if url:
                kwargs["endpoint_url"] = url
        return super().client(service_name, *args, **kwargs)  # type: ignore[call-overload]


def aws_session(config: SlurmConfig) -> boto3.session.Session:
    """A boto3 session for the configured region, with the configuration's ``aws`` settings
    (profile, shared files, endpoints) set on the session itself: slurmctld gives the programs
    an empty environment, and nothing of the process is changed for them."""
    access: AwsAccess = config.aws
    core = botocore.session.Session()
    # The SDK's own settings of the same names (what AWS_CONFIG_FILE,
    # AWS_SHARED_CREDENTIALS_FILE and AWS_PROFILE would say), before anything reads them.
    if access.config_file:
        core.set_config_variable("config_file", str(access.config_file))
    if access.credentials_file:
        core.set_config_variable("credentials_file", str(access.credentials_file))
    if access.profile:
        core.set_config_variable("profile", access.profile)
    endpoints = dict(access.endpoint_urls)
    if access.endpoint_url:
        endpoints[""] = access.endpoint_url
    if not endpoints:
        return boto3.session.Session(botocore_session=core, region_name=config.region)
    return EndpointSession(endpoints, botocore_session=core, region_name=config.region)


@dataclass
class Runtime:
    config: SlurmConfig
    session: Any
    scontrol: Scontrol
    broker: CapacityBroker
    ec2: Ec2

    @classmethod
    def build(
        cls, config: SlurmConfig, environ: Mapping[str, str] | None = None, session: Any = None
    ) -> Runtime:
        """The program's runtime. In direct mode its ``CapacityBroker`` builds its own root
        (``root.Root``) on ``session`` (default: ``aws_session``), so the jobs of one resume
        run their reserves at once, each on that root, in this process."""
        session = session if session is not None else aws_session(config)
        if config.function_prefix:
            broker = CapacityBroker.deployed(
                function_prefix=config.function_prefix,
                session=session,
                regions=[config.region],
                qualifier=config.function_qualifier,
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
            # The broker's own EC2 adapter: one session, one pacer for the whole program.
            ec2=broker.adapters.ec2(config.region),
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
