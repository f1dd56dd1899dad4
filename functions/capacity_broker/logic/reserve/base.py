"""What every part of reserve shares: the adapters, the reservation core, the clocks and the
capacity memory, set once per container. The parts (race, launch, give back, bring your own)
are mixins over this state, as ``logic.discovery`` is, so a test or the handler that changes
one of these attributes on the ``Reserver`` changes it for every part."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from ...adapters.ec2 import Ec2
from ...adapters.ssm import Flags, ImageParameters
from ..attempts import Spending
from ..memory import CapacityMemory
from ..reservations import ReservationCore, utcnow
from ..templates import Templates

# What the handler's metrics are made of (every create's answer, every give-back's seconds).
ReserveStats = Spending


class ReserverBase:
    def __init__(
        self,
        ec2: Ec2,
        flags: Flags,
        core: ReservationCore,
        max_concurrency: int = 16,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], datetime] = utcnow,
        memory: CapacityMemory | None = None,
        parameters: ImageParameters | None = None,
    ) -> None:
        self.ec2 = ec2
        self.flags = flags
        self.core = core
        self.max_concurrency = max_concurrency
        self.monotonic = monotonic
        self.clock = clock
        self.memory = memory
        self.templates = Templates(ec2, core.cluster_id)
        # The Systems Manager parameters a template's image may name (resolve:ssm:).
        self.parameters = parameters or ImageParameters(ec2.region, ec2.clients, ec2.retry)
