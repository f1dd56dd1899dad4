"""Instance type search and Availability Zone coverage."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from ...domain import discovery as rules
from ...models.discovery import AzRow, InstanceTypeRow
from ..capacity import Listing, Progress, fan_out
from .base import DiscoveryBase


def _size_order(row: InstanceTypeRow) -> tuple[str, int, float, str, str]:
    family = row.instance_type.split(".", 1)[0]
    return (family, row.vcpus, row.memory_gib, row.instance_type, row.region)


class InstanceTypes(DiscoveryBase):
    """Which instance types match, and in which Availability Zones."""

    def search(
        self,
        pattern: str,
        regions: Sequence[str] | None = None,
        architecture: str | None = None,
        min_vcpus: int | None = None,
        min_memory: float | None = None,
        gpu_only: bool = False,
        progress: Progress | None = None,
    ) -> Listing[InstanceTypeRow]:
        wanted = self._regions(regions)
        patterns = rules.expand_pattern(pattern)
        self.check_types([("instance_type", p) for p in patterns], wanted)
        filters = {"processor-info.supported-architecture": [architecture]} if architecture else {}

        def one(region: str) -> list[InstanceTypeRow]:
            rows = []
            for item in self.ec2(region).instance_types(patterns=patterns, filters=filters):
                facts = rules.instance_facts(item)
                if not rules.matches_any(facts.instance_type, patterns):
                    continue
                if not rules.fits(facts, architecture, min_vcpus, min_memory, gpu_only):
                    continue
                rows.append(
                    InstanceTypeRow(
                        instance_type=facts.instance_type,
                        region=region,
                        vcpus=facts.vcpus,
                        memory_gib=facts.memory_gib,
                        architectures=list(facts.architectures),
                        accelerated=facts.accelerators.accelerated,
                        gpus=facts.accelerators.gpus,
                        accelerator=facts.accelerators.label or None,
                        current_generation=facts.current_generation,
                        network_performance=facts.network_performance,
                    )
                )
            return rows

        found, errors = fan_out(wanted, one, self.max_workers, progress)
        rows = sorted((r for region in wanted for r in found.get(region, [])), key=_size_order)
        return Listing(rows, errors, wanted)

    # -- Availability Zones ---------------------------------------------------------------------
    def az(
        self,
        pattern: str,
        regions: Sequence[str] | None = None,
        min_az_count: int | None = None,
        azs: Sequence[str] | None = None,
        progress: Progress | None = None,
    ) -> Listing[AzRow]:
        wanted = self._regions(regions)
        patterns = rules.expand_pattern(pattern)
        self.check_types([("instance_type", p) for p in patterns], wanted)
        only = {z.strip() for z in azs or () if z.strip()}

        def one(region: str) -> list[AzRow]:
            ec2 = self.ec2(region)
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="az") as pool:
                zones_job = pool.submit(ec2.zones)
                offers_job = pool.submit(ec2.instance_type_offerings, patterns)
                zones = {z.name: z.zone_id for z in zones_job.result()}
                offers = offers_job.result()
            by_type: dict[str, set[str]] = {}
            for instance_type, zone in offers:
                if not rules.matches_any(instance_type, patterns):
                    continue
                if only and zone not in only and zones.get(zone) not in only:
                    continue
                by_type.setdefault(instance_type, set()).add(zone)
            rows = []
            for instance_type, names in by_type.items():
                ordered = sorted(names)
                if min_az_count is not None and len(ordered) < min_az_count:
                    continue
                rows.append(
                    AzRow(
                        instance_type=instance_type,
                        region=region,
                        availability_zones=ordered,
                        availability_zone_ids=[zones.get(z, "") for z in ordered],
                        az_count=len(ordered),
                    )
                )
            return rows

        found, errors = fan_out(wanted, one, self.max_workers, progress)
        rows = sorted(
            (r for region in wanted for r in found.get(region, [])),
            key=lambda r: (
                r.instance_type.split(".", 1)[0],
                -r.az_count,
                r.instance_type,
                r.region,
            ),
        )
        return Listing(rows, errors, wanted)
