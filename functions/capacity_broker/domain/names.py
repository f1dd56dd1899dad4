"""The names one broker cluster owns, kept apart from every other cluster's.

A cluster's job stacks are found by the start of their name: the stack-status rule matches
``<prefix>*`` and the cleaner may describe ``stack/<prefix>*``. So no cluster's default prefix
may start another's: with SOCA's ``<cluster id>-job-`` and an id that is not allowed a ``job``
word between hyphens, the first ``-job-`` of a stack name ends the cluster id, and ``prod``'s
stacks (``prod-job-7``) and ``soca-prod``'s (``soca-prod-job-7``) or ``prod-job-x``'s never
meet. (The default used to add ``soca-`` to other ids: ``prod`` and ``soca-prod`` then shared
``soca-prod-job-``.)
"""

from __future__ import annotations

JOB_STACK_SEPARATOR = "-job-"


def default_stack_prefix(cluster_id: str) -> str:
    """``<cluster id>-job-``, SOCA's name for a cluster's job stacks; ``ValueError`` when the
    id cannot give a prefix no other cluster's starts with (``stack_prefix_problem``)."""
    problem = stack_prefix_problem(cluster_id)
    if problem is not None:
        raise ValueError(problem)
    return f"{cluster_id}{JOB_STACK_SEPARATOR}"


def stack_prefix_problem(cluster_id: str) -> str | None:
    """Why ``cluster_id`` gives no default job-stack prefix, or ``None``."""
    if not cluster_id[:1].isascii() or not cluster_id[:1].isalpha():
        return "a CloudFormation stack name starts with a letter, this cluster id does not"
    if "job" in cluster_id.split("-"):
        return (
            "a cluster id with 'job' between hyphens would make a prefix that another "
            "cluster's job stacks can start with"
        )
    return None
