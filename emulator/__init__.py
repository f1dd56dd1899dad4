"""A capacity-aware local EC2: moto plus the Capacity Reservation and Capacity Block APIs,
with On-Demand capacity that can run out, a clock, throttling and fault injection.

In-process (tests)::

    with emulator.mock() as emu:
        emu.load_scenario("emulator/scenarios/demo.yaml")
        boto3.client("ec2").create_capacity_reservation(...)

As a server: ``python -m emulator serve --scenario FILE --port 5055``.
"""

from .control import Emulator, mock

__all__ = ["Emulator", "mock"]
