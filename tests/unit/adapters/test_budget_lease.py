"""The pacer where it meets the shared EC2 budget (``throttle.AdaptiveBucket`` with a ledger):
a booked slot is waited for on the caller's own clock, a lone caller's next lease goes out
ahead of need (off the call's path), a region's first call starts the mutating buckets'
leases, and tokens kept unspent too long are dropped. A fake ledger on a driven clock: no
sleeps, no timing."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import pytest
from capacity_broker.adapters.ec2.base import Ec2Base
from capacity_broker.adapters.throttle import (
    WARM,
    AdaptiveBucket,
    Limits,
    NoToken,
    Pacer,
    Slot,
    Ticket,
    Tuning,
)

MUTATING = Limits(50, 5)
NON_MUTATING = Limits(100, 20)


class Grant(NamedTuple):
    tokens: int
    wait: float


class FakeLedger:
    """A ledger that answers what the test queues (else ``idle``: a batch free now), and
    records each lease's horizon."""

    def __init__(self, idle: int = 5) -> None:
        self.idle = idle
        self.answers: list[Grant | None] = []
        self.horizons: list[float] = []
        self.most: list[int | None] = []
        self.bursts: list[float] = []

    def lease(
        self, burst: float, rate: float, horizon: float = 0.0, most: int | None = None
    ) -> Grant | None:
        self.horizons.append(horizon)
        self.most.append(most)
        self.bursts.append(burst)
        return self.answers.pop(0) if self.answers else Grant(min(self.idle, most or 5), 0.0)

    def overdraw(self, rate: float) -> None:
        """A pacer's probe beyond the ledger: not what these tests look at."""


class Account:
    """What the pacer meets, driven by the test: the clock (``sleep`` moves it), the leases
    ahead it was handed, kept until the test runs them (what a daemon thread does while the
    caller's EC2 call is on its way), and a fake ledger per bucket (the shared budget)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.queued: list[Callable[[], None]] = []
        self.ledgers: dict[str, FakeLedger] = {}

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.now += seconds

    def ahead(self, run: Callable[[], None]) -> None:
        self.queued.append(run)

    def run_ahead(self) -> int:
        ran, self.queued = self.queued, []
        for run in ran:
            run()
        return len(ran)

    def ledger(self, region: str, bucket: str) -> FakeLedger:
        return self.ledgers.setdefault(bucket, FakeLedger())

    def bucket(self, ledger: FakeLedger, limits: Limits = MUTATING) -> AdaptiveBucket:
        return AdaptiveBucket(
            limits,
            clock=self.clock,
            sleep=self.sleep,
            ledger=ledger,
            ahead=self.ahead,
            tuning=Tuning(),
        )

    def pacer(self) -> Pacer:
        return Pacer(clock=self.clock, sleep=self.sleep, shared=self, ahead=self.ahead)


def test_a_booked_slot_is_the_callers_own_and_waited_for_once() -> None:
    """A busy ledger books a slot 1.5 s ahead: the caller sleeps 1.5 s on its own clock and
    its call goes then, with no second lease; a second caller waiting at the same time books
    a slot of its own (each thread holds its own place in the account's queue, none waits
    for another's)."""
    account, ledger = Account(), FakeLedger()
    ledger.answers = [Grant(1, 1.5), Grant(1, 1.7), Grant(1, 1.9)]
    bucket = account.bucket(ledger)
    ticket = bucket.acquire()
    assert not ticket.probe and ticket.sent == 101.5 and account.now == 101.5
    assert len(ledger.horizons) == 1
    first = bucket.try_take(account.now)
    second = bucket.try_take(account.now)
    assert isinstance(first, Slot) and isinstance(second, Slot)
    assert (first, second) == (1.7, 1.9)
    assert len(ledger.horizons) == 3


def test_no_slot_is_booked_beyond_the_callers_deadline() -> None:
    """The lease's horizon is the time left to the call's deadline; a ledger with no slot
    within it ends the wait at once (the pacer's own RateBudgetExhausted), not after it."""
    account, ledger = Account(), FakeLedger()
    ledger.answers = [Grant(0, 4.0)]
    bucket = account.bucket(ledger)
    try:
        bucket.acquire(deadline=account.now + 3.0)
    except NoToken:
        pass
    else:
        raise AssertionError("a slot past the deadline was waited for")
    assert 2.9 < ledger.horizons[0] <= 3.0
    assert account.now == 100.0  # nothing slept in vain


def test_a_lone_callers_next_lease_goes_out_before_it_runs_dry() -> None:
    """Idle ledger, batches of 5 (a describe's bucket): after the first lease every call
    finds a token in hand; the next batch is leased ahead (queued to the background) when 2
    are left, so no call but the very first waits for the table."""
    account, ledger = Account(), FakeLedger(idle=5)
    bucket = account.bucket(ledger, NON_MUTATING)
    in_line = 0
    for _ in range(20):
        before = len(ledger.horizons)
        got = bucket.try_take(account.now)
        assert isinstance(got, Ticket) and not got.probe
        in_line += len(ledger.horizons) - before
        account.run_ahead()  # the lease ahead comes back while the EC2 call is on its way
        account.now += 0.05
    assert in_line == 1
    assert len(ledger.horizons) >= 20 // 5


def test_a_regions_first_calls_lease_the_next_buckets_ahead() -> None:
    """A region's first call (a describe) queues leases for the buckets of the calls a probe
    makes next (its lookups and creates); its first create, those of the describes and
    cancels after it. Once back, those calls lease nothing in line; nothing is warmed twice.
    The first call's own bucket leases in line, once (the call is on its way now)."""
    account = Account()
    ledgers, pacer = account.ledgers, account.pacer()
    pacer.acquire("us-east-1", "DescribeSubnets", {"SubnetIds": ["subnet-1"]})
    assert "DescribeSubnets" in WARM[None]
    assert len(ledgers["DescribeSubnets"].horizons) == 1
    first = set(WARM[None]) - {"DescribeSubnets"}
    assert first <= set(ledgers)
    assert not set(WARM["CreateCapacityReservation"]) & set(ledgers)
    assert all(not ledgers[a].horizons for a in first)  # queued, not in line
    assert account.run_ahead() == len(first)
    for action in WARM[None]:
        leased = len(ledgers[action].horizons)
        pacer.acquire("us-east-1", action)
        assert len(ledgers[action].horizons) == leased
    # (Only the next stage's: each bucket spent its one token leased ahead on a call that is
    # not one of a run, so nothing refills it ahead; a create's bucket is scarce and leases
    # its next token when a create needs it.)
    assert account.run_ahead() == len(WARM["CreateCapacityReservation"])
    for action in WARM["CreateCapacityReservation"]:
        leased = len(ledgers[action].horizons)
        pacer.acquire("us-east-1", action)
        assert len(ledgers[action].horizons) == leased
    # The region is warm: its first call's bucket, asked again, queues nothing more.
    account.run_ahead()
    pacer.acquire("us-east-1", "DescribeSubnets", {"SubnetIds": ["subnet-1"]})
    assert not account.queued
    # A lease ahead of a bucket's first call takes one token, not a batch.
    assert all(ledgers[a].most[0] == 1 for a in (*first, *WARM["CreateCapacityReservation"]))


def test_a_flow_about_to_call_a_region_leases_its_first_calls_tokens_ahead() -> None:
    """``Pacer.warm``: a probe that will ask EC2 (while its client is made) queues the
    leases of its first calls' buckets, so none of its look-ups or its first create waits a
    round trip to the table in line; once per region, and the region's first call then
    warms nothing twice. Without a ledger there is nothing to lease."""
    account = Account()
    ledgers, pacer = account.ledgers, account.pacer()
    pacer.warm("us-east-1")
    assert set(ledgers) == set(WARM[None])
    assert all(not ledger.horizons for ledger in ledgers.values())  # queued, not in line
    assert account.run_ahead() == len(WARM[None])
    pacer.warm("us-east-1")
    assert not account.queued
    for action in WARM[None]:
        pacer.acquire("us-east-1", action)
        assert len(ledgers[action].horizons) == 1  # the token leased ahead, none in line
    assert not account.queued or set(ledgers) >= set(WARM["CreateCapacityReservation"])
    account.run_ahead()
    pacer.warm("eu-west-1")  # another region: its own first calls
    assert account.run_ahead() == len(WARM[None])
    alone = Pacer(clock=account.clock, sleep=account.sleep, ahead=account.ahead)
    alone.warm("us-east-1")
    assert not account.queued
    pacer.forget()  # a fresh start (the benchmarks'): a new container's first calls again
    pacer.warm("us-east-1")
    assert account.run_ahead() == len(WARM[None])


def test_a_probe_s_ec2_warm_up_leases_its_first_tokens_before_its_client_is_made() -> None:
    """``Ec2Base.warm`` (a probe that will ask EC2, on its arrival's thread): the leases of its
    first calls go out first, then its EC2 client is made (tens of milliseconds of CPU in a
    cold container), so the leases come back while it is made."""
    account = Account()
    made: list[tuple[str, str, int]] = []

    class Clients:
        def client(self, service: str, region: str) -> object:
            made.append((service, region, len(account.queued)))
            return object()

    Ec2Base("us-east-1", Clients(), account.pacer()).warm()  # type: ignore[arg-type]
    assert made == [("ec2", "us-east-1", len(WARM[None]))]


def test_a_call_that_is_not_one_of_a_run_leases_nothing_ahead_after_it() -> None:
    """A probe makes each look-up once: the batch a lone caller's next lease would take
    after it is left unspent (dropped after ``hold_s``), and in a class of 100 containers
    those batches kept the others waiting (a describe's ledger leased three tokens per call).
    So the next batch goes out ahead only once a call follows another within ``hold_s``."""
    account, ledger = Account(), FakeLedger(idle=2)
    bucket = account.bucket(ledger, NON_MUTATING)
    assert isinstance(bucket.try_take(account.now), Ticket)
    assert not account.queued  # one token left in hand, below ``low``, and nothing leased
    account.now += 3.0  # the next call comes after the hold: a call alone again
    assert isinstance(bucket.try_take(account.now), Ticket)
    assert len(ledger.horizons) == 2 and not account.queued
    account.now += 0.5  # within the hold of the last: a run, so the next batch goes ahead
    assert isinstance(bucket.try_take(account.now), Ticket)
    assert account.run_ahead() == 1
    assert len(ledger.horizons) == 3


def test_a_call_after_its_booked_slot_is_one_of_a_run() -> None:
    """A call that waited for its booked slot on a busy ledger counts as the bucket's call at
    that slot: the next call right after it is one of a run, and its next batch goes ahead."""
    account, ledger = Account(), FakeLedger(idle=2)
    ledger.answers = [Grant(1, 1.5)]
    bucket = account.bucket(ledger, NON_MUTATING)
    slot = bucket.try_take(account.now)
    assert isinstance(slot, Slot) and slot == 1.5
    account.now += 1.5
    assert isinstance(bucket.try_take(account.now), Ticket)  # leased in line: 2, one left
    assert account.run_ahead() == 1


def test_tokens_kept_unspent_too_long_are_dropped() -> None:
    """The ledger counted leased tokens when it granted them: kept unspent past ``hold_s``
    (2 s) they are dropped and the next call leases afresh, so a
    warm container never spends an old batch into a bucket others have emptied since."""
    account, ledger = Account(), FakeLedger(idle=5)
    bucket = account.bucket(ledger, NON_MUTATING)
    assert isinstance(bucket.try_take(account.now), Ticket)
    assert len(ledger.horizons) == 1
    account.now += 1.9
    assert isinstance(bucket.try_take(account.now), Ticket)
    assert len(ledger.horizons) == 1  # still within the hold
    account.now += 2.2
    assert isinstance(bucket.try_take(account.now), Ticket)
    assert len(ledger.horizons) == 2
    assert bucket.tokens == 4


def test_a_scarce_buckets_tokens_are_leased_two_or_for_the_calls_waiting_for_them() -> None:
    """A create's or a cancel's bucket (5 a second for the whole account): a lease asks for
    two tokens (a lone probe's next creates and its cancels come a few milliseconds apart:
    one round trip to the table for two of them, not one each), or one for each call waiting
    for the bucket when more wait; none is leased ahead after a call, so a probe whose last
    create or cancel it was leaves one token at most unspent for the others to wait behind.
    A Capacity Block action's bucket (0.15 a second: a token unspent is 7 s of the
    account's) leases one at a time."""
    account, ledger = Account(), FakeLedger(idle=5)
    bucket = account.bucket(ledger, MUTATING)
    for _ in range(4):  # calls one after another: one lease for two
        with bucket.waiting():
            assert isinstance(bucket.try_take(account.now), Ticket)
        assert not account.queued  # nothing leased ahead
        account.now += 0.1
    assert ledger.most == [2, 2] and bucket.tokens == 0
    with bucket.waiting(), bucket.waiting(), bucket.waiting():  # three creates waiting at once
        for _ in range(3):
            assert isinstance(bucket.try_take(account.now), Ticket)
    assert ledger.most == [2, 2, 3] and bucket.tokens == 0
    assert not account.queued
    blocks = FakeLedger(idle=5)
    offerings = account.bucket(blocks, Limits(10, 0.15))
    for _ in range(2):
        with offerings.waiting():
            assert isinstance(offerings.try_take(account.now), Ticket)
        account.now += 10.0
    assert blocks.most == [1, 1] and offerings.tokens == 0
    # A describe's bucket still leases its batch, and its next one ahead.
    ahead = FakeLedger(idle=5)
    describes = account.bucket(ahead, NON_MUTATING)
    for _ in range(4):
        assert isinstance(describes.try_take(account.now), Ticket)
    assert ahead.most == [None] and account.run_ahead() == 1


def test_the_ledgers_burst_leaves_room_for_tokens_kept_in_hand() -> None:
    """A token leased free now may be spent up to ``hold_s`` later, so tokens leased over the
    last ``hold_s`` can reach EC2 together: the ledger is read with a bucket smaller by what
    the refill brings in ``hold_s`` (50 - 5 x 2 = 40 for a create's), and EC2's bucket is
    never asked for more than it holds (one create in 97 was throttled in
    test_containers_sharing_a_table_stay_within_the_bucket without it). Every process reads
    the ledger with one window: the burst over the rate stays the same at any rate."""
    account = Account()
    for limits, expected in ((MUTATING, 40.0), (NON_MUTATING, 60.0)):
        ledger = FakeLedger(idle=5)
        bucket = account.bucket(ledger, limits)
        assert isinstance(bucket.try_take(account.now), Ticket)
        assert ledger.bursts == [expected]
        bucket.rate = limits.refill / 2  # throttled: leases at half the rate, same window
        burst, rate = bucket._terms()
        assert burst / rate == expected / limits.refill


def test_a_ledger_that_cannot_be_asked_refills_the_bucket_alone() -> None:
    """The table is down (None): the bucket refills on its own account and its tokens are its
    own (none dropped as if leased), so calls go at the bucket's rate."""
    account, ledger = Account(), FakeLedger()
    ledger.answers = [None] * 1000
    bucket = account.bucket(ledger)
    sent = 0
    for _ in range(400):
        got = bucket.try_take(account.now)
        if isinstance(got, Ticket):
            sent += 1
            bucket.answered(got, account.now)
            if got.probe:
                continue
        else:
            account.now += got
    assert sent >= 5 * (account.now - 100.0) - 5


def test_a_bucket_is_short_only_once_the_account_s_ledger_was_found_busy() -> None:
    """``short`` (what makes a fan-out frugal): a bucket that has made no call knows nothing
    of the others; an idle ledger's batch leaves tokens to spare; a slot booked in line (the
    ledger busy) leaves none, and so does a ledger with nothing free."""
    account = Account()
    pacer = account.pacer()
    assert not pacer.short("us-east-1", "CreateCapacityReservation")  # not made yet
    idle = account.ledger("us-east-1", "CreateCapacityReservation")
    bucket = pacer.bucket("us-east-1", "CreateCapacityReservation")
    account.run_ahead()
    bucket.acquire()
    assert not bucket.short  # an idle ledger's batch: tokens in hand
    while bucket.tokens >= 1:
        bucket.acquire()
    idle.answers = [Grant(1, 0.8)]  # busy: a slot booked in line
    bucket.acquire()
    assert bucket.short and pacer.short("us-east-1", "CreateCapacityReservation")
    idle.answers = [Grant(3, 0.0)]  # free again: a batch now
    bucket.acquire()
    assert not bucket.short


def test_a_bucket_alone_is_short_when_its_own_burst_is_spent() -> None:
    account = Account()
    bucket = AdaptiveBucket(MUTATING, clock=account.clock, sleep=account.sleep)
    for _ in range(48):
        bucket.acquire()
    assert not bucket.short  # two left
    bucket.acquire()
    assert bucket.short
    account.now += 1.0  # 5 a second: refilled
    assert not bucket.short


def test_a_bucket_whose_ledger_is_down_is_short_as_a_bucket_alone_would_be() -> None:
    """The state table down: the bucket paces alone (its next call refills as if alone since
    the ledger was last asked), so ``short`` says what that refill would: after a while
    without calls it has its burst back and is not short (a lone desktop stays unfrugal)."""
    account, ledger = Account(), FakeLedger()
    bucket = account.bucket(ledger)
    ledger.answers = [None] * 100  # the ledger cannot be asked
    bucket.acquire()
    assert bucket.short  # alone since it was made, a moment ago: nothing to spare yet
    account.now += 60.0
    assert not bucket.short
    before = (bucket.tokens, bucket.counts.copy())
    assert not bucket.short  # reading it changes nothing
    assert (bucket.tokens, bucket.counts) == before


def test_a_call_past_its_deadline_asks_the_ledger_nothing() -> None:
    """A call whose deadline has passed, with no token in hand, is refused without a lease: no
    slot can come in time (in a collapsed class of 200, such leases were a tenth of the
    table's budget updates). A token in hand is still spent: it costs nobody anything."""
    account, ledger = Account(), FakeLedger(idle=1)
    bucket = account.bucket(ledger, NON_MUTATING)
    with pytest.raises(NoToken):
        bucket.acquire(deadline=account.now - 0.1)
    assert ledger.horizons == []
    assert isinstance(bucket.acquire(deadline=account.now + 5.0), Ticket)  # leased in line
    assert len(ledger.horizons) == 1


def test_a_lease_that_lost_is_asked_again_after_a_token_s_time() -> None:
    """A lease that lost its races, or ran out of its time against a slow table, answers no
    token and one token's time: a caller with no deadline (or one far off) waits that long
    before asking again, not a millisecond (each ask is a round trip to the table). A slot
    refused past the horizon is still asked for again once the queue comes within it."""
    account, ledger = Account(), FakeLedger()
    ledger.answers = [Grant(0, 0.2), Grant(1, 0.0), Grant(0, 31.0), Grant(1, 0.0)]
    bucket = account.bucket(ledger)
    bucket.acquire()
    assert account.now == pytest.approx(100.2)  # one token's time, then granted
    assert len(ledger.horizons) == 2
    bucket.acquire()
    assert account.now == pytest.approx(100.2 + 31.0 - ledger.horizons[2])
