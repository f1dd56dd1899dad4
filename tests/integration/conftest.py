"""The broker's handlers against the in-process emulator."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from capacity_broker.adapters.aws import RetryPolicy
from capacity_broker.config import Settings
from capacity_broker.handlers._runtime import CONTAINER
from capacity_broker.root import Root

CLUSTER = "demo-cluster"
# The core scenarios and the fault matrix run twice: on EC2's usual timings and on the slow
# preset, EC2's documented worst cases on the emulator's clock (emulator/presets.py); the
# preset is in the test id ("[slow]").
ON_BOTH_PRESETS = frozenset(
    {
        "test_probe",
        "test_reserve",
        "test_release",
        "test_cleaner",
        "test_truth",
        "test_fault_matrix",
    }
)


# Where the broker fails on the slow preset (issue 21): strict xfails, one reason per finding,
# so each shows in every run until the broker copes (and a fix turns it into a failure to
# remove here). Keyed by "file::test" and, for a parametrized test, a part of its id.
SLOW_PRESET_FINDINGS: dict[tuple[str, str], str] = {}
# Persistent faults the slow preset found the broker failing in, fixed since: they run on it
# too, so the fix stays proven (the other persistent faults run on the default only).
SLOW_PRESET_FIXED = frozenset(
    {("test_fault_matrix.py::test_fault", "reserve+provision-CreateFleet-timeout-persistent")}
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if Path(str(metafunc.module.__file__)).stem in ON_BOTH_PRESETS:
        metafunc.parametrize("ec2_preset", ["default", "slow"], indirect=True)


def _slow(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("ec2_preset") == "slow"


def _is(item: pytest.Item, where: str, part: str) -> bool:
    test = f"{Path(str(item.fspath)).name}::{item.originalname}"  # type: ignore[attr-defined]
    return where == test and part in item.name


def _finding(item: pytest.Item) -> str | None:
    for (where, part), reason in SLOW_PRESET_FINDINGS.items():
        if _is(item, where, part):
            return reason
    return None


def _default_only(item: pytest.Item) -> bool:
    """The fault matrix's persistent faults run on the default timings only: a fault on every
    call outlasts any lag, so the slow preset adds time (persistent throttles retry for tens
    of seconds) and nothing else; its transient faults, lag kind included, run on both (and
    so does a persistent one where the slow preset found something, or did)."""
    return (
        item.name.startswith("test_fault[")
        and "-persistent-" in item.name
        and _finding(item) is None
        and not any(_is(item, where, part) for where, part in SLOW_PRESET_FIXED)
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    deselected = [i for i in items if _slow(i) and _default_only(i)]
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = [i for i in items if i not in deselected]
    for item in items:
        reason = _finding(item) if _slow(item) else None
        if reason is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=reason))


class ParsedModels:
    """botocore's data loader, one per test process, for every boto3 session an integration
    test makes (the roots', the emulator's, the clients the test reads with).

    A new session parses EC2's service model (megabytes of JSON) and the endpoint rules again,
    about 0.2 s of CPU, and nearly every test here builds a root or two with a session of its
    own: that parse was a quarter of the fault matrix's time. Only the parsed files are shared
    (botocore treats them as read-only: every client of one session shares them already); each
    session keeps its own events, credentials and clients, so no test's hooks or state reach
    another. One loader per data path: the sessions ``Clients`` makes name the broker's
    trimmed EC2 model as theirs (``adapters.aws.BOTOCORE_DATA``), the others load botocore's
    whole models. Other tests keep cold loaders (the unit tests test what a cold session
    reads)."""

    def __init__(self) -> None:
        from botocore.loaders import create_loader

        self._create = create_loader
        self._loaders: dict[str | None, Any] = {}

    def loader(self, search_path_string: str | None = None) -> Any:
        """The loader of that AWS_DATA_PATH (botocore's ``create_loader`` signature)."""
        found = self._loaders.get(search_path_string)
        if found is None:
            found = self._loaders[search_path_string] = self._create(search_path_string)
        return found

    def tidy(self) -> None:
        """Each boto3 session adds its own data directory to its loader's search path: once
        is enough (the list would otherwise grow by one per session made)."""
        for found in self._loaders.values():
            found.search_paths[:] = list(dict.fromkeys(found.search_paths))


PARSED_MODELS = ParsedModels()


@pytest.fixture(autouse=True)
def _parsed_models_shared(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Sessions made in an integration test parse no service model another test's session
    parsed (``ParsedModels``). (It once leaked a stopped local broker's endpoint into later
    tests: not the shared models but the ``monkeypatch`` it sets up before a test's own
    fixtures; ``_environment_restored`` in tests/conftest.py says how.)"""
    import botocore.session

    monkeypatch.setattr(botocore.session, "create_loader", PARSED_MODELS.loader)
    yield
    PARSED_MODELS.tidy()


@pytest.fixture(autouse=True)
def ec2_preset(request: pytest.FixtureRequest) -> Iterator[str]:
    """EC2's timings for this test (``emulator.presets``), kept by every emulator reset in it;
    a scenario's own settings and ``emu.configure`` refine them."""
    from emulator.state import world

    name = getattr(request, "param", "default")
    world.use_preset(name)
    yield name
    world.use_preset("default")


@dataclass
class LambdaContext:
    """Enough of Lambda's context object for the handlers."""

    function_name: str = "capacity-broker-test"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = (
        "arn:aws:lambda:us-east-1:123456789012:function:capacity-broker-test"
    )
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    remaining_ms: int = 30_000
    log_group_name: str = "/aws/lambda/test"
    log_stream_name: str = "test"
    extra: dict[str, Any] = field(default_factory=dict)

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.fixture(autouse=True)
def _only_documented_calls(request: pytest.FixtureRequest) -> Iterator[None]:
    """Realism by construction: every filter name, enum value and parameter sent to the EC2
    emulator in this test is one botocore's EC2 model documents for its operation. The
    emulator records each undocumented use (``emulator.documented.heard``), refused or not, so
    a refusal the broker swallowed (``except AwsError: continue``) still fails the test. A test
    that sends one on purpose says so: ``@pytest.mark.undocumented(operation, reason)``."""
    from emulator import documented

    on_purpose = {m.args[0] for m in request.node.iter_markers("undocumented")}
    documented.heard.take()
    yield
    undocumented = sorted(
        {
            (f.operation, f.kind, f.name, f.value or "")
            for f in documented.heard.take()
            if f.operation not in on_purpose
        }
    )
    if undocumented:
        pytest.fail(
            "sent to EC2 but not documented by botocore's model for the operation "
            "(emulator.documented): "
            + "; ".join(
                f"{op} {kind} {name!r}" + (f" = {value!r}" if value else "")
                for op, kind, name, value in undocumented
            )
        )


@pytest.fixture
def context() -> LambdaContext:
    return LambdaContext()


class Container:
    """The Lambda container the handlers run in, in a test (``CONTAINER``). Fresh, its root is
    built from the test's environment on the first invocation, as a new Lambda container
    builds it; ``build`` makes one now with the test's own clocks, sleep, retry policy or
    pacer. Either way the handlers serve from that root until the test ends."""

    def __init__(self) -> None:
        self.knobs: dict[str, Any] = {}

    @property
    def root(self) -> Root:
        """The root the handlers run on (built now from the environment if not yet)."""
        return CONTAINER.root()

    def fresh(self) -> None:
        """A new container: its root is built from the environment on first use."""
        self.close()
        self.knobs = {}

    def build(self, **knobs: Any) -> Root:
        self.close()
        self.knobs = knobs
        root = Root(Settings.from_env(os.environ), **knobs)
        CONTAINER.use(root)
        return root

    def rebuild(self, **more: Any) -> None:
        """A new container after the test changed a variable, with the knobs of the last
        ``build`` (and ``more``)."""
        knobs = self.knobs | more
        if knobs:
            self.build(**knobs)
        else:
            self.fresh()

    def close(self) -> None:
        previous = CONTAINER.use(None)
        if previous is not None:
            previous.close()


@pytest.fixture
def container() -> Iterator[Container]:
    built = Container()
    yield built
    built.close()


@pytest.fixture
def broker(emu: Any, monkeypatch: pytest.MonkeyPatch, container: Container) -> Iterator[Any]:
    """The emulator plus a broker configured for CLUSTER, on a root of its own."""
    monkeypatch.setenv("BROKER_CLUSTER_ID", CLUSTER)
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CapacityBroker")
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    monkeypatch.delenv("BROKER_PARAMETER_PREFIX", raising=False)
    monkeypatch.delenv("BROKER_REGIONS", raising=False)
    container.fresh()
    yield emu
    container.close()


@dataclass(frozen=True)
class PausedRetry(RetryPolicy):
    """The broker's RetryPolicy (its pauses, its tries), pausing on a test's clock instead of
    the machine's."""

    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def run(self, operation: str, fn: Any, deadline: Any = None, *_: Any, **__: Any) -> Any:
        return super().run(operation, fn, deadline, self.sleep, self.clock, self.rng)


class EmulatedTime:
    """The broker on the emulator's clock: every clock the broker reads (its deadlines, the
    retry policy's and the reservation core's pauses, the pacer, the fan-out's waits) is the
    emulator's, frozen, and a sleep moves it on at once. A test then spends a Lambda's whole
    budget, or EC2's throttling of it, in milliseconds, and its verdict does not depend on how
    fast the machine is. EC2's eventual consistency settles by the same clock (``lag_seconds``),
    and its request buckets refill by it (``emu.throttle(emulator_clock=True)``, at EC2's
    published sizes).

    Threads that sleep at the same time move the clock by the sum of their sleeps, so time runs
    faster than it would, never slower: a test that must finish inside its budget keeps the
    fan-out to one create at a time (``max_concurrency``) or its budget generous.

    ``install`` builds the handlers' root on it (the handlers' parsing and answers stay the
    real ones): the root's clocks and sleep are the emulator's, its retry policy the broker's
    own RetryPolicy (0.2 s doubling to 5 s, 10 tries; its jitter seeded) pausing on that
    clock, and its pacer a fresh one at EC2's published buckets (``scale`` as
    BROKER_EC2_RATE_SCALE) on that clock."""

    def __init__(self, emu: Any, container: Container | None, seed: int = 23) -> None:
        self.emu = emu
        self.container = container
        self.rng = random.Random(seed)
        emu.freeze()

    def monotonic(self) -> float:
        return float(self.emu.now().timestamp())

    def paused(self, policy: RetryPolicy) -> PausedRetry:
        """``policy`` (its pauses, its tries), pausing on this clock."""
        return PausedRetry(
            base=policy.base,
            cap=policy.cap,
            max_attempts=policy.max_attempts,
            sleep=self.sleep,
            clock=self.monotonic,
            rng=self.rng,
        )

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.emu.advance(seconds)

    def utcnow(self) -> Any:
        return self.emu.now()

    def pause(self, seconds: float) -> None:
        """A short wait in real time that leaves the emulator's clock alone: a probe group's
        meeting pauses so while the verdicts (its window, a member's give-up) follow that
        clock, which the test moves. (``sleep`` moves the clock itself: a leader waiting out
        its window that way would close it before the others' threads have arrived.)"""
        threading.Event().wait(min(0.02, max(0.0, seconds)))

    def serve(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The root the handlers build from the environment on their first invocation (as a
        fresh container does: a variable the test sets before it is read) is on this clock, as
        ``install``'s is; its pacer at the settings' rate scale. A root the test builds itself
        (``container.build``) is what the test makes it."""
        from capacity_broker.adapters.throttle import Pacer
        from capacity_broker.handlers import _runtime

        self.emu.freeze()
        self.emu.throttle(emulator_clock=True)

        def on_this_clock(settings: Settings) -> Root:
            return Root(
                settings,
                clock=self.utcnow,
                monotonic=self.monotonic,
                sleep=self.sleep,
                retry=self.paused(RetryPolicy()),
                pacer=Pacer(scale=settings.ec2_rate_scale, clock=self.monotonic, sleep=self.sleep),
            )

        monkeypatch.setattr(_runtime, "Root", on_this_clock)

    def install(
        self,
        monkeypatch: pytest.MonkeyPatch,
        max_concurrency: int | None = None,
        scale: float = 1,
    ) -> Root:
        """A new root for the handlers on the emulator's clock (see the class); the root."""
        from capacity_broker.adapters.throttle import Pacer

        self.emu.freeze()  # (again: an emulator reset thaws it)
        self.emu.throttle(emulator_clock=True)
        if max_concurrency is not None:
            monkeypatch.setenv("BROKER_MAX_CONCURRENCY", str(max_concurrency))
        if self.container is None:
            raise ValueError("this clock was made without a container to install a root in")
        return self.container.build(
            clock=self.utcnow,
            monotonic=self.monotonic,
            sleep=self.sleep,
            retry=self.paused(RetryPolicy()),
            pacer=Pacer(scale=scale, clock=self.monotonic, sleep=self.sleep),
        )


@pytest.fixture
def clock_of() -> Callable[[Any], EmulatedTime]:
    """``clock_of(emu)``: ``EmulatedTime`` over an emulator, for a test that builds its root
    itself (its ``monotonic``, ``sleep`` and ``paused(policy)``; no ``install``)."""

    def on(emu: Any) -> EmulatedTime:
        return EmulatedTime(emu, None)

    return on


@pytest.fixture
def emulated_time(broker: Any, container: Container) -> EmulatedTime:
    """``EmulatedTime`` over the test's emulator (call ``install`` once the world is loaded)."""
    return EmulatedTime(broker, container)


@pytest.fixture
def waits_on_emulated_time(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """For a module's ``usefixtures``: a test with the ``broker`` has the handlers' root on the
    emulator's clock (``EmulatedTime.serve``), so the broker's waits (a pending hold before
    its cancel, a retry's pause, EC2 catching up) are EC2's time, not the test's: on the slow
    preset, minutes of it. A test that asks for ``emulated_time`` itself, or builds its root
    itself, says how it runs."""
    if "broker" in request.fixturenames and "emulated_time" not in request.fixturenames:
        request.getfixturevalue("emulated_time").serve(monkeypatch)


@pytest.fixture
def profile_template() -> Any:
    """``profile_template(ec2, iam, cluster_id)``: an instance profile (its role
    ``compute-node``) and a launch template of that cluster whose instances get it; answers
    (role ARN, template id). The clients say which world (in process, a local broker)."""

    def make(ec2: Any, iam: Any, cluster_id: str) -> tuple[str, str]:
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "ec2.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        role = iam.create_role(RoleName="compute-node", AssumeRolePolicyDocument=json.dumps(trust))
        profile = iam.create_instance_profile(InstanceProfileName="compute-node")
        iam.add_role_to_instance_profile(
            InstanceProfileName="compute-node", RoleName="compute-node"
        )
        made = ec2.create_launch_template(
            LaunchTemplateName="with-profile",
            LaunchTemplateData={
                "ImageId": "ami-0de00000000000001",
                "InstanceType": "c7i.48xlarge",
                "IamInstanceProfile": {"Arn": profile["InstanceProfile"]["Arn"]},
            },
            TagSpecifications=[
                {
                    "ResourceType": "launch-template",
                    "Tags": [{"Key": "capacity-broker:cluster-id", "Value": cluster_id}],
                }
            ],
        )
        return role["Role"]["Arn"], made["LaunchTemplate"]["LaunchTemplateId"]

    return make


Watched = tuple[Any, str]  # an object and the name of its method


@pytest.fixture
def side_by_side(monkeypatch: pytest.MonkeyPatch) -> Callable[[Watched, Watched], dict[str, bool]]:
    """Whether two calls of a flow run beside each other, not one after the other: once called,
    each waits to see the other called too (a flow that made them in a row would never see both
    under way; the 60 s only guard a hang). Give it the two methods, run the flow, then read
    what each saw: ``{"subnets saw read": True, "read saw subnets": True}``."""

    def watch(first: Watched, second: Watched) -> dict[str, bool]:
        seen: dict[str, bool] = {}
        called = {first[1]: threading.Event(), second[1]: threading.Event()}
        for (owner, name), (_, other) in ((first, second), (second, first)):
            real = getattr(owner, name)

            def waiting(
                *args: Any, _real: Any = real, _name: str = name, _other: str = other, **kwargs: Any
            ) -> Any:
                called[_name].set()
                seen[f"{_name} saw {_other}"] = called[_other].wait(60)
                return _real(*args, **kwargs)

            monkeypatch.setattr(owner, name, waiting)
        return seen

    return watch
