"""``plan`` (contract v3): can this run happen in this window, and how?

The decision guide (``domain.discovery.recommend``) says Capacity Blocks or ODCRs; then what
exists decides the verdict, in this order:

1. ``ready``: a held block (or ODCR, or future-dated ODCR that is ``scheduled``) has the
   instances and the run's hours inside the window. Hours are counted to when EC2 stops the
   block's instances (``domain.blocks.usable_until``), never to its end date.
2. ``extend``: a held block has the instances but runs out before the run ends; EC2 offers
   the extension that makes it last (DescribeCapacityBlockExtensionOfferings).
3. ``buy``: an offering holds the count for a block long enough (the run plus EC2's stop,
   in the lengths EC2 sells), across the instance-type preferences in one call
   (``InstanceTypePreferences``); the first type in preference order that has one, cheapest.
4. ``split``: no single block holds the count (or more than 64): the largest offerings (found
   by asking for the block sizes below the count, ``domain.discovery.BLOCK_SIZES``, halving
   the list) and held blocks, combined over the same
   hours in one Region and type (``domain.blocks.split``), with what splitting costs.
5. ``unavailable``: nothing does; the largest offering is said.

A verdict that asks the user to act (``buy``, ``extend``, a ``split`` with offerings in it)
carries in ``commands`` the CLI commands that do it, with the count, days and Region the
offering was found with: ``offerings --purchase`` looks the offering up again with them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ...adapters.aws import AwsError
from ...domain import blocks as block_rules
from ...domain import discovery as rules
from ...domain.clock import utc
from ...domain.errors import ErrorClass
from ...models.capacity import CapacityRequest, CapacityRow
from ...models.discovery import BlockOffering, ExtensionOffer, PlanAnswer, Split, SplitPiece
from ...models.item_error import ItemError
from .. import InvalidInput
from ..capacity import Progress, fan_out, status_of
from .blocks import BlockOfferings, offering_of
from .extend import BlockExtensions

MAX_TYPES = 10
# Blocks whose extension EC2 is asked about, at most (each is one call in its Region).
MAX_EXTENSION_LOOKUPS = 3
SHOWN = 5
# Told before each question to EC2 about offerings ("16 x p5.48xlarge for 192 h in
# us-east-1"): a search can take a while at the Capacity Block bucket's 0.15 calls a second,
# and the CLI shows what it is waiting on.
Asking = Callable[[str], None]


def preference_list(instance_type: str | Sequence[str]) -> list[str]:
    """``p5.48xlarge,p5e.48xlarge`` (or a list): the types in preference order, once each."""
    names = [instance_type] if isinstance(instance_type, str) else list(instance_type)
    parts = [p.strip().lower() for name in names for p in str(name).split(",")]
    return list(dict.fromkeys(p for p in parts if p))


class Planning(BlockExtensions, BlockOfferings):
    """The reservation-type plan."""

    def plan(
        self,
        workload: str,
        instance_type: str | Sequence[str],
        instance_count: int,
        days: float | None = None,
        regions: Sequence[str] | None = None,
        start_after: datetime | None = None,
        end_before: datetime | None = None,
        progress: Progress | None = None,
        asking: Asking | None = None,
    ) -> PlanAnswer:
        """Whether ``instance_count`` x ``instance_type`` (a preference list) for ``days``
        can run between ``start_after`` and ``end_before``, and on what (see the module)."""
        types = preference_list(instance_type)
        now = self.clock()
        window = self._check(workload, types, instance_count, days, start_after, end_before, now)
        wanted = self._regions(regions)
        self.check_types([("instance_type", name) for name in types], wanted)
        errors: list[ItemError] = []
        accelerated = self._accelerated(types[0], wanted[0], errors)
        run = timedelta(days=days) if days is not None else None
        needed = (
            block_rules.block_hours_for_run(run.total_seconds() / 3600, types[0])
            if run is not None
            else None
        )
        choice = rules.recommend(workload, instance_count, days, accelerated, needed)
        listing = self.lister.rows(
            CapacityRequest(reservation_type="all", instance_types=types, regions=wanted),
            progress=progress,
        )
        errors.extend(listing.errors)
        blocks = [r for r in listing.items if r.is_capacity_block]
        odcrs = [r for r in listing.items if not r.is_capacity_block]
        covering_blocks = _covering(_held(blocks), instance_count, run, window)
        covering_odcrs = _covering(_held(odcrs), instance_count, run, window)
        base: dict[str, Any] = {
            "workload": rules.Workload(workload).value,
            "instance_type": types[0],
            "instance_types": types,
            "instance_count": instance_count,
            "days": days,
            "run_hours": run.total_seconds() / 3600 if run is not None else None,
            "start_after": start_after,
            "end_before": end_before,
            "recommendation": choice.reservation_type.value,
            "reasons": list(choice.reasons),
            "block_duration_hours": choice.block_hours,
            "capacity_blocks": _rows_of(covering_blocks),
            "odcrs": _rows_of(covering_odcrs),
            "errors": errors,
        }
        notes = list(choice.notes) + _waiting_notes(odcrs, instance_count)
        blocks_first = choice.reservation_type is rules.ReservationKind.CAPACITY_BLOCK
        if blocks_first and covering_blocks:
            unit, start = covering_blocks[0]
            return PlanAnswer(
                status="ready",
                run_start=start,
                notes=notes,
                message=f"Capacity Block {unit.name} covers it: {unit.what}, the run from "
                f"{_at(start)} to {_at(start + _run(run))}, before EC2 stops the block's "
                f"instances at {_at(unit.usable_end)}.",
                **base,
            )
        if covering_odcrs:
            row, start = covering_odcrs[0][0].rows[0], covering_odcrs[0][1]
            networking = " (standard networking, not UltraCluster)" if blocks_first else ""
            when = "" if row.state == "active" else f" from {_at(row.start_date)} ({row.state})"
            return PlanAnswer(
                status="ready",
                run_start=start,
                notes=notes,
                message=f"ODCR {row.reservation_id} has {_free(row)} of {row.total_capacity} "
                f"free in {row.availability_zone}{when}{networking}.",
                **base,
            )
        if not blocks_first or run is None or choice.block_hours is None:
            status = "error" if status_of(wanted, errors) == "error" else "unavailable"
            ahead = (
                "; or request one ahead (capacity-broker reserve-ahead) 5 to 120 days before "
                "you need it"
            )
            return PlanAnswer(
                status=status,
                notes=notes,
                message=f"No ODCR has {instance_count} x {types[0]} free: create one "
                f"(On-Demand Capacity Reservation){ahead}.",
                **base,
            )
        extension = self._extension(blocks, instance_count, run, window, now, notes, errors)
        if extension is not None:
            unit, grow = extension
            start = max(window.start, unit.start or window.start)
            how = (
                f"extending it by {grow.duration_hours} h (offering {grow.offering_id}, "
                f"{_money(grow.upfront_fee, grow.currency)})"
                if len(unit.rows) == 1
                else f"extending each of its segments by {grow.duration_hours} h "
                f"({_money(grow.upfront_fee, grow.currency)} in all; capacity-broker extend "
                "extends them together)"
            )
            return PlanAnswer(
                status="extend",
                run_start=start,
                extension=grow,
                notes=notes,
                commands=[extend_command(grow)],
                message=f"Capacity Block {unit.name} holds {unit.what} but EC2 stops it at "
                f"{_at(unit.usable_end)}, before the run ends ({_at(start + run)}): {how} "
                f"makes it end {_at(grow.end_date)}.",
                **base,
            )
        search = _Search(types, choice.block_hours, run, window, start_after, end_before, asking)
        offers = self._fitting(search, instance_count, wanted, errors)
        if offers:
            offer = offers[0]
            return PlanAnswer(
                status="buy",
                run_start=offer.start_date,
                offerings=offers[:SHOWN],
                commands=[purchase_command(offer, search.hours)],
                notes=notes,
                message=f"Nothing held covers it; buy offering {offer.offering_id}: "
                f"{offer.instance_count} x {offer.instance_type} in {offer.availability_zone} "
                f"({offer.region}) from {_at(offer.start_date)} for {offer.duration_text}, "
                f"{_money(offer.upfront_fee, offer.currency)} up front"
                + (
                    f" ({offer.price_per_instance_hour:g} per instance-hour)"
                    if offer.price_per_instance_hour is not None
                    else ""
                )
                + ".",
                **base,
            )
        largest = self._largest(search, instance_count, wanted, errors)
        plan = block_rules.split(_pieces(blocks, largest, window), instance_count, run, window)
        biggest = _biggest(largest)
        said = _largest_text(biggest, types)
        if plan is not None:
            return PlanAnswer(
                status="split",
                run_start=plan.run_start,
                largest_offerings=biggest[:SHOWN],
                split=_split_model(plan, largest, blocks),
                commands=[
                    purchase_command(o, search.hours)
                    for p in plan.pieces
                    if not p.held
                    for o in largest
                    if o.offering_id == p.ref
                ],
                notes=notes,
                message=f"No single Capacity Block holds {instance_count} x {types[0]}"
                f"{said}. Split: {_pieces_text(plan, blocks)} from {_at(plan.run_start)}"
                + (f", {_money(plan.fee, _currency(largest))} up front" if plan.fee else "")
                + ". "
                + _split_costs_text(plan, blocks)
                + ".",
                **base,
            )
        status = "error" if status_of(wanted, errors) == "error" else "unavailable"
        return PlanAnswer(
            status=status,
            largest_offerings=biggest[:SHOWN],
            notes=notes,
            message=f"Nothing held or on sale covers {instance_count} x {types[0]} for "
            f"{days:g} days in {_window_text(window)}"
            f"{said or ' (no Capacity Block of that length is on sale)'}.",
            **base,
        )

    # -- checks -------------------------------------------------------------------------

    def _check(
        self,
        workload: str,
        types: list[str],
        instance_count: int,
        days: float | None,
        start_after: datetime | None,
        end_before: datetime | None,
        now: datetime,
    ) -> block_rules.Window:
        problems: list[tuple[str, str]] = []
        try:
            rules.Workload(workload)
        except ValueError:
            problems.append(
                ("workload", "must be one of " + ", ".join(w.value for w in rules.Workload))
            )
        if not types:
            problems.append(("instance_type", "is required"))
        elif len(types) > MAX_TYPES:
            problems.append(("instance_type", f"at most {MAX_TYPES} types in preference order"))
        for name in types:
            if rules.has_wildcard(name) or "." not in name:
                problems.append(
                    ("instance_type", f"{name!r} must be an instance type, not a pattern")
                )
        if instance_count < 1:
            problems.append(("instance_count", "must be at least 1"))
        if days is not None and days <= 0:
            problems.append(("days", "must be more than 0"))
        for name, value in (("start_after", start_after), ("end_before", end_before)):
            if value is not None and (value.tzinfo is None or value.utcoffset() is None):
                problems.append((name, "must be timezone-aware (UTC)"))
        if problems:
            raise InvalidInput(problems)
        start = max(now, start_after) if start_after is not None else now
        if end_before is not None and end_before <= start:
            raise InvalidInput([("end_before", "must be later than start_after and than now")])
        if (
            end_before is not None
            and days is not None
            and end_before - start < timedelta(days=days)
        ):
            raise InvalidInput([("end_before", f"the window is shorter than the {days:g}-day run")])
        return block_rules.Window(start, end_before)

    def _accelerated(self, instance_type: str, region: str, errors: list[ItemError]) -> bool | None:
        try:
            known = self.lister.accelerators.of(self.ec2(region), [instance_type]).get(
                instance_type
            )
        except AwsError as error:
            if error.code == "InvalidInstanceType":
                raise InvalidInput(
                    [("instance_type", f"EC2 knows no instance type {instance_type}")]
                ) from None
            errors.append(
                ItemError(region=region, error_code=error.code, message=error.message[:300])
            )
            return None
        return known.accelerated if known is not None else None

    # -- what EC2 offers ----------------------------------------------------------------

    def _extension(
        self,
        blocks: list[CapacityRow],
        count: int,
        run: timedelta,
        window: block_rules.Window,
        now: datetime,
        notes: list[str],
        errors: list[ItemError],
    ) -> tuple[_Held, ExtensionOffer] | None:
        """The cheapest extension that makes a held block with the instances last the run: a
        block of several segments is extended as one (each segment by the same hours, as
        ``extend`` does), its offer the segments' together."""
        found: list[tuple[_Held, ExtensionOffer]] = []
        asked = 0
        for unit in _held(blocks):
            rows = unit.rows
            if (
                unit.free < count
                or any(r.end_date is None or r.state not in _USABLE for r in rows)
                or unit.usable_end is None
            ):
                continue
            start = max(window.start, unit.start or window.start)
            if window.end is not None and start + run > window.end:
                continue
            row = min(rows, key=lambda r: _usable_end(r) or now)
            assert row.end_date is not None
            hours = block_rules.extension_hours_needed(row.end_date, row.instance_type, start + run)
            if not hours:
                continue
            if len({r.end_date for r in rows}) > 1:
                notes.append(
                    f"Capacity Block {unit.name} would cover it extended, but its segments end "
                    "at different times: extend each (capacity-broker extend) to the run's end"
                )
                continue
            refusal = next(
                (
                    why
                    for r in rows
                    if (
                        why := block_rules.extension_refusal(
                            r.state, r.end_date, hours, now, start_date=r.start_date
                        )
                    )
                    is not None
                ),
                None,
            )
            if refusal is not None:
                notes.append(f"{unit.name} would cover it extended by {hours} h, but {refusal}")
                continue
            if asked + len(rows) > MAX_EXTENSION_LOOKUPS:
                break
            asked += len(rows)
            offers = [self._extension_offer(r, hours, notes, errors) for r in rows]
            if any(o is None for o in offers):
                continue
            got = [o for o in offers if o is not None]
            fees = [o.upfront_fee for o in got]
            found.append(
                (
                    unit,
                    got[0].model_copy(
                        update={
                            "instance_count": sum(o.instance_count for o in got),
                            "upfront_fee": None
                            if None in fees
                            else round(sum(f or 0.0 for f in fees), 2),
                        }
                    ),
                )
            )
        if not found:
            return None
        return min(found, key=lambda f: (f[1].upfront_fee is None, f[1].upfront_fee or 0.0))

    def _extension_offer(
        self, row: CapacityRow, hours: int, notes: list[str], errors: list[ItemError]
    ) -> ExtensionOffer | None:
        """EC2's cheapest extension of ``hours`` for the one reservation ``row``, or None (said
        in ``notes``, or in ``errors`` when the Region could not answer)."""
        try:
            offers = self.extension_offers(row.region, row.reservation_id, hours)
        except AwsError as error:
            if error.error_class in (ErrorClass.INCORRECT_STATE, ErrorClass.INVALID):
                # EC2 answered: this block cannot be extended now (an extension still
                # payment-pending, say). An answer about the block, not a failed region.
                notes.append(
                    f"{row.reservation_id} would cover it extended by {hours} h, but EC2 "
                    f"would not extend it: {error.message}"[:300]
                )
                return None
            errors.append(
                ItemError(
                    region=row.region,
                    id=row.reservation_id,
                    error_code=error.code or "RequestFailed",
                    message=f"{error.operation}: {error.message}"[:300],
                )
            )
            return None
        if not offers:
            notes.append(
                f"{row.reservation_id} would cover it extended by {hours} h, but EC2 offers "
                "no such extension now"
            )
            return None
        return offers[0]

    def _fitting(
        self, search: _Search, count: int, regions: Sequence[str], errors: list[ItemError]
    ) -> list[BlockOffering]:
        """Offerings of ``count`` that fit the run, the first preferred type first, then the
        cheapest."""
        if count > rules.MAX_BLOCK_INSTANCES:
            return []
        found, failed = fan_out(
            regions, lambda region: self._offers(region, search, count), self.max_workers
        )
        errors.extend(failed)
        offers = [o for region in regions for o in found.get(region, [])]
        return sorted(
            offers,
            key=lambda o: (search.types.index(o.instance_type), _offer_order(o)),
        )

    def _largest(
        self, search: _Search, count: int, regions: Sequence[str], errors: list[ItemError]
    ) -> list[BlockOffering]:
        """Per Region, the offerings of the largest block size below ``count`` that fit, and
        of the rest that size leaves, for a split. EC2 answers for an exact count only, so the
        sizes it sells (``rules.BLOCK_SIZES``) are asked, halving the list: a size on sale
        means the smaller ones are too (the same supply holds them), so three questions at
        most where halving 1..63 took six."""
        sizes = [n for n in rules.BLOCK_SIZES if n < count]

        def one(region: str) -> list[BlockOffering]:
            # Each size's answer, kept: the rest may be a size already asked (48: 32 + 16).
            answers: dict[int, list[BlockOffering]] = {}

            def ask(size: int) -> list[BlockOffering]:
                if size not in answers:
                    answers[size] = self._offers(region, search, size)
                return answers[size]

            # Indexes into ``sizes``: ``low`` on sale (-1: none yet), ``high`` not.
            low, high = -1, len(sizes)
            while high - low > 1:
                middle = (low + high) // 2
                if ask(sizes[middle]):
                    low = middle
                else:
                    high = middle
            if low < 0:
                return []
            best = answers[sizes[low]]
            rest = count % sizes[low]
            return best + (ask(rest) if rest else [])

        found, failed = fan_out(regions, one, self.max_workers)
        errors.extend(e for e in failed if e not in errors)
        return [o for region in regions for o in found.get(region, [])]

    def _offers(self, region: str, search: _Search, count: int) -> list[BlockOffering]:
        if search.asking is not None:
            search.asking(f"{count} x {search.types[0]} for {search.hours} h in {region}")
        items = self.ec2(region).block_offerings(
            search.types, count, search.hours, search.start_after, search.end_before
        )
        offers = [offering_of(region, item) for item in items]
        return [o for o in offers if o.instance_type in search.types and search.fits(o)]


class _Search:
    """One offerings search: the types, the block length, the run and its window."""

    def __init__(
        self,
        types: list[str],
        hours: int,
        run: timedelta,
        window: block_rules.Window,
        start_after: datetime | None,
        end_before: datetime | None,
        asking: Asking | None = None,
    ) -> None:
        self.types = types
        self.asking = asking
        self.hours = hours
        self.run = run
        self.window = window
        # EC2's StartDateRange/EndDateRange: what the caller asked, nothing earlier than now.
        self.start_after = window.start if start_after is not None else None
        self.end_before = end_before

    def fits(self, offer: BlockOffering) -> bool:
        if offer.start_date is None or offer.end_date is None:
            return False
        usable = block_rules.usable_until(offer.end_date, offer.instance_type)
        return block_rules.run_start(offer.start_date, usable, self.run, self.window) is not None


# -- the commands a verdict asks the user to run ----------------------------------------------


def purchase_command(offer: BlockOffering, hours: int) -> str:
    """The ``offerings --purchase`` that buys ``offer``: it finds the offering again only with
    the terms it was offered for (its type and count, the block length asked, which for a
    same-day block is not its own length, and its Region)."""
    return (
        f"capacity-broker offerings --instance-type {offer.instance_type} "
        f"--count {offer.instance_count} --days {hours // 24} --regions {offer.region} "
        f"--purchase {offer.offering_id} --yes"
    )


def extend_command(offer: ExtensionOffer) -> str:
    """The ``extend`` that buys ``offer`` (EC2 sells extensions in whole days)."""
    return (
        f"capacity-broker extend --reservation-id {offer.reservation_id} "
        f"--days {offer.duration_hours // 24} --regions {offer.region} --yes"
    )


# -- helpers --------------------------------------------------------------------------------


def _free(row: CapacityRow) -> int:
    """Instances a run can have: a running reservation's free ones, a future one's size."""
    return row.available_capacity if row.state == "active" else row.total_capacity


def _usable_end(row: CapacityRow) -> datetime | None:
    if row.end_date is None:
        return None
    if row.is_capacity_block:
        return block_rules.usable_until(row.end_date, row.instance_type)
    return row.end_date


@dataclass(frozen=True)
class _Held:
    """What a run can use of what is held: one reservation, or every segment of one Capacity
    Block purchase together. Since botocore 1.44.5 a purchase may be answered as several
    reservations ("When a Capacity Block offering contains multiple segments, a separate
    Capacity Reservation is created for each segment"), one ``CapacityBlockId``, "each with
    its own Availability Zone, instance type, schedule, and pricing": together they hold
    their instances over the hours every segment is usable."""

    rows: tuple[CapacityRow, ...]

    @property
    def first(self) -> CapacityRow:
        return self.rows[0]

    @property
    def is_block(self) -> bool:
        return self.first.is_capacity_block

    @property
    def free(self) -> int:
        return sum(_free(r) for r in self.rows)

    @property
    def start(self) -> datetime | None:
        """When the last segment starts (None: every one is running)."""
        starts = [utc(r.start_date) for r in self.rows if r.state != "active" and r.start_date]
        return max(starts) if starts else None

    @property
    def usable_end(self) -> datetime | None:
        """When EC2 stops the first segment's instances: the segments hold the run together
        only until then."""
        ends = [e for r in self.rows if (e := _usable_end(r)) is not None]
        return min(ends) if ends else None

    @property
    def name(self) -> str:
        if len(self.rows) == 1:
            return self.first.reservation_id
        ids = ", ".join(r.reservation_id for r in self.rows)
        return f"{self.first.capacity_block_id} ({len(self.rows)} segments: {ids})"

    @property
    def what(self) -> str:
        """The instances, per segment where the segments differ (zone, type, dates)."""
        if len(self.rows) == 1:
            row = self.first
            return f"{_free(row)} x {row.instance_type} in {row.availability_zone}"
        same = len({(r.instance_type, r.availability_zone, r.start_date, r.end_date)
                    for r in self.rows}) == 1  # fmt: skip
        if same:
            row = self.first
            return (
                f"{self.free} x {row.instance_type} in {row.availability_zone} "
                f"({' + '.join(str(_free(r)) for r in self.rows)})"
            )
        return " + ".join(
            f"{_free(r)} x {r.instance_type} in {r.availability_zone} "
            f"({r.reservation_id}, {_at(r.start_date)} to {_at(r.end_date)})"
            for r in self.rows
        )


def _held(rows: list[CapacityRow]) -> list[_Held]:
    """Each reservation on its own, and each Capacity Block of several segments as one."""
    units = [_Held((row,)) for row in rows]
    segments: dict[tuple[str, str], list[CapacityRow]] = {}
    for row in rows:
        if row.is_capacity_block and row.capacity_block_id and row.state in _USABLE:
            segments.setdefault((row.region, row.capacity_block_id), []).append(row)
    units.extend(_Held(tuple(group)) for group in segments.values() if len(group) > 1)
    return units


def _rows_of(covering: list[tuple[_Held, datetime]]) -> list[CapacityRow]:
    return list({r.reservation_id: r for unit, _ in covering for r in unit.rows}.values())


_USABLE = ("active", "scheduled")


def _covering(
    units: list[_Held], count: int, run: timedelta | None, window: block_rules.Window
) -> list[tuple[_Held, datetime]]:
    """What holds ``count`` instances for the whole run inside the window, with when the run
    can start on each; earliest first (a single reservation before a block's segments
    together). Without a run (continuous use) an active ODCR with the instances free covers it
    from now, a scheduled one from its start."""
    found: list[tuple[_Held, datetime]] = []
    for unit in units:
        if any(r.state not in _USABLE for r in unit.rows) or unit.free < count:
            continue
        if run is None:
            if unit.is_block:
                continue
            begin = block_rules.run_start(unit.start, None, timedelta(0), window)
        else:
            begin = block_rules.run_start(unit.start, unit.usable_end, run, window)
        if begin is not None:
            found.append((unit, begin))
    return sorted(
        found,
        key=lambda f: (f[1], len(f[0].rows), f[0].first.region, f[0].first.reservation_id),
    )


def _waiting_notes(odcrs: list[CapacityRow], count: int) -> list[str]:
    """Future-dated ODCRs EC2 has not confirmed: said, never counted."""
    return [
        f"ODCR {row.reservation_id} ({row.total_capacity} x {row.instance_type} from "
        f"{_at(row.start_date)}) is {row.state}: not counted until EC2 schedules and delivers it"
        for row in odcrs
        if row.state in ("assessing", "delayed") and row.total_capacity >= count
    ]


def _pieces(
    blocks: list[CapacityRow],
    offers: list[BlockOffering],
    window: block_rules.Window,
) -> list[block_rules.Piece]:
    pieces = [
        block_rules.Piece(
            key=("held", row.reservation_id),
            ref=row.reservation_id,
            held=True,
            region=row.region,
            instance_type=row.instance_type,
            count=_free(row),
            start=row.start_date if row.state != "active" else None,
            usable_end=_usable_end(row),
        )
        for row in blocks
        if row.state in ("active", "scheduled") and _free(row) > 0
    ]
    pieces.extend(
        block_rules.Piece(
            key=("offering", o.region, o.availability_zone or "", o.instance_type),
            ref=o.offering_id,
            held=False,
            region=o.region,
            instance_type=o.instance_type,
            count=o.instance_count,
            start=o.start_date,
            usable_end=block_rules.usable_until(o.end_date, o.instance_type)
            if o.end_date is not None
            else None,
            fee=o.upfront_fee or 0.0,
        )
        # Every offering asked for fits the run (``_Search.fits``): a same-day one too, whose
        # length is a few hours off the length asked ("All Capacity Blocks end at 11:30AM UTC").
        for o in offers
    )
    return pieces


def _split_model(
    plan: block_rules.SplitPlan, offers: list[BlockOffering], blocks: list[CapacityRow]
) -> Split:
    by_offer = {o.offering_id: o for o in offers}
    by_block = {r.reservation_id: r for r in blocks}
    pieces: list[SplitPiece] = []
    for piece in plan.pieces:
        if piece.held:
            row = by_block[piece.ref]
            pieces.append(
                SplitPiece(
                    source="held",
                    id=row.reservation_id,
                    region=row.region,
                    availability_zone=row.availability_zone,
                    instance_type=row.instance_type,
                    instance_count=piece.count,
                    start_date=row.start_date,
                    end_date=row.end_date,
                )
            )
        else:
            offer = by_offer[piece.ref]
            pieces.append(
                SplitPiece(
                    source="offering",
                    id=offer.offering_id,
                    region=offer.region,
                    availability_zone=offer.availability_zone,
                    instance_type=offer.instance_type,
                    instance_count=offer.instance_count,
                    start_date=offer.start_date,
                    end_date=offer.end_date,
                    upfront_fee=offer.upfront_fee,
                    currency=offer.currency,
                )
            )
    return Split(
        pieces=pieces,
        instance_count=plan.count,
        run_start=plan.run_start,
        upfront_fee=round(plan.fee, 2) if plan.fee else None,
        costs=list(block_rules.SPLIT_COSTS)
        if _split_costs_text(plan, blocks).startswith("A split is")
        else [_split_costs_text(plan, blocks), block_rules.SPLIT_COSTS[1]],
    )


def _biggest(offers: list[BlockOffering]) -> list[BlockOffering]:
    """The largest offerings: the greatest count found, cheapest then soonest first."""
    if not offers:
        return []
    top = max(o.instance_count for o in offers)
    return sorted((o for o in offers if o.instance_count == top), key=_offer_order)


def _largest_text(biggest: list[BlockOffering], types: list[str]) -> str:
    if not biggest:
        return ""
    first = biggest[0]
    zones = sorted({f"{o.availability_zone} ({o.region})" for o in biggest})
    return (
        f": the largest on sale is {first.instance_count} x {first.instance_type} in "
        f"{', '.join(zones)}, from {_at(first.start_date)}"
    )


def _segments_of(blocks: list[CapacityRow]) -> dict[str, str]:
    """Reservation id -> its Capacity Block id, for the reservations that are one segment of a
    purchase of several."""
    by_block: dict[str, list[str]] = {}
    for row in blocks:
        if row.capacity_block_id:
            by_block.setdefault(row.capacity_block_id, []).append(row.reservation_id)
    return {rid: block for block, ids in by_block.items() if len(ids) > 1 for rid in ids}


def _pieces_text(plan: block_rules.SplitPlan, blocks: list[CapacityRow]) -> str:
    segment_of = _segments_of(blocks)

    def one(p: block_rules.Piece) -> str:
        if not p.held:
            return f"{p.count} ({p.ref})"
        block = segment_of.get(p.ref)
        return f"{p.count} (held {p.ref}" + (f", a segment of {block})" if block else ")")

    return " + ".join(one(p) for p in plan.pieces)


def _split_costs_text(plan: block_rules.SplitPlan, blocks: list[CapacityRow]) -> str:
    """What the split is: separate blocks (SPLIT_COSTS) only when its pieces come from more
    than one purchase; the segments of one purchase are one block, each segment with "its own
    Availability Zone, instance type, schedule, and pricing" (botocore 1.44.5,
    CapacityBlockOffering.CapacityBlockOfferingSegments), which says nothing of placement."""
    segment_of = _segments_of(blocks)
    purchases = {segment_of.get(p.ref, p.ref) if p.held else p.ref for p in plan.pieces}
    zones = {
        row.availability_zone
        for row in blocks
        if row.reservation_id in {p.ref for p in plan.pieces if p.held}
    }
    if len(purchases) > 1:
        return "A split is " + block_rules.SPLIT_COSTS[0]
    return (
        "The pieces are the segments of one Capacity Block ("
        + next(iter(purchases))
        + "), each with its own "
        + ("Availability Zone, " if len(zones) > 1 else "")
        + "schedule and reservation; EC2 does not say they share placement"
    )


def _offer_order(o: BlockOffering) -> tuple[float, float, float, str, str]:
    return rules.offering_order(
        o.price_per_instance_hour, o.upfront_fee, o.start_date, o.availability_zone, o.offering_id
    )


def _currency(offers: list[BlockOffering]) -> str | None:
    return next((o.currency for o in offers if o.currency), None)


def _run(run: timedelta | None) -> timedelta:
    return run if run is not None else timedelta(0)


def _at(moment: datetime | None) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC" if moment is not None else "an unknown time"


def _money(value: float | None, currency: str | None) -> str:
    return "an unknown fee" if value is None else f"{value:,.2f} {currency or 'USD'}"


def _window_text(window: block_rules.Window) -> str:
    if window.end is None:
        return f"the 8 weeks EC2 sells ahead from {_at(window.start)}"
    return f"{_at(window.start)} to {_at(window.end)}"
