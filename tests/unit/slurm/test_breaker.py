"""The circuit breaker's count (slurm/breaker.py): errors in a row per node set, kept in a
file that outlives one program and is shared by programs running side by side."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from capacity_broker.slurm import breaker
from capacity_broker.slurm.breaker import Breaker
from capacity_broker.slurm.config import SlurmConfig
from capacity_broker.slurm.plan import MAX_REASON, reason


@pytest.mark.parametrize(
    ("status", "counted"),
    [
        ("error", True),
        ("rejected", True),
        ("invalid_request", True),
        ("unconfigured", True),
        ("no_capacity", False),
        ("unreserved", False),
        ("provisioned", False),
    ],
)
def test_only_errors_count_never_capacity_waits(status: str, counted: bool) -> None:
    assert breaker.counts(status) is counted


def test_errors_in_a_row_trip_at_the_budget_and_an_answer_about_capacity_resets(
    tmp_path: Path,
) -> None:
    store = Breaker(tmp_path / "state")
    assert not store.failed("c5", "error: A").tripped(3)
    assert not store.failed("c5", "error: B").tripped(3)
    third = store.failed("c5", "rejected: C")
    assert third.errors == 3 and third.last == "rejected: C"
    assert third.tripped(3)
    # Another node set has its own count.
    assert store.count("hpc-m5-[1-2]").errors == 0
    store.worked("c5")
    assert store.count("c5").errors == 0
    assert not store.failed("c5", "error: D").tripped(3)
    # A budget of 0 never trips.
    assert not breaker.Count(99, "x").tripped(0)


def test_the_count_survives_the_process_and_a_new_store(tmp_path: Path) -> None:
    Breaker(tmp_path).failed("c5", "error: A")
    assert Breaker(tmp_path).failed("c5", "error: B").errors == 2


def _fail_many(directory: str, times: int) -> None:
    store = Breaker(Path(directory))
    for _ in range(times):
        store.failed("c5", "error: X")


def test_programs_side_by_side_lose_no_count(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_fail_many, args=(str(tmp_path), 25)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert Breaker(tmp_path).count("c5").errors == 100


def test_a_torn_file_starts_again(tmp_path: Path) -> None:
    store = Breaker(tmp_path)
    store.failed("c5", "error: A")
    next(tmp_path.glob("nodeset-*.json")).write_text("{not json")
    assert store.failed("c5", "error: B").errors == 1


def test_the_undo_command_is_never_cut() -> None:
    undo = "scontrol update NodeName=hpc-c5-[1-64] State=RESUME; scontrol release 12"
    text = reason("3 errors in a row, error", "EntryPointUnavailable " * 40, undo)
    assert text.startswith("capacity-broker: 3 errors in a row, error: EntryPointUnavailable")
    assert text.endswith(f"; to undo: {undo}")
    assert len(text) <= MAX_REASON


def test_the_budget_is_per_node_set_with_the_files_default() -> None:
    base = {
        "region": "us-east-1",
        "cluster_id": "c",
        "nodesets": [
            {
                "nodes": "a-[1-2]",
                "instance_types": ["c5.large"],
                "subnet_ids": ["subnet-0a0000000000005a1"],
                "launch_template": {"id": "lt-0c0000000000005c3"},
            },
            {
                "nodes": "b-[1-2]",
                "instance_types": ["c5.large"],
                "subnet_ids": ["subnet-0a0000000000005a1"],
                "launch_template": {"id": "lt-0c0000000000005c3"},
                "error_budget": 0,
            },
        ],
    }
    config = SlurmConfig.model_validate(base)
    assert [config.error_budget_of(n) for n in config.nodesets] == [3, 0]
    config = SlurmConfig.model_validate(base | {"error_budget": 5})
    assert [config.error_budget_of(n) for n in config.nodesets] == [5, 0]
    with pytest.raises(ValueError, match="absolute"):
        SlurmConfig.model_validate(base | {"state_dir": "relative"})


@pytest.mark.parametrize(
    ("code", "answered", "transient"),
    [
        ("RequestLimitExceeded", True, True),
        ("RateBudgetExhausted", True, True),
        ("InternalError", True, True),
        (None, False, True),  # no answer at all (a dropped connection, a timeout)
        ("EntryPointUnavailable", True, False),
        ("UnauthorizedOperation", True, False),
        ("InvalidLaunchTemplateId.NotFound", True, False),
        (None, True, False),
    ],
)
def test_throttling_and_no_answer_are_not_the_node_sets_errors(
    code: str | None, answered: bool, transient: bool
) -> None:
    assert breaker.passing(code, answered) is transient
    assert breaker.counts("error", breaker.passing(code, answered)) is not transient


@pytest.mark.parametrize(
    ("status", "code", "detail", "hold"),
    [
        ("error", "InstanceLimitExceeded", "Stopped by InstanceLimitExceeded", True),
        ("error", "VcpuLimitExceeded", "Stopped by VcpuLimitExceeded", True),
        ("error", "TimeBudgetExceeded", "no answer before the deadline", False),
        (
            "rejected",
            None,
            "Capacity Block cr-0123 can run a job for 5400 s at most (it ends at …); the job "
            "runs 7200 s",
            True,
        ),
    ],
)
def test_a_jobs_own_error_is_never_the_node_sets(
    status: str, code: str | None, detail: str, hold: bool
) -> None:
    found = breaker.own(status, code, detail)
    assert found is not None and found.hold is hold


@pytest.mark.parametrize(
    ("status", "code", "detail"),
    [
        ("rejected", None, "launch template lt-0 belongs to broker cluster 'other'"),
        ("error", "UnauthorizedOperation", "not authorized"),
        ("rejected", None, "cr-0123 is for p5.48xlarge, which is not among the job's types"),
        ("error", "MaxTemplateVersionLimitExceeded", "10,000 versions"),
    ],
)
def test_what_fails_every_job_is_not_a_jobs_own(status: str, code: str | None, detail: str) -> None:
    assert breaker.own(status, code, detail) is None


def test_the_block_refusal_the_broker_writes_is_the_one_recognised() -> None:
    from datetime import UTC, datetime, timedelta

    from capacity_broker.domain.reserve import (
        ExistingReservation,
        Rejected,
        Wanted,
        validate_existing,
    )

    now = datetime(2026, 12, 6, 12, tzinfo=UTC)
    block = ExistingReservation(
        id="cr-0123456789abcdef0",
        state="active",
        reservation_type="capacity-block",
        instance_type="p5.48xlarge",
        availability_zone_id="use1-az1",
        platform="Linux/UNIX",
        tenancy="default",
        available_count=2,
        start_date=now - timedelta(hours=1),
        owner="123456789012",
        owned_by_broker=False,
        size=2,
        end_date=now + timedelta(hours=2),
    )
    wanted = Wanted(
        instance_types=["p5.48xlarge"],
        availability_zone_ids=["use1-az1"],
        platform="Linux/UNIX",
        tenancy="default",
        instance_count=1,
        runtime_seconds=5 * 3600,
    )
    refused = validate_existing(block, wanted, now)
    assert isinstance(refused, Rejected)
    assert breaker.own("rejected", None, refused.reason) is not None
