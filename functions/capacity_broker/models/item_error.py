"""One thing that failed inside an otherwise answered request: the ``errors`` items of the
answers of release, the cleaner and the listings (and the client's look-ups).

A module of its own apart from ``common``: probe's and reserve's answers carry none, so their
handlers never build it.
"""

from __future__ import annotations

from .common import ResponseModel


class ItemError(ResponseModel):
    """One thing that failed inside an otherwise answered request (a cancel, a region)."""

    id: str | None = None
    region: str | None = None
    error_code: str | None = None
    message: str
