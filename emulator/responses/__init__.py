"""The emulator's EC2 actions, in moto's style: one response class per resource family.

``emulator.install`` copies these methods onto moto's ``EC2Response`` (moto's dispatcher looks
actions up by snake_case name on that class).
"""

from .capacity_blocks import CapacityBlocks
from .capacity_reservations import CapacityReservations
from .discovery import Discovery
from .future import FutureQuotes
from .instances import Instances
from .launch_templates import LaunchTemplateVersions
from .launches import Launches
from .regions import Regions
from .tags import Tags

RESPONSE_CLASSES = (
    CapacityReservations,
    CapacityBlocks,
    FutureQuotes,
    LaunchTemplateVersions,
    Launches,
    Instances,
    Discovery,
    Regions,
    Tags,
)

__all__ = [
    "RESPONSE_CLASSES",
    "CapacityBlocks",
    "CapacityReservations",
    "Discovery",
    "FutureQuotes",
    "Instances",
    "LaunchTemplateVersions",
    "Launches",
    "Regions",
    "Tags",
]
