"""Which regions an account has enabled.

AWS: "Regions launched before March 20, 2019 are enabled by default ... Regions launched after
March 20, 2019 are disabled by default" (Account Management Reference Guide, "Specify which AWS
Regions your account can use"). moto marks a different set as needing no opt-in (af-south-1,
eu-south-1 and ap-southeast-3 among them, which are opt-in regions), so the emulator keeps its
own. GovCloud and China accounts have no opt-in regions. Loading a scenario opts the account in
to the regions it uses, as an operator would have.
"""

from __future__ import annotations

from moto.ec2.models import ec2_backends
from moto.utilities.utils import get_partition

ENABLED_BY_DEFAULT = frozenset(
    {
        "us-east-1",
        "us-east-2",
        "us-west-1",
        "us-west-2",
        "ca-central-1",
        "sa-east-1",
        "eu-central-1",
        "eu-west-1",
        "eu-west-2",
        "eu-west-3",
        "eu-north-1",
        "ap-south-1",
        "ap-northeast-1",
        "ap-northeast-2",
        "ap-northeast-3",
        "ap-southeast-1",
        "ap-southeast-2",
    }
)
# The account's opt-ins live beside moto's EC2 backend of this region, so moto's reset
# clears them with everything else.
_HOME = "us-east-1"


def opted_in(account_id: str) -> set[str]:
    """The opt-in regions this account has enabled (mutable)."""
    backend = ec2_backends[account_id][_HOME]
    found: set[str] | None = backend.__dict__.get("_opted_in_regions")
    if found is None:
        found = backend.__dict__["_opted_in_regions"] = set()
    return found


def opt_in_status(account_id: str, region: str) -> str:
    """EC2's ``OptInStatus`` of ``region`` for this account."""
    if region in ENABLED_BY_DEFAULT or get_partition(region) != "aws":
        return "opt-in-not-required"
    return "opted-in" if region in opted_in(account_id) else "not-opted-in"
