"""Slurm hostlist expressions (``hpc-c5-[1-4,7]``) ↔ node names.

ClusterShell's ``NodeSet`` (CEA; the library HPC sites use for exactly this) does the
expanding and folding, in this process: the configuration is checked where no Slurm is
installed (``capacity-broker slurm check`` on a laptop), and the programs expand thousands of
names without a process per expression. Slurm's own ``scontrol show hostnames`` stays the
reference: tests/unit/slurm checks the two agree on the expressions Slurm prints.

ClusterShell understands more than Slurm (``@groups``, ``!``/``&``/``^`` operators): such
characters are refused here, and groups are never resolved, so an expression means the same
thing to both.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetParseError

# What a Slurm hostlist expression is made of: names, ranges in brackets, commas.
_SLURM_HOSTLIST = re.compile(r"^[A-Za-z0-9._\-\[\],]+$")


class HostlistError(ValueError):
    """Not a hostlist expression Slurm would accept."""


def _nodeset(expression: str) -> NodeSet:
    text = expression.strip()
    if not text:
        return NodeSet(resolver=RESOLVER_NOGROUP)
    if not _SLURM_HOSTLIST.match(text):
        raise HostlistError(
            f"{expression!r} is not a Slurm hostlist expression (letters, digits, '.', '_', "
            "'-', ranges in brackets such as hpc-[1-4,7], commas)"
        )
    try:
        return NodeSet(text, resolver=RESOLVER_NOGROUP)
    except NodeSetParseError as error:
        raise HostlistError(f"{expression!r}: {error}") from None


def expand(expression: str) -> list[str]:
    """``hpc-c5-[1-3]`` → ``["hpc-c5-1", "hpc-c5-2", "hpc-c5-3"]`` (sorted, no repeats)."""
    return list(_nodeset(expression))


def fold(names: Iterable[str]) -> str:
    """Node names → the shortest hostlist expression (``hpc-c5-[1-3]``)."""
    wanted = list(names)
    for name in wanted:
        if not _SLURM_HOSTLIST.match(name):
            raise HostlistError(f"{name!r} is not a Slurm node name")
    return str(NodeSet.fromlist(wanted, resolver=RESOLVER_NOGROUP))


def validate(expression: str) -> None:
    """Raise ``HostlistError`` unless ``expression`` names at least one node."""
    if not expand(expression):
        raise HostlistError("the hostlist expression names no node")
