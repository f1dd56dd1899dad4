"""One vocabulary for a create's answer: every view is read from one table."""

from __future__ import annotations

from capacity_broker.domain.errors import ErrorClass, Outcome
from capacity_broker.domain.memory import Seen
from capacity_broker.domain.outcomes import MEANINGS, OUTCOME_METRICS, SEEN, Kind


def test_every_error_class_and_a_hold_have_one_row() -> None:
    assert set(MEANINGS) == {None, *ErrorClass}
    assert MEANINGS[None].outcome is Outcome.AVAILABLE


def test_the_derived_views_are_functions_of_their_key() -> None:
    # A view keyed by a coarser word (a Kind, a Seen) must not depend on which row it came
    # from: two rows with the same kind and different memory words would make SEEN lossy.
    for meaning in MEANINGS.values():
        assert SEEN[meaning.kind] is meaning.seen
        assert OUTCOME_METRICS[meaning.seen] == meaning.metric
    assert set(SEEN) == set(Kind)
    assert set(OUTCOME_METRICS) == set(Seen)
    # Every metric name is one memory word's: no two words counted in the same metric.
    assert len(set(OUTCOME_METRICS.values())) == len(Seen)
