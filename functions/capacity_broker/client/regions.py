"""Which regions a call looks at.

- Discovery (``capacity``, ``offerings``, ``search``, ``az``, ``spot``, ``plan``): the regions
  given, else the client's, else ``BROKER_REGIONS``, else every region enabled for the account
  (as truffle does). ``all`` means every enabled region too.
- The broker's actions run as one function would: in the client's first region (else the
  session's), with the client's regions (else ``BROKER_REGIONS``, else that one region) as
  the function's ``BROKER_REGIONS``.

A name AWS does not have is refused before any call, by name (:class:`UnknownRegions`).
``BROKER_REGIONS`` is read once, when a broker is made (``client.settings``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..adapters.regions import unknown_regions
from .results import UnknownRegions

EVERY_REGION = "all"


def names(value: Sequence[str] | str | None) -> list[str]:
    """``"a,b"`` or ``["a", "b"]`` → ``["a", "b"]`` (blank entries dropped)."""
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(v).strip() for v in items if str(v).strip()]


def region_list(value: Sequence[str] | str | None) -> list[str]:
    """Region names in order, each once."""
    return list(dict.fromkeys(names(value)))


def check(regions: Sequence[str]) -> list[str]:
    """``regions`` unchanged when AWS has each of them (``all`` aside), else
    :class:`UnknownRegions` naming the others, with the nearest real names."""
    unknown = unknown_regions(r for r in regions if r != EVERY_REGION)
    if unknown:
        raise UnknownRegions(list(unknown), unknown)
    return list(regions)
