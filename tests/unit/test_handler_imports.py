"""What a handler's cold import leaves out (issue 44): modules and models its invocations never
use, or use only for a Capacity Block. Each import runs in a fresh interpreter (this process
has imported everything).

Structural, not timed: the cost itself is a bench row (``python -m bench --only imports``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HANDLERS = ("probe", "reserve", "release", "cleaner", "capacity")

# Imported by no handler: the discovery commands' answers and the history are the client's
# and the CLI's; the error answers (``models.invalid``) are imported on the first bad request
# or bad settings, not at import.
NEVER = (
    "capacity_broker.models.discovery",
    "capacity_broker.models.history",
    "capacity_broker.models.invalid",
)
# Imported by no handler at import: the rules of Capacity Blocks, which a probe and a release
# never use, and a reserve or a sweep only for a block (the capacity flow imports them).
BLOCKS = ("capacity_broker.domain.blocks", "capacity_broker.domain.discovery")
UNBUILT = ("ErrorResponse", "InvalidRequestResponse", "FieldError")
# Records (dataclasses) no handler's invocation makes: the history's lines (``capacity-broker
# history``), a future-dated reservation (``capacity-broker ahead``), an Availability Zone
# (``capacity-broker az``); each is made at import
# of the module it lives in, so it lives apart from what the handlers load.
NEVER_MADE = ("HistoryLine", "FutureReservation", "Zone")
# The cleaner's graces: every handler's settings default to the contract's (``domain.graces``),
# only the cleaner makes them (``Settings.graces``).
CLEANER_MADE = ("Graces",)
# boto3 (and the s3transfer and multiprocessing it loads): the broker makes its clients from
# botocore's session. Only the reserve's import loads it, through Powertools' idempotency.
BOTO3 = ("boto3", "s3transfer", "multiprocessing")

# Per handler: what its invocations never use. The blocks' and discovery rules are for a
# Capacity Block (a reserve's or a pool's, the cleaner's, the listing's: the capacity handler
# imports them on its first invocation, with its flow); probe's models are probe's; the cleaner's
# records are the cleaner's (every handler's settings carry only its graces); the answers' UTC
# instant (and the part of pydantic its serializer loads) is for answers that carry dates. The
# capacity memory is probe's and reserve's; the rules of grouped probes are probe's; launch
# templates and launches (``adapters.ec2.launches``) are reserve's, release's and the cleaner's;
# the pool's rules (``domain.pool``) are reserve's and the cleaner's, a probe's and a release's
# only when the deployment names a pool (the reservation core spares it), never the listing's;
# the reserve's rules (``domain.reserve``) are reserve's (the cleaner deletes the template
# versions a reserve made, and never makes one).
MEMORY = (
    "capacity_broker.domain.memory",
    "capacity_broker.logic.memory",
    "capacity_broker.adapters.dynamodb_memory",
)
GROUPS = "capacity_broker.domain.group"
LAUNCHES = "capacity_broker.adapters.ec2.launches"
POOL = "capacity_broker.domain.pool"
# The per-item error of the answers that list failures (release's, the cleaner's, the listing's):
# probe's and reserve's answers carry none.
ITEM_ERROR = "capacity_broker.models.item_error"
ITEM_ERROR_MODEL = "ItemError"
# What a launch asks and answers (``adapters.ec2.fleets``): only reserve launches; release and
# the cleaner use ``Launches`` for template versions.
FLEETS = ("FleetError", "FleetResult", "LaunchSpec")
NOT_FOR = {
    "probe": (
        ITEM_ERROR,
        LAUNCHES,
        POOL,
        "capacity_broker.domain.blocks",
        "capacity_broker.domain.discovery",
        "capacity_broker.domain.cleaner",
        "capacity_broker.models.times",
        "pydantic.functional_serializers",
    ),
    "reserve": (
        "capacity_broker.models.probe",
        "capacity_broker.domain.cleaner",
        ITEM_ERROR,
        GROUPS,
    ),
    "release": (
        POOL,
        "capacity_broker.domain.blocks",
        "capacity_broker.domain.discovery",
        "capacity_broker.domain.cleaner",
        "capacity_broker.models.placement",
        "capacity_broker.models.times",
        "pydantic.functional_serializers",
        *MEMORY,
        GROUPS,
    ),
    "cleaner": (
        "capacity_broker.domain.reserve",
        "capacity_broker.models.placement",
        "capacity_broker.models.times",
        "pydantic.functional_serializers",
        *MEMORY,
        GROUPS,
    ),
    "capacity": (
        LAUNCHES,
        POOL,
        "capacity_broker.domain.cleaner",
        "capacity_broker.models.placement",
        *MEMORY,
        GROUPS,
    ),
}


# The broker's records and models made in a process: the dataclasses and pydantic models its
# loaded modules define (``records``).
_MADE = (
    "records = sorted({c.__name__ for n, m in list(sys.modules.items())\n"
    "    if n.startswith('capacity_broker') for c in vars(m).values()\n"
    "    if isinstance(c, type) and c.__module__ == n\n"
    "    and ('__dataclass_fields__' in vars(c) or '__pydantic_fields__' in vars(c))})"
)


def _imported(handler: str) -> dict[str, object]:
    code = (
        "import json, sys\n"
        f"import capacity_broker.handlers.{handler}\n"
        "invalid = sys.modules.get('capacity_broker.models.invalid')\n"
        "built = {n: getattr(invalid, n).__pydantic_complete__ for n in "
        f"{UNBUILT!r}}} if invalid else {{}}\n"
        "from pydantic import BaseModel\n"
        "def models(cls):\n"
        "    for sub in cls.__subclasses__():\n"
        "        yield sub\n"
        "        yield from models(sub)\n"
        "listed = sorted({f'{m.__name__}.{name}' for m in models(BaseModel)\n"
        "    if m.__module__.startswith('capacity_broker') and m.__pydantic_complete__\n"
        "    for name, info in m.model_fields.items() if info.default_factory is list})\n"
        f"{_MADE}\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'built': built, 'listed': listed,\n"
        "    'records': records}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    found: dict[str, object] = json.loads(done.stdout)
    return found


@pytest.mark.parametrize("handler", HANDLERS)
def test_a_handler_imports_only_what_its_invocations_use(handler: str) -> None:
    found = _imported(handler)
    modules = set(found["modules"])  # type: ignore[arg-type]
    assert f"capacity_broker.handlers.{handler}" in modules
    assert sorted(modules & {*NEVER, *BLOCKS, *NOT_FOR[handler]}) == []
    if handler != "reserve":
        assert sorted(modules & set(BOTO3)) == []
    made = set(found["records"])  # type: ignore[arg-type]
    assert sorted(made & {*NEVER_MADE, *(CLEANER_MADE if handler != "cleaner" else ())}) == []
    if handler in ("probe", "reserve"):
        assert ITEM_ERROR_MODEL not in made
    if handler != "reserve":
        assert sorted(made & set(FLEETS)) == []
    assert found["built"] == {}  # not even made: ``models.invalid`` is not imported


@pytest.mark.parametrize("handler", HANDLERS)
def test_no_model_a_handler_builds_has_list_as_its_default_factory(handler: str) -> None:
    """``models.common.empty_list`` instead: pydantic reads a default factory's signature, and
    ``list``'s is parsed with ``tokenize``, which compiles its patterns (~2 ms of a cold
    import)."""
    assert _imported(handler)["listed"] == []


def _loads(code: str) -> list[str]:
    """The broker's modules loaded in a fresh interpreter by ``code``, and the records and
    models they made."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import json, sys\n{code}\n{_MADE}\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('capacity_broker'))\n"
            "    + records))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


# What a module shared by several entry points loads only for one of them (their first
# invocations, not their imports: ``Root`` and the flows import on first use).
SHARED = {
    # Only reserve makes a template version (``Templates.make``); release and the cleaner
    # only delete them, and only they answer what a deletion left (``ItemError``).
    "import capacity_broker.logic.templates": ("capacity_broker.domain.reserve", ITEM_ERROR_MODEL),
    # Probe's and reserve's flows answer with ``failed`` and ``step``, never ``item_error``.
    "import capacity_broker.logic.failures": (ITEM_ERROR_MODEL,),
    "import capacity_broker.adapters.ec2.launches": FLEETS,
    # Only reserve reads a template version for its platform (``from_template``).
    "import capacity_broker.logic.placement": ("capacity_broker.domain.templates",),
    # Only a probe groups: another entry's first clients leave the grouped probes' modules out.
    "from capacity_broker.config import Settings\n"
    "from capacity_broker.root import Root\n"
    "root = Root(Settings(cluster_id='c', region='us-east-1'))\n"
    "for entry in ('reserve', 'release', 'cleaner', 'capacity'):\n"
    "    root.first_clients(entry)": ("capacity_broker.logic.grouping",),
}


@pytest.mark.parametrize("code", SHARED)
def test_a_shared_module_loads_another_entrys_code_only_for_it(code: str) -> None:
    assert sorted(set(SHARED[code]) & set(_loads(code))) == []
