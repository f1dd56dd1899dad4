"""How EC2 reads a filter value: wildcards, and the backslash that makes them literal.

"You can use wildcards with the filter values. An asterisk (*) matches zero or more characters,
and a question mark (?) matches zero or one character." "Your search can include the literal
values of the wildcard characters; you just need to escape them with a backslash before the
character. For example, a value of ``\\*amazon\\?\\\\`` searches for the literal string
``*amazon?\\``." (EC2 User Guide, "List and filter using the command line",
docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Filtering.html). Nothing else is special:
``[`` and ``]`` are plain characters (moto reads values with ``fnmatch``, where they make a
character class, and ignores an escaped backslash).

Where the page is silent: a backslash before any other character stands for that character,
and a backslash at the very end for itself.

Every filter the emulator answers (moto's, once ``install`` has run, and the emulator's own)
matches through ``compile_value``; the ``filter_escapes`` setting turns the escapes off for a
test that must show the broker safe from a service that ignored them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from ..state import world


@lru_cache(maxsize=4096)
def _compiled(value: str, escapes: bool) -> re.Pattern[str]:
    parts: list[str] = []
    i = 0
    while i < len(value):
        char = value[i]
        if char == "\\" and i + 1 < len(value):
            if escapes:
                parts.append(re.escape(value[i + 1]))
                i += 2
                continue
            # A service that ignores escapes drops the backslash and reads what follows as
            # it would anywhere (the widest misreading: "\*" becomes "*").
            i += 1
            continue
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".?")
        else:
            parts.append(re.escape(char))
        i += 1
    return re.compile("(?s:" + "".join(parts) + r")\Z")


def compile_value(value: str) -> re.Pattern[str]:
    """One filter value as EC2 reads it (anchored at both ends)."""
    return _compiled(str(value), world.settings.filter_escapes)


def to_regex(value: str) -> str:
    """``compile_value`` as a regular expression's text (moto's ``simple_aws_filter_to_re``)."""
    return compile_value(value).pattern


def matches(values: Iterable[str], actual: object) -> bool:
    """Whether ``actual`` matches any of a filter's values."""
    text = str(actual)
    return any(compile_value(v).match(text) for v in values)


# -- moto's matchers, read the same way (``emulator.install`` puts these in its place) ------


def tag_filter_matches(obj: Any, filter_name: str, filter_values: list[str]) -> bool:
    """moto's ``tag_filter_matches`` (instances, security groups, …) with EC2's reading. moto
    also took a value equal to the pattern's text as a match, so ``a\\*`` found a tag
    ``a\\*``; EC2 finds ``a*``."""
    from moto.ec2.utils import get_obj_tag, get_obj_tag_names, get_obj_tag_values

    if filter_name == "tag-key":
        candidates: Iterable[str] = get_obj_tag_names(obj)
    elif filter_name == "tag-value":
        candidates = get_obj_tag_values(obj)
    elif filter_name.startswith("tag:"):
        candidates = get_obj_tag_values(obj, key=filter_name[len("tag:") :])
    else:
        candidates = [get_obj_tag(obj, filter_name) or ""]
    return any(matches(filter_values, c) for c in candidates)


def filter_matching(original: Callable[[Any, str, Any], bool]) -> Callable[[Any, str, Any], bool]:
    """moto's ``is_filter_matching`` (launch templates and most other describes) with EC2's
    reading of a text value; other kinds of value (numbers, dates, lists) as moto reads them."""

    def is_filter_matching(obj: Any, name: str, filter_value: Any) -> bool:
        value = obj.get_filter_value(name)
        if isinstance(value, str) and filter_value is not None:
            wanted = filter_value if isinstance(filter_value, list) else [filter_value]
            return matches([str(v) for v in wanted], value)
        return original(obj, name, filter_value)

    return is_filter_matching
