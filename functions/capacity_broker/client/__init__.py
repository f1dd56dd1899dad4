"""The Python client: ``from capacity_broker import CapacityBroker, ReservationType``.

Two modes, one interface (``broker``):

- ``CapacityBroker(regions=None, session=None)`` calls AWS directly with boto3. ``probe``,
  ``reserve``, ``release`` and ``clean`` run the broker's own Lambda handlers in this process
  (``in_process``; they need the cluster id: ``cluster_id=`` or ``BROKER_CLUSTER_ID``).
- ``CapacityBroker.deployed(function_prefix=..., session=None)`` invokes the deployed
  functions ``<prefix>-probe``, ``-reserve``, ``-release``, ``-cleaner`` and ``-capacity``
  with boto3's Lambda client (``deployed``). The read-only look-ups the functions do not serve
  (``offerings``, ``search``, ``az``, ``spot``, ``plan``) call EC2 with the same session.

Every broker calls AWS with its own ``session`` (without one, the process's default session),
whatever other brokers in the process were given.

Discovery looks at every region enabled for the account unless told otherwise (``regions``:
where the rule is written); a region name AWS does not have is refused before any call.

Listings come back as :class:`Results`: a ``list`` of typed rows (pydantic models with the
contract's field names and the seed documents' names, e.g. ``instance_count``), with
``.errors`` for the regions that could not be asked, ``.regions`` for those that were and,
for ``capacity``, ``.summary``. When every region fails a :class:`RegionsFailed` is raised
instead of an empty list that would read as "no capacity".
"""

from __future__ import annotations

from .broker import CapacityBroker
from .deployed import INVOKE_READ_TIMEOUT
from .in_process import (
    DEFAULT_REGION,
    ENTRY_POINTS,
    IN_PROCESS_TIMEOUT_MS,
    InProcessContext,
    handler_module,
    invoke_in_process,
)
from .results import (
    BrokerError,
    EntryPointUnavailable,
    FunctionError,
    InvalidArguments,
    InvokeFailed,
    RegionsFailed,
    ReservationType,
    Results,
    UnknownRegions,
)

__all__ = [
    "DEFAULT_REGION",
    "ENTRY_POINTS",
    "INVOKE_READ_TIMEOUT",
    "IN_PROCESS_TIMEOUT_MS",
    "BrokerError",
    "CapacityBroker",
    "EntryPointUnavailable",
    "FunctionError",
    "InProcessContext",
    "InvalidArguments",
    "InvokeFailed",
    "RegionsFailed",
    "ReservationType",
    "Results",
    "UnknownRegions",
    "handler_module",
    "invoke_in_process",
]
