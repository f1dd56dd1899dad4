# ruff: noqa: W291, W293 - the examples keep the seeds' own trailing whitespace
"""The seed documents' Python examples, run unchanged against the discovery scenario.

Each example below is copied verbatim from the seeds (the truffle capacity guide and the
Python bindings note), characters and all; ``ours`` replaces only the import line and the
class name (``from truffle import Truffle, ReservationType`` / ``tf = Truffle()``). The
bindings' "Full API" block is a list of signatures, not an example, and is not run.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = pytest.mark.integration

GUIDE_BLOCKS = r"""
from truffle import Truffle, ReservationType

tf = Truffle()

# Check training capacity blocks
blocks = tf.capacity(
    instance_types=["p5.48xlarge"],
    reservation_type=ReservationType.CAPACITY_BLOCKS,
    regions=["us-east-1"]
)

for block in blocks:
    print(f"Capacity Block: {block.capacity_block_id}")
    print(f"  Instances: {block.instance_count}x {block.instance_type}")
    print(f"  Duration: {block.duration_hours} hours ({block.duration_hours // 24} days)")
    print(f"  Period: {block.start_date} to {block.end_date}")
    print(f"  UltraCluster: {block.ultra_cluster_placement}")
"""

GUIDE_ODCRS = r"""
# Check inference capacity (ODCRs)
capacity = tf.capacity(
    instance_types=["inf2.xlarge", "g6.xlarge"],
    reservation_type=ReservationType.ODCR,
    available_only=True,
    min_capacity=10
)

for c in capacity:
    print(f"ODCR: {c.reservation_id}")
    print(f"  Instance: {c.instance_type}")
    print(f"  Available: {c.available_capacity}/{c.total_capacity}")
    print(f"  Location: {c.availability_zone}")
"""

GUIDE_VALIDATION = r'''
def validate_training_capacity(instance_type: str, count: int, duration_days: int):
    """Check if we have capacity for training"""
    
    # Check Capacity Blocks (preferred for training)
    blocks = tf.capacity(
        instance_types=[instance_type],
        reservation_type=ReservationType.CAPACITY_BLOCKS
    )
    
    for block in blocks:
        block_days = block.duration_hours // 24
        if (block.instance_count >= count and 
            block_days >= duration_days and
            block.state in ["scheduled", "active"]):
            print(f"âœ… Capacity Block available:")
            print(f"   {block.instance_count} instances for {block_days} days")
            print(f"   UltraCluster networking enabled")
            return True
    
    # Fallback to ODCRs
    odcrs = tf.capacity(
        instance_types=[instance_type],
        reservation_type=ReservationType.ODCR,
        min_capacity=count,
        available_only=True
    )
    
    if odcrs:
        print(f"âš ï¸  No Capacity Block found")
        print(f"âœ… ODCR available: {odcrs[0].available_capacity} instances")
        print(f"   Note: Standard networking (not UltraCluster)")
        return True
    
    print(f"âŒ No capacity available!")
    print(f"   Create Capacity Block or ODCR for {instance_type}")
    return False

# Before training
if validate_training_capacity("p5.48xlarge", 32, 7):
    print("Ready to train!")
'''

BINDINGS_BASIC_USAGE = r"""
from truffle import Truffle, ReservationType

tf = Truffle()

# Search instances
results = tf.search("m7i.large", regions=["us-east-1"])

# Get Spot pricing
spots = tf.spot("m8g.*", max_price=0.10, sort_by_price=True)

# Check Capacity Blocks (for TRAINING)
blocks = tf.capacity(
    instance_types=["p5.48xlarge"],
    reservation_type=ReservationType.CAPACITY_BLOCKS
)

# Check ODCRs (for INFERENCE)
capacity = tf.capacity(
    gpu_only=True,
    available_only=True,
    reservation_type=ReservationType.ODCR
)
"""

BINDINGS_EXAMPLE_1 = r"""
# Check training capacity
blocks = tf.capacity(
    instance_types=["p5.48xlarge"],
    reservation_type=ReservationType.CAPACITY_BLOCKS,
    regions=["us-east-1"]
)

for block in blocks:
    if block.instance_count >= 32 and block.duration_hours >= 240:
        print(f"‚úÖ Capacity Block: {block.capacity_block_id}")
        print(f"   {block.instance_count}x H100 GPUs")
        print(f"   UltraCluster: {block.ultra_cluster_placement}")
        print(f"   Period: {block.start_date} to {block.end_date}")
        # Book this block!
"""

BINDINGS_EXAMPLE_2 = r"""
# Check inference capacity
capacity = tf.capacity(
    instance_types=["inf2.xlarge"],
    reservation_type=ReservationType.ODCR,
    available_only=True,
    min_capacity=100  # Need 100 for peak load
)

if capacity:
    c = capacity[0]
    print(f"‚úÖ ODCR: {c.reservation_id}")
    print(f"   Available: {c.available_capacity} instances")
    print(f"   Location: {c.availability_zone}")
    # Deploy inference API
"""

BINDINGS_EXAMPLE_3 = r'''
def can_train(instance_type, count, duration_days):
    """Validate capacity before expensive training"""
    
    # Check Capacity Blocks first (preferred for training)
    blocks = tf.capacity(
        instance_types=[instance_type],
        reservation_type=ReservationType.CAPACITY_BLOCKS
    )
    
    for block in blocks:
        if (block.instance_count >= count and
            block.duration_hours >= duration_days * 24 and
            block.state in ["scheduled", "active"]):
            print(f"‚úÖ Capacity Block found!")
            print(f"   {block.instance_count} instances")
            print(f"   UltraCluster networking")
            return True
    
    # Fallback to ODCRs (not ideal but works)
    odcrs = tf.capacity(
        instance_types=[instance_type],
        reservation_type=ReservationType.ODCR,
        min_capacity=count,
        available_only=True
    )
    
    if odcrs:
        print(f"‚ö†Ô∏è  ODCR found (no Capacity Block)")
        print(f"   {odcrs[0].available_capacity} instances")
        print(f"   Standard networking (not UltraCluster)")
        return True
    
    print(f"‚ùå No capacity!")
    print(f"   Create Capacity Block for {instance_type}")
    return False

# Before $100k training run
if can_train("p5.48xlarge", 32, 7):
    start_training()
else:
    create_capacity_block()
'''

BINDINGS_REFERENCE = r"""
# Training capacity
blocks = tf.capacity(
    instance_types=["p5.48xlarge"],
    reservation_type=ReservationType.CAPACITY_BLOCKS
)

# Inference capacity
capacity = tf.capacity(
    instance_types=["inf2.xlarge"],
    reservation_type=ReservationType.ODCR,
    available_only=True
)
"""

BINDINGS_GET_STARTED = r"""
from truffle import Truffle, ReservationType

tf = Truffle()

# Training
blocks = tf.capacity(
    instance_types=["p5.48xlarge"],
    reservation_type=ReservationType.CAPACITY_BLOCKS
)

# Inference
capacity = tf.capacity(
    gpu_only=True,
    reservation_type=ReservationType.ODCR,
    available_only=True
)
"""


def ours(code: str) -> str:
    return code.replace(
        "from truffle import Truffle, ReservationType",
        "from capacity_broker import CapacityBroker, ReservationType",
    ).replace("tf = Truffle()", "tf = CapacityBroker()")


def run(code: str, namespace: dict[str, Any]) -> dict[str, Any]:
    exec(compile(ours(code), "<seed example>", "exec"), namespace)  # noqa: S102 - the examples
    return namespace


@pytest.fixture
def seeds(broker: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A namespace with ``tf`` made by the seeds' own opening lines."""
    monkeypatch.setenv("BROKER_REGIONS", "us-east-1,us-west-2,eu-west-1")
    broker.load_scenario("discovery")
    namespace: dict[str, Any] = {}
    run("from truffle import Truffle, ReservationType\n\ntf = Truffle()\n", namespace)
    return namespace


def test_the_only_changes_are_the_import_and_the_class_name() -> None:
    for code in (GUIDE_BLOCKS, BINDINGS_BASIC_USAGE, BINDINGS_GET_STARTED):
        changed = [
            (a, b)
            for a, b in zip(code.splitlines(), ours(code).splitlines(), strict=True)
            if a != b
        ]
        assert changed == [
            (
                "from truffle import Truffle, ReservationType",
                "from capacity_broker import CapacityBroker, ReservationType",
            ),
            ("tf = Truffle()", "tf = CapacityBroker()"),
        ]


def test_guide_capacity_blocks(broker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    broker.load_scenario("discovery")
    namespace = run(GUIDE_BLOCKS, {})
    out = capsys.readouterr().out
    assert len(namespace["blocks"]) == 2
    assert len(re.findall(r"^Capacity Block: cb-[0-9a-f]+$", out, re.M)) == 2
    assert "  Instances: 32x p5.48xlarge" in out
    assert "  Duration: 168 hours (7 days)" in out
    assert "  Duration: 336 hours (14 days)" in out
    # the active block's placement; the scheduled one has no topology before its start
    assert out.count("  UltraCluster: True") == 1
    assert out.count("  UltraCluster: None") == 1
    assert re.search(r"  Period: 2026-\S+ \S+\+00:00 to 2026-", out) or "Period:" in out


def test_guide_odcrs(seeds: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    run(GUIDE_ODCRS, seeds)
    out = capsys.readouterr().out
    assert len(re.findall(r"^ODCR: cr-[0-9a-f]+$", out, re.M)) == 3
    assert out.count("  Instance: g6.xlarge") == 2
    assert "  Instance: inf2.xlarge" in out
    assert "  Available: 12/32" in out
    assert out.count("  Available: 24/64") == 2
    assert "  Location: us-west-2a" in out


def test_guide_pre_training_validation(
    seeds: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    run(GUIDE_VALIDATION, seeds)
    out = capsys.readouterr().out
    assert "Capacity Block available:" in out
    assert "   32 instances for 7 days" in out
    assert out.rstrip().endswith("Ready to train!")
    validate = seeds["validate_training_capacity"]
    assert validate("g6.xlarge", 10, 3) is True  # no block: falls back to an ODCR
    assert "ODCR available: 24 instances" in capsys.readouterr().out
    assert validate("p5.48xlarge", 33, 14) is False
    assert "No capacity available!" in capsys.readouterr().out


def test_bindings_basic_usage(broker: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROKER_REGIONS", "us-east-1,us-west-2,eu-west-1")
    broker.load_scenario("discovery")
    namespace = run(BINDINGS_BASIC_USAGE, {})
    assert [(r.instance_type, r.region) for r in namespace["results"]] == [
        ("m7i.large", "us-east-1")
    ]
    assert [(s.instance_type, s.spot_price) for s in namespace["spots"]] == [
        ("m8g.large", 0.0421),
        ("m8g.xlarge", 0.0843),
    ]
    assert {b.region for b in namespace["blocks"]} == {"us-east-1", "us-west-2"}
    assert all(b.reservation_type == "capacity-block" for b in namespace["blocks"])
    capacity = namespace["capacity"]
    assert {c.instance_type for c in capacity} == {
        "inf2.xlarge",
        "g6.xlarge",
        "g6.2xlarge",
        "p4d.24xlarge",
    }
    assert all(c.available_capacity > 0 for c in capacity)


def test_bindings_examples(seeds: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    run(BINDINGS_EXAMPLE_1, seeds)
    out = capsys.readouterr().out
    assert "Capacity Block: cb-" in out
    assert "   32x H100 GPUs" in out
    # the one block of 32 for 240 h or more is scheduled: EC2 reports no topology for it yet
    assert "   UltraCluster: None" in out
    run(BINDINGS_EXAMPLE_2, seeds)
    assert seeds["capacity"] == []  # nobody holds 100 free inf2.xlarge
    assert capsys.readouterr().out == ""
    calls: list[str] = []
    seeds["start_training"] = lambda: calls.append("start_training")
    seeds["create_capacity_block"] = lambda: calls.append("create_capacity_block")
    run(BINDINGS_EXAMPLE_3, seeds)
    assert calls == ["start_training"]
    assert "Capacity Block found!" in capsys.readouterr().out
    assert seeds["can_train"]("p4d.24xlarge", 2, 7) is True  # an ODCR, not a block
    assert seeds["can_train"]("trn1.32xlarge", 65, 7) is False


def test_bindings_reference_and_get_started(broker: Any) -> None:
    broker.load_scenario("discovery")
    namespace = run(BINDINGS_GET_STARTED, {})
    run(BINDINGS_REFERENCE, namespace)
    assert namespace["blocks"]
    assert all(b.instance_type == "p5.48xlarge" for b in namespace["blocks"])
    # No regions given: every enabled region (contract v2, as truffle), not the default one.
    assert [(c.region, c.instance_type) for c in namespace["capacity"]] == [
        ("us-east-1", "inf2.xlarge"),
        ("us-west-2", "inf2.xlarge"),
    ]
