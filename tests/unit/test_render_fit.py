"""The CLI's table layout rule (``capacity_broker.cli.render.fit``), without a terminal."""

from __future__ import annotations

import io

from capacity_broker.cli.render import Col, fit, print_table
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

ID = "cr-0123456789abcdef0"
COLS = [
    Col("Instance Type"),
    Col("Region", priority=3),
    Col("AZ"),
    Col("End", wrap=True),
    Col("Owned", priority=5),
    Col("Match", priority=4),
    Col("Reservation", ident=True),
]
ROW = ["p6-b200.48xlarge", "us-east-1", "us-east-1a", "2026-11-23 20:51", "yes", "open", ID]


def test_everything_when_it_fits() -> None:
    layout = fit(COLS, [ROW], 200)
    assert layout.hidden == []
    assert layout.gap == 2


def test_the_highest_priority_number_goes_first() -> None:
    every = fit(COLS, [ROW], 200)
    one_gap = every.width - (len(every.widths) - 1)
    assert fit(COLS, [ROW], one_gap - 1).hidden == ["Owned"]
    keys = sum(len(c) for c in (ROW[0], ROW[2], ROW[3], ROW[6])) + 3
    assert fit(COLS, [ROW], keys).hidden == ["Region", "Owned", "Match"]
    assert fit(COLS, [ROW], keys + 1 + len("us-east-1")).hidden == ["Owned", "Match"]


def test_one_space_before_a_column_goes() -> None:
    two = fit(COLS, [ROW], 200)
    one_gap_width = two.width - (len(two.widths) - 1)
    layout = fit(COLS, [ROW], one_gap_width)
    assert (layout.gap, layout.hidden) == (1, [])


def test_key_columns_wrap_rather_than_go_and_ids_stay_whole() -> None:
    layout = fit(COLS, [ROW], 60)
    assert layout.hidden == ["Region", "Owned", "Match"]
    widths = dict(zip([COLS[i].header for i in layout.shown], layout.widths, strict=True))
    assert len("2026-11-23") <= widths["End"] < len("2026-11-23 20:51")  # time below date
    assert fit(COLS, [ROW], 59).widths[2] == len("2026-11-23")  # the narrowest it wraps to
    assert widths["Reservation"] == len(ID)
    assert layout.width <= 60


def test_an_empty_droppable_column_is_left_out_silently() -> None:
    row = [*ROW[:4], "", *ROW[5:]]
    layout = fit(COLS, [row], 200)
    assert "Owned" not in [COLS[i].header for i in layout.shown]
    assert layout.hidden == []


def test_printed_tables_never_exceed_the_console() -> None:
    for width in (40, 60, 80, 100, 120):
        out = io.StringIO()
        console = Console(file=out, width=width, highlight=False)
        print_table(console, COLS, [ROW, ROW], "Reservations")
        lines = out.getvalue().splitlines()
        assert max(len(line) for line in lines) <= width
        assert "…" not in out.getvalue()
        if width >= 60:
            assert sum(ID in line for line in lines) == 2


texts = st.text(alphabet="abcdefghij0123456789-. ", min_size=0, max_size=24)


@settings(max_examples=150, deadline=None)
@given(
    priorities=st.lists(st.integers(min_value=0, max_value=4), min_size=1, max_size=8),
    data=st.data(),
    width=st.integers(min_value=10, max_value=160),
)
def test_the_layout_fits_and_keeps_every_key_column(
    priorities: list[int], data: st.DataObject, width: int
) -> None:
    cols = [Col(f"c{i}", priority=p, wrap=i % 2 == 0) for i, p in enumerate(priorities)]
    rows = data.draw(st.lists(st.lists(texts, min_size=len(cols), max_size=len(cols)), max_size=5))
    layout = fit(cols, rows, width)
    keys = {i for i, c in enumerate(cols) if c.priority == 0}
    assert keys <= set(layout.shown)
    assert len(layout.widths) == len(layout.shown)
    assert all(w >= 1 for w in layout.widths)
    # fits whenever the key columns can fit at all (a character each, a space between)
    if len(keys) * 2 - 1 <= width:
        assert layout.width <= width, (layout, width)
