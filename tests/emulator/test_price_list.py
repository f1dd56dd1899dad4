"""The Price List (``pricing:GetProducts``), which moto lacks: the scenario's On-Demand prices
in the Price List's own shape, its filters and pages, its errors and its endpoints."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

pytestmark = pytest.mark.emulator

ONE_TRY = Config(retries={"total_max_attempts": 1})
LINUX_ON_DEMAND = {
    "operatingSystem": "Linux",
    "preInstalledSw": "NA",
    "licenseModel": "No License required",
    "tenancy": "Shared",
    "capacitystatus": "Used",
}


def term(field: str, value: str, kind: str = "TERM_MATCH") -> dict[str, str]:
    return {"Type": kind, "Field": field, "Value": value}


@pytest.fixture
def pricing(emu: Any) -> Any:
    emu.load_scenario(
        {
            "regions": {
                "us-east-1": {
                    "on_demand_prices": [
                        {"instance_type": "g6.xlarge", "price": "0.8048"},
                        {
                            "instance_type": "g6.xlarge",
                            "price": "1.2",
                            "operating_system": "Windows",
                        },
                        {"instance_type": "m7i.large", "price": "0.1008"},
                    ]
                },
                "eu-west-1": {
                    "on_demand_prices": [{"instance_type": "g6.xlarge", "price": "0.88"}]
                },
            }
        }
    )
    return boto3.client("pricing", region_name="us-east-1", config=ONE_TRY)


def products(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(item) for item in answer["PriceList"]]


def test_a_product_in_the_price_lists_shape(pricing: Any) -> None:
    filters = [term("instanceType", "g6.xlarge"), term("regionCode", "us-east-1")] + [
        term(k, v) for k, v in LINUX_ON_DEMAND.items()
    ]
    answer = pricing.get_products(ServiceCode="AmazonEC2", Filters=filters, FormatVersion="aws_v1")
    assert answer["FormatVersion"] == "aws_v1"
    (product,) = products(answer)
    attributes = product["product"]["attributes"]
    assert (attributes["instanceType"], attributes["regionCode"]) == ("g6.xlarge", "us-east-1")
    assert attributes["location"] == "US East (N. Virginia)"
    assert product["serviceCode"] == "AmazonEC2"
    (offer,) = product["terms"]["OnDemand"].values()
    (dimension,) = offer["priceDimensions"].values()
    assert dimension["unit"] == "Hrs"
    assert float(dimension["pricePerUnit"]["USD"]) == pytest.approx(0.8048)


def test_filter_types(pricing: Any) -> None:
    def count(*filters: dict[str, str]) -> int:
        answer = pricing.get_products(ServiceCode="AmazonEC2", Filters=list(filters))
        return len(answer["PriceList"])

    assert count() == 4
    assert count(term("instanceType", "G6.XLARGE")) == 3  # values are not case-sensitive
    assert count(term("instanceType", "g6.xlarge", "EQUALS"), term("regionCode", "eu-west-1")) == 1
    assert count(term("location", "Ireland", "CONTAINS")) == 1
    assert count(term("operatingSystem", "Linux,Windows", "ANY_OF")) == 4
    assert count(term("operatingSystem", "Windows", "NONE_OF")) == 3
    assert count(term("instanceType", "p5.48xlarge")) == 0


def test_pages(pricing: Any) -> None:
    first = pricing.get_products(ServiceCode="AmazonEC2", MaxResults=3)
    assert len(first["PriceList"]) == 3
    rest = pricing.get_products(ServiceCode="AmazonEC2", MaxResults=3, NextToken=first["NextToken"])
    assert len(rest["PriceList"]) == 1
    assert "NextToken" not in rest
    skus = {p["product"]["sku"] for p in products(first) + products(rest)}
    assert len(skus) == 4
    with pytest.raises(ClientError) as raised:
        pricing.get_products(ServiceCode="AmazonEC2", NextToken="not-a-token")
    assert raised.value.response["Error"]["Code"] == "InvalidNextTokenException"


def test_errors_and_endpoints(pricing: Any) -> None:
    with pytest.raises(ClientError) as raised:
        pricing.get_products(ServiceCode="AmazonS3")
    assert raised.value.response["Error"]["Code"] == "NotFoundException"
    # The Price List Query API has endpoints in us-east-1, eu-central-1 and ap-south-1 only.
    frankfurt = boto3.client("pricing", region_name="eu-central-1", config=ONE_TRY)
    assert len(frankfurt.get_products(ServiceCode="AmazonEC2")["PriceList"]) == 4
    ireland = boto3.client("pricing", region_name="eu-west-1", config=ONE_TRY)
    with pytest.raises(EndpointConnectionError):
        ireland.get_products(ServiceCode="AmazonEC2")


def test_calls_are_logged_and_faults_apply(pricing: Any, emu: Any) -> None:
    emu.fail("GetProducts", "ThrottlingException", times=1, service="pricing")
    with pytest.raises(ClientError) as raised:
        pricing.get_products(ServiceCode="AmazonEC2")
    assert raised.value.response["Error"]["Code"] == "ThrottlingException"
    assert pricing.get_products(ServiceCode="AmazonEC2")["PriceList"]
    assert [c.outcome for c in emu.calls("GetProducts", service="pricing")] == [
        "ThrottlingException",
        "ok",
    ]


def test_an_empty_world_has_no_prices(emu: Any) -> None:
    client = boto3.client("pricing", region_name="us-east-1", config=ONE_TRY)
    assert client.get_products(ServiceCode="AmazonEC2")["PriceList"] == []
