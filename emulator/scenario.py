"""Scenario files: the world a test or demo starts from (YAML or JSON).

```yaml
cluster_id: hpc      # the broker cluster this world's templates are tagged for (capacity-broker
                     # local runs as it unless given --cluster-id); loading ignores it
preset: slow        # optional: EC2's timings by name (emulator.presets), before `settings`
settings: {expiry_lag_seconds: 0, pending_seconds: 0, default_capacity: null,
           eventual_consistency: true, lag_unknown_calls: 1, lag_pending_calls: 1,
           lag_listing_calls: 2, lag_instance_calls: 1, lag_seconds: 2,
           quota_lag_checks: 1, quota_lag_seconds: 2, block_cleanup_seconds: 180,
           refuse_undocumented: true}     # any field of state.Settings
regions:
  us-east-1:
    vpcs:
      - {id: vpc-0c0ffee000000001, name: hpc, cidr: 10.0.0.0/16,
         subnets: [{id: subnet-0a00000000000001, name: hpc-a, availability_zone: us-east-1a,
                    cidr: 10.0.1.0/24}]}
    pools:        [{availability_zone: us-east-1a, instance_type: g6.xlarge, capacity: 0}]
    unsupported:  [{availability_zone: us-east-1e, instance_type: p5.48xlarge}]
    quotas:       {instances: {p5.48xlarge: 8}, vcpus: {G: 512}}
    images:       [{id: ami-0rhel0000000001, name: rhel9, platform_details: Red Hat BYOL Linux}]
    launch_templates: [{name: hpc-nodes, data: {ImageId: ami-..., InstanceType: c7i.large},
                        tags: {capacity-broker:cluster-id: hpc}}]
    reservations: [{instance_type: g6.xlarge, availability_zone: us-east-1a, count: 4,
                    used: 1, match: open, tags: {team: ml}}]
    capacity_blocks: [{instance_type: p5.48xlarge, availability_zone: us-east-1b, count: 2,
                       start: "-1d", duration_hours: 168},
                      {instance_type: p5.48xlarge, availability_zone: us-east-1b, count: 4,
                       start: "+2d", payment: pending, paid: "+1h"},
                      {instance_type: p5.48xlarge, availability_zone: us-east-1a, count: 8,
                       start: "-2d", duration_hours: 96, interconnect: impaired,
                       unavailable: 1}]
    future_reservations: [{instance_type: c7i.48xlarge, availability_zone: us-east-1a,
                           count: 4, start: "+30d", commitment_days: 14, state: scheduled}]
    interruptible_reservations: [{name: lent, source: <a reservation's name or id>, count: 2,
                                  zero_size: retain}]   # lent from an unlimited ODCR
    reservation_groups: [{name: pool, members: [<reservation names or ids>]}]
                  # Capacity Reservation pools (AWS::EC2::CapacityReservationPool), ids.groups
    offerings:    [{instance_type: p5.48xlarge, availability_zone: us-east-1b,
                    max_instance_count: 16, price_per_instance_hour: "31.46",
                    earliest_start: "+1d", latest_start: "+56d"}]
                  # optional: segments: 2, segment_zones: [us-east-1a, us-east-1b] (one
                  # reservation per segment), ultraserver_type, instances_per_ultraserver,
                  # zone_type; a capacity_blocks item's `block: LABEL` makes the items naming
                  # the same label the segments of one block (ids.blocks[LABEL])
    spot_prices:  [{instance_type: g6.xlarge, availability_zone: us-east-1a, price: "0.3012",
                    at: "-2h", history: [{at: "-1d", price: "0.35"}]}]
    on_demand_prices: [{instance_type: g6.xlarge, price: "0.8048", operating_system: Linux}]
```

A region a scenario names is enabled for the account (an opt-in region is opted in), and
``on_demand_prices`` are the Price List's (``pricing:GetProducts``) hourly On-Demand prices of
the region.

Times may be absolute (ISO 8601) or relative to the emulator clock ("+2h", "-30m", "+1d").
Loading returns the ids of everything named, so tests can say ``ids.subnets["hpc-a"]``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ec2.models import ec2_backends
from moto.ec2.models.amis import Ami

from .models import CapacityReservation, capacity_backend, groups
from .models.backend import new_block_id, new_reservation_id
from .models.images import usage_operation
from .models.offerings import BlockSupply
from .models.regions import opted_in
from .state import world

SCENARIOS = Path(__file__).parent / "scenarios"
_RELATIVE = re.compile(r"^([+-])(\d+(?:\.\d+)?)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# libyaml's safe loader when PyYAML was built with it (several times faster), else PyYAML's.
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class ScenarioIds:
    vpcs: dict[str, str] = field(default_factory=dict)
    subnets: dict[str, str] = field(default_factory=dict)
    launch_templates: dict[str, str] = field(default_factory=dict)
    reservations: dict[str, str] = field(default_factory=dict)
    images: dict[str, str] = field(default_factory=dict)
    # Capacity Block ids by the ``block`` label that grouped their segments.
    blocks: dict[str, str] = field(default_factory=dict)
    # Capacity Reservation pools (resource groups) by name: their ARNs.
    groups: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, dict[str, str]]:
        return {
            "vpcs": self.vpcs,
            "subnets": self.subnets,
            "launch_templates": self.launch_templates,
            "reservations": self.reservations,
            "images": self.images,
            "blocks": self.blocks,
            "groups": self.groups,
        }


def read(source: str | Path | dict[str, Any]) -> dict[str, Any]:
    if isinstance(source, dict):
        return source
    path = Path(source)
    # A bare name ("demo") means a bundled scenario, even when a folder of that name exists.
    for candidate in (path, SCENARIOS / path, SCENARIOS / f"{path}.yaml"):
        if candidate.is_file():
            path = candidate
            break
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix == ".json" else _load_yaml(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a scenario is a mapping")
    return data


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - SafeLoader or CSafeLoader


def when(value: Any, now: datetime) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=now.tzinfo)
    match = _RELATIVE.match(str(value).strip())
    if match:
        sign, amount, unit = match.groups()
        delta = timedelta(**{_UNITS[unit]: float(amount)})
        return now + delta if sign == "+" else now - delta
    parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=now.tzinfo)


def load(source: str | Path | dict[str, Any], account_id: str = DEFAULT_ACCOUNT_ID) -> ScenarioIds:
    data = read(source)
    if data.get("preset"):
        world.use_preset(str(data["preset"]))
    settings = data.get("settings") or {}
    for key, value in settings.items():
        if not hasattr(world.settings, key):
            raise ValueError(f"unknown scenario setting {key!r}")
        setattr(world.settings, key, value)
    ids = ScenarioIds()
    for region, spec in (data.get("regions") or {}).items():
        opted_in(account_id).add(region)
        _load_region(account_id, region, spec or {}, ids)
    return ids


def _load_region(account_id: str, region: str, spec: dict[str, Any], ids: ScenarioIds) -> None:
    ec2 = ec2_backends[account_id][region]
    capacity = capacity_backend(ec2)
    now = world.clock.now()
    for vpc_spec in spec.get("vpcs") or []:
        with _fixed_id("moto.ec2.models.vpcs.random_vpc_id", vpc_spec.get("id")):
            vpc = ec2.create_vpc(cidr_block=vpc_spec.get("cidr", "10.0.0.0/16"))
        if vpc_spec.get("name"):
            ec2.create_tags([vpc.id], {"Name": vpc_spec["name"]})
            ids.vpcs[vpc_spec["name"]] = vpc.id
        for subnet_spec in vpc_spec.get("subnets") or []:
            with _fixed_id("moto.ec2.models.subnets.random_subnet_id", subnet_spec.get("id")):
                subnet = ec2.create_subnet(
                    vpc_id=vpc.id,
                    cidr_block=subnet_spec["cidr"],
                    availability_zone=subnet_spec.get("availability_zone"),
                    availability_zone_id=subnet_spec.get("availability_zone_id"),
                )
            name = subnet_spec.get("name") or subnet.id
            ec2.create_tags([subnet.id], {"Name": name})
            ids.subnets[name] = subnet.id
    for pool in spec.get("pools") or []:
        # No capacity given: the scenario's default_capacity ("capacity: null" is unlimited).
        size = pool.get("capacity", world.settings.default_capacity)
        capacity.set_pool(pool["availability_zone"], pool["instance_type"], size)
    for item in spec.get("unsupported") or []:
        capacity.unsupported.add((item["availability_zone"], item["instance_type"]))
    quotas = spec.get("quotas") or {}
    capacity.quotas.instances.update(quotas.get("instances") or {})
    capacity.quotas.vcpus.update(quotas.get("vcpus") or {})
    for image in spec.get("images") or []:
        ami = Ami(
            ec2,
            image["id"],
            name=image.get("name", image["id"]),
            description=image.get("description"),
            public=False,
            architecture=image.get("architecture", "x86_64"),
            platform="windows"
            if str(image.get("platform_details", "")).startswith("Windows")
            else None,
            virtualization_type="hvm",
            region_name=region,
        )
        # DescribeImages serializes these attribute names from botocore's output shape.
        details = image.get("platform_details", "Linux/UNIX")
        ami.platform_details = details  # type: ignore[attr-defined]
        # EC2 shows the billing pair together (models.images.BILLING).
        ami.usage_operation = image.get("usage_operation", usage_operation(details))  # type: ignore[attr-defined]
        ec2.amis[ami.id] = ami
        ids.images[image.get("name", ami.id)] = ami.id
    for template in spec.get("launch_templates") or []:
        with _fixed_id(
            "moto.ec2.models.launch_templates.random_launch_template_id", template.get("id")
        ):
            created = ec2.create_launch_template(
                template["name"],
                template.get("description", ""),
                template.get("data") or {},
                {"launch-template": dict(template.get("tags") or {})},
            )
        ids.launch_templates[template["name"]] = created.id
    for item in spec.get("reservations") or []:
        reservation = _existing_reservation(capacity, item, now)
        capacity.add_existing(reservation, item.get("tags") or {})
        ids.reservations[item.get("name") or reservation.id] = reservation.id
    # Items naming the same ``block`` are the segments of one purchase: one CapacityBlockId
    # ("a separate Capacity Reservation is created for each segment", botocore 1.44.5
    # PurchaseCapacityBlockResult), each with its own zone, type and dates if the items say so.
    block_ids: dict[str, str] = {}
    for item in spec.get("capacity_blocks") or []:
        start = when(item.get("start", "+1d"), now)
        block = capacity.new_block(
            instance_type=item["instance_type"],
            availability_zone=item["availability_zone"],
            count=int(item["count"]),
            start=start,
            end=start + timedelta(hours=int(item.get("duration_hours", 24))),
            platform=item.get("platform", "Linux/UNIX"),
            ultraserver_type=item.get("ultraserver_type"),
            network_nodes=item.get("network_nodes"),
            # "payment: pending" seeds a block whose upfront fee is not paid yet, until "paid".
            payment_pending=item.get("payment") == "pending",
            paid_at=when(item["paid"], now) if item.get("paid") else None,
        )
        if item.get("payment") == "failed":
            block.state = "payment-failed"
        # What DescribeCapacityBlockStatus reports: ok | impaired | insufficient-data, and
        # instances failing their status checks.
        block.interconnect = item.get("interconnect")
        block.unavailable_count = int(item.get("unavailable", 0))
        if item.get("id"):
            block.id = item["id"]
        if item.get("block"):
            label = str(item["block"])
            block.capacity_block_id = block_ids.setdefault(label, block.capacity_block_id or "")
            ids.blocks[label] = block.capacity_block_id
        capacity.add_existing(block, item.get("tags") or {})
        ids.reservations[item.get("name") or block.id] = block.id
    for item in spec.get("future_reservations") or []:
        reservation = _future_reservation(capacity, item, now)
        capacity.add_existing(reservation, item.get("tags") or {})
        ids.reservations[item.get("name") or reservation.id] = reservation.id
    for item in spec.get("interruptible_reservations") or []:
        source = ids.reservations.get(str(item["source"]), str(item["source"]))
        lent = capacity.seed_interruptible(
            source, int(item["count"]), item.get("zero_size"), dict(item.get("tags") or {})
        )
        ids.reservations[item.get("name") or lent.id] = lent.id
    for item in spec.get("reservation_groups") or []:
        arns = [
            capacity.get(ids.reservations.get(str(m), str(m))).arn
            for m in item.get("members") or []
        ]
        ids.groups[item["name"]] = groups.seed_pool(
            account_id, region, item["name"], arns, dict(item.get("tags") or {})
        )
    _load_spot_prices(ec2, spec.get("spot_prices") or [], now)
    _load_on_demand_prices(account_id, region, spec.get("on_demand_prices") or [])
    for item in spec.get("offerings") or []:
        capacity.catalogue.supply.append(
            BlockSupply(
                region=region,
                availability_zone=item["availability_zone"],
                instance_type=item["instance_type"],
                max_instance_count=int(item.get("max_instance_count", 64)),
                price_per_instance_hour=Decimal(str(item.get("price_per_instance_hour", "10"))),
                earliest_start=when(item.get("earliest_start", "+0h"), now),
                latest_start=when(item.get("latest_start", "+8w"), now),
                currency=item.get("currency", "USD"),
                ultraserver_type=item.get("ultraserver_type"),
                segments=int(item.get("segments", 1)),
                # the segments' zones when they differ (one each, in turn)
                segment_zones=tuple(item.get("segment_zones") or ()),
                instances_per_ultraserver=int(item.get("instances_per_ultraserver", 1)),
                zone_type=item.get("zone_type", "availability-zone"),
            )
        )


def _existing_reservation(
    capacity: Any, item: dict[str, Any], now: datetime
) -> CapacityReservation:
    az = item["availability_zone"]
    end = when(item["end_date"], now) if item.get("end_date") else None
    created = when(item.get("created", "-1h"), now)
    return CapacityReservation(
        id=item.get("id") or new_reservation_id(),
        owner_id=str(item.get("owner_id") or capacity.account_id),
        region=capacity.region,
        availability_zone=az,
        availability_zone_id=capacity.zones[az],
        instance_type=item["instance_type"],
        instance_platform=item.get("platform", "Linux/UNIX"),
        tenancy=item.get("tenancy", "default"),
        total_instance_count=int(item["count"]),
        create_date=created,
        start_date=created,
        end_date=end,
        end_date_type="limited" if end else "unlimited",
        instance_match_criteria=item.get("match", "open"),
        state=item.get("state", "active"),
        seeded_used=int(item.get("used", 0)),
        expiry_lag=(float(item["expiry_lag_seconds"]) if "expiry_lag_seconds" in item else None),
        reservation_type=item.get("reservation_type", "default"),
        capacity_block_id=new_block_id()
        if item.get("reservation_type") == "capacity-block"
        else None,
    )


def _future_reservation(capacity: Any, item: dict[str, Any], now: datetime) -> CapacityReservation:
    """A future-dated ODCR requested earlier (``models.future``): ``state`` assessing (until
    ``assessed``), scheduled, delayed, unsupported, or active (delivered at its ``start``,
    which is then in the past)."""
    reservation = _existing_reservation(
        capacity,
        {"created": "-1d", **item, "match": "targeted", "state": item.get("state", "scheduled")},
        now,
    )
    start = when(item.get("start", "+30d"), now)
    commitment = timedelta(days=float(item.get("commitment_days", 14)))
    reservation.start_date = reservation.original_start = start
    reservation.commitment_seconds = int(commitment.total_seconds())
    reservation.committed_count = reservation.total_instance_count
    reservation.delivery_preference = "incremental"
    if reservation.state == "assessing":
        reservation.assessed_at = when(item.get("assessed", "+1d"), now)
        reservation.assessment = item.get("assessment", "scheduled")
    if reservation.state == "active":
        reservation.delivered_at = start
        reservation.commitment_end = start + commitment
    return reservation


class _fixed_id:
    """Make moto's next id of one kind a chosen one (scenarios want stable ids)."""

    def __init__(self, target: str, value: str | None) -> None:
        self._patch = mock.patch(target, return_value=value) if value else None

    def __enter__(self) -> None:
        if self._patch:
            self._patch.start()

    def __exit__(self, *exc: object) -> None:
        if self._patch:
            self._patch.stop()


# -- Spot prices (DescribeSpotPriceHistory; emulator.models.spot) ------------------------------


def _load_spot_prices(ec2: Any, items: list[dict[str, Any]], now: datetime) -> None:
    """``spot_prices``: the current price of a type in an AZ (``price`` at ``at``, default
    an hour ago) and optional older points (``history: [{at, price}]``)."""
    from .models.spot import DEFAULT_PRODUCT, spot_market

    market = spot_market(ec2)
    zone_ids = capacity_backend(ec2).zones
    for item in items:
        product = item.get("product_description", DEFAULT_PRODUCT)
        points = [
            {"at": item.get("at", "-1h"), "price": item["price"]},
            *(item.get("history") or []),
        ]
        for point in points:
            market.add(
                instance_type=item["instance_type"],
                availability_zone=item["availability_zone"],
                price=Decimal(str(point["price"])),
                timestamp=when(point.get("at", "-1h"), now),
                product_description=product,
                availability_zone_id=zone_ids.get(item["availability_zone"], ""),
            )


# -- On-Demand prices (the Price List, pricing:GetProducts; emulator.models.pricing) --------


def _load_on_demand_prices(account_id: str, region: str, items: list[dict[str, Any]]) -> None:
    """``on_demand_prices``: a type's hourly On-Demand price in this region (``price``, USD),
    for ``operating_system`` (default Linux) and ``tenancy`` (default Shared)."""
    from .models.pricing import price_list

    catalogue = price_list(account_id)
    for item in items:
        catalogue.add_on_demand(
            instance_type=item["instance_type"],
            region=region,
            price=Decimal(str(item["price"])),
            operating_system=item.get("operating_system", "Linux"),
            tenancy=item.get("tenancy", "Shared"),
        )
