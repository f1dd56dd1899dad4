"""What probe and reserve spend, made visible: CloudWatch metrics per instance type and per AZ,
and the capacity memory's writes joined before the handler returns.

Metrics (namespace ``CapacityBroker``, embedded metric format through Powertools):

- per function (dimension ``service``): ``ReservationSecondsHeld``, ``InstanceSecondsHeld``
  (reservation-seconds × the request's instance count: what the bill follows),
  ``CapacityCreates`` (EC2 creates made), ``CancelFailures``;
- per instance type (``service``, ``InstanceType``): ``Attempts`` and one count per outcome
  (``AttemptsAvailable``, ``AttemptsInsufficient``, ``AttemptsUnsupported``,
  ``AttemptsLimitExceeded``, ``AttemptsFailed``), ``ReservationSeconds``, ``InstanceSeconds``;
- per AZ id (``service``, ``AvailabilityZoneId``): ``Attempts``, ``AttemptsInsufficient``,
  ``ReservationSeconds``.

CloudWatch bills every distinct metric (name and dimension values) a month. Types are what
the schedulers ask for, a handful per cluster; AZ ids are at most a few per region of the
broker. Both are bounded, their product is not kept small by anything (types × AZs grows with
every region and type added), so no metric carries both: that view is ``capacity-broker
history`` (the capacity memory), which costs nothing per key. Only a type EC2 has answered
available, insufficient capacity or a quota error for gets metrics of its own: an unknown type
gets an error, or ``Unsupported``, on every create (EC2 has no "unknown instance type" code of
its own for CreateCapacityReservation), so a caller's typo cannot mint metrics. A real type
unsupported in every AZ it was tried in is counted in the function's totals only. Each type's
and each AZ's metrics are one EMF document (``EphemeralMetrics``: a dimension set of their
own, which ``Metrics`` cannot give several metrics at once without ``single_metric``'s one
document per metric).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from aws_lambda_powertools.metrics import MetricUnit

from ..domain.memory import Observation, Seen
from ..logic.attempts import Spending
from ..logic.memory import WRITE_SECONDS, CapacityMemory
from ._runtime import Invocation, Output

OUTCOME_METRICS = {
    Seen.AVAILABLE: "AttemptsAvailable",
    Seen.INSUFFICIENT: "AttemptsInsufficient",
    Seen.UNSUPPORTED: "AttemptsUnsupported",
    Seen.QUOTA: "AttemptsLimitExceeded",
    Seen.ERROR: "AttemptsFailed",
}
# What EC2 says only of a type it knows (``Unsupported`` it says of unknown ones too).
_CAPACITY_FACTS = frozenset({Seen.AVAILABLE, Seen.INSUFFICIENT, Seen.QUOTA})


def finish(store: CapacityMemory, invocation: Invocation) -> None:
    """Join the memory's writes under way: Lambda freezes the container's threads once the
    handler returns. The write of the facts known at the decision started then, beside the
    give-backs, so this waits for nothing in the usual case."""
    left = invocation.hard_deadline - invocation.root.monotonic()
    store.flush(timeout=max(0.0, min(WRITE_SECONDS, left)))


def emit(out: Output, spending: Spending) -> None:
    """The request's spending as metrics (see the module's docstring), where ``out`` puts
    them (none for a caller in its own process)."""
    metrics = out.metrics
    seconds = spending.reservation_seconds
    metrics.add_metric(name="ReservationSecondsHeld", unit=MetricUnit.Seconds, value=seconds)
    metrics.add_metric(
        name="InstanceSecondsHeld",
        unit=MetricUnit.Seconds,
        value=seconds * spending.instance_count,
    )
    metrics.add_metric(name="CapacityCreates", unit=MetricUnit.Count, value=spending.creates)
    if spending.cancel_failures:
        metrics.add_metric(
            name="CancelFailures", unit=MetricUnit.Count, value=spending.cancel_failures
        )
    by_type, by_zone = tallies(spending.observations, spending.instance_count)
    for instance_type, values in sorted(by_type.items()):
        out.document({"InstanceType": instance_type}, values)
    for zone, values in sorted(by_zone.items()):
        out.document({"AvailabilityZoneId": zone}, values)


def tallies(
    observations: Iterable[Observation], instance_count: int
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Metric values per instance type and per AZ id. Types without a capacity fact are left
    out (see the module's docstring); so are the AZs only they touched."""
    seen = list(observations)
    known = {o.key.instance_type for o in seen if o.seen in _CAPACITY_FACTS}
    by_type: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    by_zone: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for o in seen:
        if o.key.instance_type not in known:
            continue
        kind = by_type[o.key.instance_type]
        zone = by_zone[o.key.availability_zone_id]
        if o.seen is not None:
            kind["Attempts"] += 1
            kind[OUTCOME_METRICS[o.seen]] += 1
            zone["Attempts"] += 1
            if o.seen is Seen.INSUFFICIENT:
                zone["AttemptsInsufficient"] += 1
        if o.reservation_seconds:
            kind["ReservationSeconds"] += o.reservation_seconds
            kind["InstanceSeconds"] += o.reservation_seconds * instance_count
            zone["ReservationSeconds"] += o.reservation_seconds
    return (
        {k: dict(v) for k, v in by_type.items()},
        {k: dict(v) for k, v in by_zone.items()},
    )
