"""``pricing:GetProducts`` (AWS Price List Query API, JSON 1.1 protocol, target
``AWSPriceListService``), in moto's response style; ``url_bases``/``url_paths`` are what moto
reads to route the service (``emulator.models.pricing`` says how it is registered)."""

from __future__ import annotations

import json

from moto.core.responses import BaseResponse

from ..models.pricing import price_list

# botocore's endpoint is api.pricing.<region>.amazonaws.com; moto's server finds a signed
# request's service by host "pricing.<region>.amazonaws.com".
url_bases = [r"https?://(?:api\.)?pricing\.(.+)\.amazonaws\.com"]


class PriceListResponse(BaseResponse):
    def __init__(self) -> None:
        super().__init__(service_name="pricing")

    def get_products(self) -> str:
        params = json.loads(self.body or "{}")
        products, token = price_list(self.current_account).get_products(
            params.get("ServiceCode"),
            params.get("Filters") or [],
            params.get("MaxResults"),
            params.get("NextToken"),
        )
        answer: dict[str, object] = {
            "FormatVersion": params.get("FormatVersion") or "aws_v1",
            "PriceList": products,
        }
        if token:
            answer["NextToken"] = token
        return json.dumps(answer)


url_paths = {"{0}/$": PriceListResponse.dispatch}
