"""Reserved tag keys read as a person reads them: a ``capacity‐broker:`` key (U+2010 HYPHEN) or
one with a Cyrillic ``а`` is the broker's prefix to a reader, and refused like it."""

from __future__ import annotations

import json
import unicodedata
from importlib import resources

import pytest
from capacity_broker.domain.tags import is_reserved_key
from capacity_broker.models import ReserveRequest
from pydantic import ValidationError

RESERVED_PREFIXES = ("aws:", "capacity-broker:")
PROTOTYPES = sorted({c for prefix in RESERVED_PREFIXES for c in prefix})


def library_lookalikes() -> dict[str, set[str]]:
    """Every single character Unicode's confusables (as confusable-homoglyphs ships them)
    says looks like each character of the prefixes, in either case."""
    data = json.loads(
        resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8")
    )
    found: dict[str, set[str]] = {p: set() for p in PROTOTYPES}
    for prototype in PROTOTYPES:
        for variant in {prototype, prototype.upper()}:
            for entry in data.get(variant, []):
                glyph = "".join(c for c in entry["c"] if unicodedata.category(c) != "Cf")
                if len(glyph) == 1 and not glyph.isascii():
                    found[prototype].add(glyph)
    return found


def test_the_broker_keeps_the_librarys_lookalikes() -> None:
    """The copy in domain/lookalikes.py is what the library says, for the characters that
    NFKC and case folding do not already bring back to the prefix's own (with their folded
    form when that is one character)."""
    from capacity_broker.domain.lookalikes import LOOKALIKES

    expected = {}
    for prototype, glyphs in library_lookalikes().items():
        kept = set()
        for glyph in glyphs:
            folded = unicodedata.normalize("NFKC", glyph).casefold()
            if folded == prototype:
                continue
            kept.add(glyph)
            if len(folded) == 1 and not folded.isascii():
                kept.add(folded)
        expected[prototype] = "".join(sorted(kept))
    assert expected == LOOKALIKES


@pytest.mark.parametrize("prefix", RESERVED_PREFIXES)
def test_every_lookalike_of_every_prefix_character_is_reserved(prefix: str) -> None:
    lookalikes = library_lookalikes()
    for position, prototype in enumerate(prefix):
        for glyph in sorted(lookalikes[prototype]):
            key = prefix[:position] + glyph + prefix[position + 1 :] + "purpose"
            assert is_reserved_key(key), (prefix, position, f"U+{ord(glyph):04X}")


@pytest.mark.parametrize(
    "key",
    [
        "capacity\u2010broker:purpose",  # the issue's: U+2010 HYPHEN
        "capacity\u2011broker:cluster-id",  # NON-BREAKING HYPHEN
        "capacity\u2212broker:job-id",  # MINUS SIGN
        "capacity-broker\uff1apurpose",  # FULLWIDTH COLON
        "capacity-broker\u2236purpose",  # RATIO
        "c\u0430pacity-broker:purpose",  # CYRILLIC SMALL LETTER A
        "\uff43\uff41\uff50\uff41\uff43\uff49\uff54\uff59-broker:x",  # fullwidth letters
        "capacity-\u200bbroker:purpose",  # ZERO WIDTH SPACE inside
        "\u00adcapacity-broker:purpose",  # SOFT HYPHEN in front
        "Capacity-Broker:Purpose",
        "\u0430ws:createdBy",
        "AWS\u2236x",
    ],
)
def test_keys_that_read_as_a_reserved_prefix_are_reserved(key: str) -> None:
    assert is_reserved_key(key)
    with pytest.raises(ValidationError, match="capacity-broker"):
        ReserveRequest.model_validate(
            {
                "job_id": "1",
                "instance_types": ["c5.large"],
                "subnet_ids": ["subnet-0aaaaaaaaaaaaaaa1"],
                "instance_count": 1,
                "tags": {key: "hold"},
            }
        )


@pytest.mark.parametrize(
    "key",
    [
        "team",
        "Name",
        "awsome:x",
        "aws",
        "capacity-brokers",
        "capacity-broker",
        "経理部:予算",
        "部:x",
    ],
)
def test_other_keys_are_the_callers(key: str) -> None:
    assert not is_reserved_key(key)
