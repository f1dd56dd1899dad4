"""The capacity emulator's models, beside moto's EC2 models (see ``backend.capacity_backend``)."""

from .backend import Allocation, CapacityBackend, LaunchRequest, capacity_backend
from .offerings import Catalogue, valid_duration
from .pools import Pool, Quotas
from .reservations import CapacityReservation

__all__ = [
    "Allocation",
    "CapacityBackend",
    "CapacityReservation",
    "Catalogue",
    "LaunchRequest",
    "Pool",
    "Quotas",
    "capacity_backend",
    "valid_duration",
]
