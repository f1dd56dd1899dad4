"""Instance type names, checked as region names are: a name EC2 does not offer in the region
asked is refused by name, with the nearest names it does offer, never answered as "no
capacity" (contract v3, "Instance types are validated like regions"). The list comes from
EC2 (``adapters.ec2.catalog``); this is the rule every caller applies to it."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Sequence

# How many of the nearest names a refusal suggests, and how near they must be (difflib's
# ratio): ``g6.xlarg`` → ``g6.xlarge`` (0.94), not every ``g6.*``.
SUGGESTIONS = 3
NEAR = 0.8


def unknown_types(
    named: Iterable[tuple[str, str]], offered: Collection[str], where: Sequence[str]
) -> list[tuple[str, str]]:
    """``(field, message)`` for each ``(field, name)`` of ``named`` whose name is not in
    ``offered`` (the types EC2 offers in the regions ``where``), naming the nearest ones."""
    problems = []
    places = where[0] if len(where) == 1 else "any of " + ", ".join(where)
    for field, name in named:
        if name in offered:
            continue
        close = difflib.get_close_matches(name, sorted(offered), n=SUGGESTIONS, cutoff=NEAR)
        hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
        problems.append((field, f"{name!r} is not an instance type EC2 offers in {places}{hint}"))
    return problems
