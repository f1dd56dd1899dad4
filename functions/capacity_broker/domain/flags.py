"""Feature flags: SSM parameter names and how their values are read (contract)."""

from __future__ import annotations

from .failures import BrokerFailure

FLAG_ENABLE = "EnableCapacityReservation"
FLAG_STRICT = "EnforceStrictCapacityReservation"
DEFAULT_ENABLE = True
DEFAULT_STRICT = False

FLAGS_PATH = "configuration/FeatureFlags"


class FlagError(BrokerFailure, ValueError):
    """A flag parameter holds something other than true/false: a configuration error."""

    @property
    def error_code(self) -> str:
        return "InvalidConfiguration"

    def __init__(self, name: str, raw: str) -> None:
        self.name = name
        self.raw = raw
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        super().__init__(
            f"SSM parameter {name} must be 'true' or 'false' (any case), not {shown!r}"
        )


def flags_folder(prefix: str) -> str:
    """``<prefix>/configuration/FeatureFlags`` (for one GetParametersByPath of every flag).

    SSM requires hierarchical names to start with "/", so a prefix given without one gets it;
    surrounding "/" are dropped so the path never holds "//".
    """
    stem = prefix.strip().strip("/")
    return f"/{stem}/{FLAGS_PATH}" if stem else f"/{FLAGS_PATH}"


def flag_path(prefix: str, name: str) -> str:
    """``<prefix>/configuration/FeatureFlags/<name>``; an empty name gives the folder plus
    a trailing "/"."""
    if "/" in name:
        raise ValueError(f"flag name must be a single path segment, got {name!r}")
    return f"{flags_folder(prefix)}/{name}"


def parse_flag(name: str, raw: str | None, default: bool) -> bool:
    """A flag's value: "true"/"false" in any case, surrounding blanks ignored.

    ``None`` (parameter missing) gives ``default``; anything else raises :class:`FlagError`
    naming ``name``, so pass the parameter's full path as ``name``.
    """
    if raw is None:
        return default
    # ASCII only: casefold() would read "fal\u017fe" (with a long s) as "false".
    value = raw.strip().lower() if raw.isascii() else ""
    if value == "true":
        return True
    if value == "false":
        return False
    raise FlagError(name, raw)
