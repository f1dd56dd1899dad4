"""EC2 filters built from values: an id is matched exactly, never read as a pattern.

EC2 reads every filter value as a pattern: ``*`` matches zero or more characters, ``?`` zero or
one, and "your search can include the literal values of the wildcard characters; you just need
to escape them with a backslash before the character. For example, a value of ``\\*amazon\\?\\\\``
searches for the literal string ``*amazon?\\``" (EC2 User Guide, "List and filter using the
command line": docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Filtering.html). A job id
``*`` sent as it is would list every job's holds.

So every value the broker sends is escaped, unless the caller asks for a ``Prefix``, and what
comes back is compared with the values again (``Filters.admit``): EC2, or a stand-in that read
the escapes otherwise, may answer more than was asked; the broker never acts on more.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# What EC2 reads as special in a filter value: the two wildcards and the escape itself.
_SPECIAL = re.compile(r"([\\*?])")


def escape(value: str) -> str:
    """``value`` as a filter value that matches exactly ``value``."""
    return _SPECIAL.sub(r"\\\1", value)


@dataclass(frozen=True)
class Prefix:
    """The values that start with ``text`` (sent as ``<text escaped>*``)."""

    text: str


Wanted = str | Prefix


def _sent(value: Wanted) -> str:
    return escape(value.text) + "*" if isinstance(value, Prefix) else escape(value)


def _matches(actual: str, value: Wanted) -> bool:
    return actual.startswith(value.text) if isinstance(value, Prefix) else actual == value


class Filters:
    """One describe call's filters: ``{name: values}``, the values of a name ORed, the names
    ANDed, as EC2 combines them."""

    def __init__(self, spec: Mapping[str, Iterable[Wanted]] | None = None) -> None:
        self.spec: dict[str, tuple[Wanted, ...]] = {
            name: tuple(values) for name, values in (spec or {}).items()
        }

    def __bool__(self) -> bool:
        return bool(self.spec)

    def params(self) -> list[dict[str, Any]]:
        """The ``Filters`` parameter, every value escaped."""
        return [
            {"Name": name, "Values": [_sent(v) for v in values]}
            for name, values in self.spec.items()
        ]

    def admit(self, tags: Mapping[str, str], fields: Mapping[str, str | None]) -> bool:
        """Whether an item EC2 answered really matches: its tags (``tag:<key>`` filters) and
        its ``fields`` (the other filter names, as the item shows them) compared exactly.
        A filter whose value the caller cannot read back is a mistake, not EC2's word."""
        for name, values in self.spec.items():
            if name.startswith("tag:"):
                actual = tags.get(name[len("tag:") :])
            elif name in fields:
                actual = fields[name]
            else:
                raise ValueError(f"filter {name!r} cannot be compared with what EC2 answered")
            if actual is None or not any(_matches(actual, v) for v in values):
                return False
        return True
