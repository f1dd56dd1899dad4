"""Launch template versions as EC2 keeps them: numbered for good, deletable, limited.

moto keeps a template's versions in a list whose position is the version number and has no
DeleteLaunchTemplateVersions. EC2 numbers versions "in the order in which they are created"
and never reuses a number: a template whose versions were deleted goes on counting (its
console shows e.g. "Version count 793" beside two live versions). So a deleted version stays
in moto's list as a tombstone, kept beside the template, and every look-up the emulator
serves goes through here. ``$Latest`` is the newest live version.

Limits (EC2 User Guide, "Restrictions for Amazon EC2 launch templates"): 10,000 versions per
launch template (``Settings.launch_template_version_limit``; deleted versions do not count),
and at most 200 versions per DeleteLaunchTemplateVersions request (API reference).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from moto.ec2.exceptions import InvalidLaunchTemplateVersionNotFound

from ..exceptions import client_error
from ..state import world
from . import filters

DELETE_BATCH = 200


def deleted(template: Any) -> set[int]:
    """The numbers of this template's deleted versions (kept on moto's template object)."""
    found: set[int] | None = template.__dict__.get("_deleted_versions")
    if found is None:
        found = template.__dict__["_deleted_versions"] = set()
    return found


def live(template: Any) -> list[Any]:
    gone = deleted(template)
    return [v for v in template.versions if v.number not in gone]


def latest(template: Any) -> Any:
    """``$Latest``: the newest version that still exists (the default one at least)."""
    return live(template)[-1]


def version(template: Any, spec: Any) -> Any:
    """The version ``spec`` names ("$Latest", "$Default" or a number), strictly: "abc", "0",
    "-1" and deleted versions name nothing (moto would index from the end or raise a
    ValueError)."""
    text = str(spec)
    if text.lower() == "$latest":
        return latest(template)
    if text.lower() == "$default":
        return template.default_version()
    if not (text.isdigit() and 1 <= int(text) <= len(template.versions)):
        raise InvalidLaunchTemplateVersionNotFound(text, template.id)
    if int(text) in deleted(template):
        raise InvalidLaunchTemplateVersionNotFound(text, template.id)
    return template.versions[int(text) - 1]


def check_room(template: Any) -> None:
    """A new version needs room under the per-template version limit."""
    limit = world.settings.launch_template_version_limit
    if limit is not None and len(live(template)) >= limit:
        # EC2's error table: "MaxTemplateVersionLimitExceeded: You've reached the limit on
        # the number of launch template versions that you can create" (the emulator used to
        # answer the generic ResourceLimitExceeded).
        raise client_error(
            "MaxTemplateVersionLimitExceeded",
            f"Launch template {template.id} already has {limit} versions, the maximum. "
            "Delete versions you no longer need and try again.",
        )


def delete_versions(template: Any, numbers: list[str]) -> tuple[list[int], list[tuple[str, str]]]:
    """Delete versions: (deleted numbers, [(version, error code)]) as EC2 reports them.

    The default version is never deleted (DeleteLaunchTemplateVersions: "You can't delete the
    default version of a launch template"); a version that does not exist (or is gone
    already) is ``launchTemplateVersionDoesNotExist``. Each version succeeds or fails on its
    own: one refusal does not stop the others.
    """
    if not numbers:
        raise client_error("MissingParameter", "The request must contain the parameter Versions")
    if len(numbers) > DELETE_BATCH:
        raise client_error(
            "InvalidParameterValue",
            f"You can specify up to {DELETE_BATCH} launch template versions in one request "
            f"({len(numbers)} given).",
        )
    done: list[int] = []
    failed: list[tuple[str, str]] = []
    gone = deleted(template)
    with world.lock:
        for text in numbers:
            if not (text.isdigit() and 1 <= int(text) <= len(template.versions)):
                failed.append((text, "launchTemplateVersionDoesNotExist"))
            elif int(text) == template.default_version_number:
                failed.append((text, "unexpectedError"))
            elif int(text) in gone:
                failed.append((text, "launchTemplateVersionDoesNotExist"))
            else:
                gone.add(int(text))
                done.append(int(text))
    return done, failed


# -- DescribeLaunchTemplateVersions' filters ------------------------------------------------
# Every filter botocore's model documents for DescribeLaunchTemplateVersions, each read from
# the version's LaunchTemplateData as the documentation describes it ("is-default-version - A
# boolean that indicates whether the launch template version is the default version", ...). A
# name it does not document is refused before this (``emulator.documented``), so none is
# ever silently ignored. A version matches a filter when one of its values matches one of the
# filter's; it must match every filter ("Filter", EC2 API Reference).


def _metadata(key: str) -> Any:
    return lambda _t, v: [(v.data.get("MetadataOptions") or {}).get(key)]


def _each(items: str, key: str) -> Any:
    return lambda _t, v: [item.get(key) for item in v.data.get(items) or [] if item]


VERSION_FILTERS: dict[str, Any] = {
    "create-time": lambda _t, v: [v.create_time],
    "ebs-optimized": lambda _t, v: [v.data.get("EbsOptimized")],
    "host-resource-group-arn": lambda _t, v: [
        (v.data.get("Placement") or {}).get("HostResourceGroupArn")
    ],
    "http-endpoint": _metadata("HttpEndpoint"),
    # No request sets the IPv4 endpoint (LaunchTemplateInstanceMetadataOptionsRequest has
    # HttpProtocolIpv6 only): it is on unless the whole endpoint is off ("HttpEndpoint ... If
    # you specify a value of disabled, you will not be able to access your instance
    # metadata", the same shape's documentation).
    "http-protocol-ipv4": lambda _t, v: [
        "disabled"
        if (v.data.get("MetadataOptions") or {}).get("HttpEndpoint") == "disabled"
        else "enabled"
    ],
    "http-tokens": _metadata("HttpTokens"),
    "iam-instance-profile": lambda _t, v: [(v.data.get("IamInstanceProfile") or {}).get("Arn")],
    "image-id": lambda _t, v: [v.data.get("ImageId")],
    "instance-type": lambda _t, v: [v.data.get("InstanceType")],
    "is-default-version": lambda t, v: [t.is_default(v)],
    "kernel-id": lambda _t, v: [v.data.get("KernelId")],
    "license-configuration-arn": _each("LicenseSpecifications", "LicenseConfigurationArn"),
    "network-card-index": _each("NetworkInterfaces", "NetworkCardIndex"),
    "ram-disk-id": lambda _t, v: [v.data.get("RamDiskId")],
}


def _as_text(value: Any) -> str:
    """A value as EC2's XML writes it, which is what a filter's value is compared with."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return str(value)


def matches_filters(template: Any, version: Any, wanted: dict[str, list[str]]) -> bool:
    """Whether ``version`` of ``template`` matches every filter in ``wanted``."""
    for name, values in wanted.items():
        read = VERSION_FILTERS.get(name)
        if read is None:
            raise client_error("InvalidParameterValue", f"The filter '{name}' is invalid")
        found = [_as_text(value) for value in read(template, version) if value is not None]
        if not any(filters.matches(values, text) for text in found):
            return False
    return True
