"""reserve: hold a job's whole node count in one place, point its launch template at the
hold, optionally launch the nodes, and never leave a hold behind on the way.

(instance type × subnet) pairs are tried type-major in preference order, each attempt a hold
of the whole count in one AZ; the answer is the best-preferred pair that has capacity now, as
trying them one at a time would find, also when the quota has room for one hold at a time.
When each pair is tried is the fan-out's choice (``logic.attempts``): the best hold so far is
kept, every other is given back as soon as it is known to lose. A reservation the job brings
(ODCR or Capacity Block) is validated, used, and never cancelled by any path.

One module per part, each a class the ``Reserver`` holds by name and calls through its public
methods (none inherits from another, and each keeps only what it uses):

- ``reserver``: the flow that orders the parts (``Reserver``), and its one error path;
- ``race``: the race of (type × subnet) pairs, an earlier hold of the request, no winner
  (``Race``);
- ``bring_your_own``: a reservation the job brings, validated and used as it is
  (``BringYourOwn``);
- ``launch``: the job's template, the template version and the EC2 Fleet, a lost fleet
  answer, earlier nodes (``Launch``);
- ``giveback``: cancelling a loser, dropping the kept hold, undoing a failed step
  (``GiveBack``);
- ``replay``: a recorded answer given again, with its reservation's state now (``Replay``);
- ``pool``: a ``reserved-first`` job's reserved pool, read, planned, launched into and read
  back per node (``Pool``); the ladder itself (pool, hold of the shortfall, launches, all or
  nothing) is ordered by ``Reserver``;
- ``answer``: the capacity chosen and the contract's answer built as the flow goes.
"""

from __future__ import annotations

from .answer import Chosen, ReserveStats
from .reserver import Reserver

__all__ = ["Chosen", "ReserveStats", "Reserver"]
