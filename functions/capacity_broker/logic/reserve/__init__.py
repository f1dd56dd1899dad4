"""reserve (being split into one module per part: see the next commit)."""

from __future__ import annotations

from .launch import Chosen, Reserver, ReserveStats

__all__ = ["Chosen", "ReserveStats", "Reserver"]
