"""The served emulator's dispatcher (``emulator.server._Dispatcher``): which of moto's services
serves a request is looked up once per host, and is moto's own answer. moto looks it up for
every request under one lock, listing its package's folders on disk each time; in a class of
200 that lock was where the state table's calls queued (issue 23)."""

from __future__ import annotations

from typing import Any

import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication

from emulator.server import _KEPT_HOSTS, _Dispatcher

TARGETS = {"dynamodb": "DynamoDB_20120810.UpdateItem", "ssm": "AmazonSSM.GetParametersByPath"}


def _environ(service: str, region: str = "us-east-1") -> dict[str, Any]:
    """A signed request's environ, as botocore sends it to an endpoint on loopback."""
    target = {"HTTP_X_AMZ_TARGET": TARGETS[service]} if service in TARGETS else {}
    return {
        **target,
        "PATH_INFO": "/",
        "REQUEST_METHOD": "POST",
        "HTTP_HOST": "127.0.0.1:5000",
        "CONTENT_TYPE": "application/x-amz-json-1.0",
        "CONTENT_LENGTH": "0",
        "HTTP_AUTHORIZATION": (
            f"AWS4-HMAC-SHA256 Credential=testing/20261128/{region}/{service}/aws4_request, "
            "SignedHeaders=host;x-amz-date, Signature=0"
        ),
    }


def test_a_host_s_service_is_looked_up_once_and_is_moto_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    looked: list[str | None] = []
    moto_lookup = DomainDispatcherApplication.get_backend_for_host

    def counted(self: Any, host: str | None) -> Any:
        looked.append(host)
        return moto_lookup(self, host)

    monkeypatch.setattr(DomainDispatcherApplication, "get_backend_for_host", counted)
    ours = _Dispatcher(lambda backend: ("app of", backend))
    motos = DomainDispatcherApplication(lambda backend: ("app of", backend))
    services = ("dynamodb", "ec2", "ssm")
    for service in services:
        assert ours.get_application(_environ(service)) == ("app of", service)
        assert motos.get_application(_environ(service)) == ("app of", service)
    # Again: ours looks nothing up (a loopback address names no service, the signature's
    # scope does: both looked up once already), moto's looks both up for every request.
    looked.clear()
    for service in services * 3:
        assert ours.get_application(_environ(service)) == ("app of", service)
    assert looked == []
    for service in services:
        motos.get_application(_environ(service))
    assert len(looked) == 2 * len(services)


def test_made_up_hosts_do_not_grow_what_it_keeps() -> None:
    """A host is made from what a request says (its signature's scope): requests naming
    made-up regions are answered as moto answers them, and what the dispatcher keeps stays
    bounded."""
    ours = _Dispatcher(lambda backend: ("app of", backend))
    for i in range(_KEPT_HOSTS + 50):
        assert ours.get_application(_environ("ec2", f"xx-made-up-{i}")) == ("app of", "ec2")
    assert len(ours._backends) == _KEPT_HOSTS
    assert ours.get_application(_environ("dynamodb")) == ("app of", "dynamodb")
