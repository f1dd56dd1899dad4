"""The AWS Price List (``pricing:GetProducts``), which moto does not have: the On-Demand
prices scenarios declare (``on_demand_prices``), served in the Price List's own shape.

A product is what the Price List Query API returns for EC2: a JSON document (a string in
``PriceList``) with ``product.attributes`` (``instanceType``, ``regionCode``,
``operatingSystem``, ``tenancy``, ``preInstalledSw``, ``licenseModel``, ``capacitystatus``,
...) and ``terms.OnDemand.<sku>.<offer term>.priceDimensions.<rate code>`` carrying
``unit: "Hrs"`` and ``pricePerUnit.USD``. Filters follow GetProducts' filter types
(``TERM_MATCH``, ``EQUALS``, ``CONTAINS``, ``ANY_OF``, ``NONE_OF``); pages follow
``MaxResults`` (1-100) and ``NextToken``.

The service is registered with moto as ``moto.pricing`` by ``emulator.install``: moto then
routes it in process and in server mode like its own services, in the regions where AWS has
the API (botocore's endpoints: us-east-1, eu-central-1, ap-south-1). The catalogue is one per
account (AWS answers the same Price List at every endpoint).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from moto.core.base_backend import BackendDict, BaseBackend
from moto.core.exceptions import JsonRESTError

SERVICE_CODE = "AmazonEC2"
# The catalogue lives with the first endpoint; every endpoint answers from it.
HOME_REGION = "us-east-1"
# The On-Demand offer term and the hourly rate code the real Price List uses for EC2.
ON_DEMAND_TERM = "JRTCKXETXF"
HOURLY_RATE = "6YS6EN2CT7"
FILTER_TYPES = ("TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF")
# Region codes and the Price List's "location" names (the ones the demo and tests use; any
# other region keeps its code as location).
LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-1": "US West (N. California)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
    "ap-south-1": "Asia Pacific (Mumbai)",
}


class PriceListError(JsonRESTError):
    """A GetProducts error in the Price List's JSON protocol (HTTP 400)."""

    code = 400


@dataclass(frozen=True)
class Product:
    sku: str
    attributes: Mapping[str, str]
    price: Decimal
    family: str = "Compute Instance"

    def document(self) -> str:
        """The product as GetProducts returns it: a JSON document in a string."""
        dimension = f"{self.sku}.{ON_DEMAND_TERM}.{HOURLY_RATE}"
        return json.dumps(
            {
                "product": {
                    "productFamily": self.family,
                    "attributes": dict(self.attributes),
                    "sku": self.sku,
                },
                "serviceCode": SERVICE_CODE,
                "terms": {
                    "OnDemand": {
                        f"{self.sku}.{ON_DEMAND_TERM}": {
                            "offerTermCode": ON_DEMAND_TERM,
                            "sku": self.sku,
                            "priceDimensions": {
                                dimension: {
                                    "rateCode": dimension,
                                    "unit": "Hrs",
                                    "beginRange": "0",
                                    "endRange": "Inf",
                                    "description": f"${self.price} per On Demand "
                                    f"{self.attributes.get('operatingSystem')} "
                                    f"{self.attributes.get('instanceType')} Instance Hour",
                                    "appliesTo": [],
                                    "pricePerUnit": {"USD": f"{self.price:.10f}"},
                                }
                            },
                            "termAttributes": {},
                        }
                    }
                },
            }
        )

    def matches(self, kind: str, field_name: str, value: str) -> bool:
        have = self.attributes.get(field_name)
        if field_name == "ServiceCode":
            have = SERVICE_CODE
        if have is None:
            return kind == "NONE_OF"
        wanted = [v.strip() for v in value.split(",")] if kind in ("ANY_OF", "NONE_OF") else [value]
        if kind == "CONTAINS":
            return value.lower() in have.lower()
        if kind == "NONE_OF":
            return have.lower() not in {w.lower() for w in wanted}
        # TERM_MATCH, EQUALS, ANY_OF: the value itself (the Price List ignores case)
        return have.lower() in {w.lower() for w in wanted}


class PriceListBackend(BaseBackend):
    """The products of one account (kept on the home endpoint's backend)."""

    def __init__(self, region_name: str, account_id: str) -> None:
        super().__init__(region_name, account_id)
        self.products: list[Product] = []
        self._lock = threading.Lock()

    @property
    def _url_module(self) -> Any:  # moto derives it from the module name otherwise
        from ..responses import pricing

        return pricing

    def add_on_demand(
        self,
        instance_type: str,
        region: str,
        price: Decimal,
        operating_system: str = "Linux",
        tenancy: str = "Shared",
        pre_installed_software: str = "NA",
        license_model: str = "No License required",
    ) -> Product:
        attributes = {
            "servicecode": SERVICE_CODE,
            "instanceType": instance_type,
            "regionCode": region,
            "location": LOCATIONS.get(region, region),
            "operatingSystem": operating_system,
            "tenancy": tenancy,
            "preInstalledSw": pre_installed_software,
            "licenseModel": license_model,
            "capacitystatus": "Used",
            "operation": "RunInstances",
            "usagetype": f"BoxUsage:{instance_type}",
        }
        sku = hashlib.sha256(json.dumps(attributes, sort_keys=True).encode()).hexdigest()[:16]
        product = Product(sku=sku.upper(), attributes=attributes, price=price)
        with self._lock:
            self.products = [p for p in self.products if p.sku != product.sku] + [product]
        return product

    def get_products(
        self,
        service_code: str | None,
        filters: Sequence[Mapping[str, str]],
        max_results: int | None,
        next_token: str | None,
    ) -> tuple[list[str], str | None]:
        if service_code != SERVICE_CODE:
            raise PriceListError(
                "NotFoundException", f"The requested resource can't be found: {service_code}"
            )
        for item in filters:
            if item.get("Type") not in FILTER_TYPES:
                raise PriceListError(
                    "InvalidParameterException", f"Invalid filter type: {item.get('Type')}"
                )
        size = 100 if max_results is None else int(max_results)
        if not 1 <= size <= 100:
            raise PriceListError("InvalidParameterException", "MaxResults must be 1 to 100")
        with self._lock:
            found = [
                p
                for p in self.products
                if all(
                    p.matches(str(f.get("Type")), str(f.get("Field")), str(f.get("Value")))
                    for f in filters
                )
            ]
        start = 0
        if next_token:
            try:
                start = int(next_token)
            except ValueError:
                raise PriceListError(
                    "InvalidNextTokenException", "The pagination token is invalid."
                ) from None
        page = found[start : start + size]
        following = str(start + size) if start + size < len(found) else None
        return [p.document() for p in page], following


pricing_backends = BackendDict(PriceListBackend, "pricing")


def price_list(account_id: str) -> PriceListBackend:
    """The account's Price List (whichever endpoint is asked)."""
    return pricing_backends[account_id][HOME_REGION]
