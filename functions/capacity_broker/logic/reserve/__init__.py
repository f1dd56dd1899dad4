"""reserve: hold a job's whole node count in one place, point its launch template at the
hold, optionally launch the nodes, and never leave a hold behind on the way.

(instance type × subnet) pairs are tried type-major in preference order, each attempt a hold
of the whole count in one AZ; the answer is the best-preferred pair that has capacity now, as
trying them one at a time would find, also when the quota has room for one hold at a time.
When each pair is tried is the fan-out's choice (``logic.attempts``): the best hold so far is
kept, every other is given back as soon as it is known to lose. A reservation the job brings
(ODCR or Capacity Block) is validated, used, and never cancelled by any path.

One module per part, each a mixin over the shared state in ``base`` (as ``logic.discovery``):

- ``reserver``: the flow that orders the parts (``Reserver``);
- ``race``: the race of (type × subnet) pairs, an earlier hold of the request, no winner;
- ``bring_your_own``: a reservation the job brings, validated and used as it is;
- ``launch``: the template version and the EC2 Fleet, a lost fleet answer, earlier nodes;
- ``giveback``: cancelling a loser, dropping the kept hold, undoing a failed step;
- ``replay``: a recorded answer given again, with its reservation's state now;
- ``answer``: the capacity chosen and the contract's answer built as the flow goes.
"""

from __future__ import annotations

from .answer import Chosen
from .base import ReserveStats
from .reserver import Reserver

__all__ = ["Chosen", "ReserveStats", "Reserver"]
