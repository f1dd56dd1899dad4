"""The broker's EC2 filters: values escaped as EC2 documents, answers compared exactly."""

from __future__ import annotations

import pytest
from capacity_broker.adapters.ec2.filters import Filters, Prefix, escape
from hypothesis import given
from hypothesis import strategies as st


def test_values_are_escaped_as_ec2_documents() -> None:
    # EC2 User Guide: "\*amazon\?\\ searches for the literal string *amazon?\".
    assert escape("*amazon?\\") == "\\*amazon\\?\\\\"
    assert escape("job-1") == "job-1"
    wanted = Filters({"tag:k": ["1*", Prefix("a?")], "state": ["active"]})
    assert wanted.params() == [
        {"Name": "tag:k", "Values": ["1\\*", "a\\?*"]},
        {"Name": "state", "Values": ["active"]},
    ]


@given(st.text(max_size=20), st.text(max_size=20))
def test_what_comes_back_is_compared_exactly(wanted: str, actual: str) -> None:
    exact = Filters({"tag:job": [wanted]})
    assert exact.admit({"job": actual}, {}) is (actual == wanted)
    prefix = Filters({"tag:job": [Prefix(wanted)]})
    assert prefix.admit({"job": actual}, {}) is actual.startswith(wanted)


def test_every_filter_must_match_and_a_missing_tag_never_does() -> None:
    wanted = Filters({"tag:job": ["1"], "state": ["active", "pending"]})
    assert wanted.admit({"job": "1"}, {"state": "pending"})
    assert not wanted.admit({"job": "1"}, {"state": "cancelled"})
    assert not wanted.admit({}, {"state": "active"})


def test_a_filter_that_cannot_be_compared_is_a_mistake() -> None:
    with pytest.raises(ValueError, match="start-date"):
        Filters({"start-date": ["2026-01-01"]}).admit({}, {})
