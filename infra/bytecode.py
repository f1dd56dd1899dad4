"""The code asset's bytecode: compiled at synth by CPython 3.14, the functions' runtime.

Lambda's code directory (/var/task) is read-only, so a package shipped without `__pycache__`
is compiled again in every new execution environment (docs/performance.md: the probe's own
import costs 142 ms of CPU from sources against 62 ms with bytecode). The asset is therefore
bundled: the sources of `functions/` (without `ASSET_EXCLUDE`) are copied into the bundle and
compiled there by a Python whose `.pyc` magic number is CPython 3.14's, the one the Lambda
runtime accepts. The sources stay in the asset (tracebacks show their lines).

`--invalidation-mode unchecked-hash` (PEP 552): a timestamp `.pyc` records its source's
mtime and size, and the importer revalidates it against the source's `stat()`; the asset's
zip gives every file one fixed date, so the recorded mtime would never match and Python would
recompile (and fail to write) at every cold start. A checked-hash `.pyc` would be valid, but
the importer reads and hashes the source of each module at every import. An unchecked-hash
`.pyc` is used as it is: the asset is immutable and its bytecode is compiled from the very
sources beside it, so nothing can make them disagree.

Where the compiler comes from, first found wins:

1. `CAPACITY_BROKER_PYTHON314`: a CPython 3.14 interpreter (a path, or a name on PATH).
2. `python3.14` on PATH.
3. Pyodide (CPython 3.14 built for WebAssembly), pinned in package.json and installed by
   `npm ci`, run by node: no native Python 3.14 needed.
4. Docker (or `CDK_DOCKER`): `Runtime.PYTHON_3_14.bundling_image`, the runtime's build image.

Whichever compiled it, the bundle is checked: every module has its
`__pycache__/<name>.cpython-314.pyc`, with CPython 3.14's magic number and the
unchecked-hash flags. The bytecode is the same byte for byte from any of them (co_filename
is the path under /var/task, not the build directory's).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import jsii
from aws_cdk import BundlingOptions, DockerImage, ILocalBundling

REPO_ROOT = Path(__file__).resolve().parent.parent
PYODIDE_RUNNER = Path(__file__).resolve().parent / "pyodide_compileall.mjs"
PYODIDE_PACKAGE = REPO_ROOT / "node_modules" / "pyodide" / "package.json"

# CPython 3.14's magic number (3627, from 3.14rc3 on: Include/internal/pycore_magic_number.h),
# little-endian, then b"\r\n". A bugfix release keeps its minor version's number.
PYTHON_314_MAGIC = (3627).to_bytes(2, "little") + b"\r\n"
CACHE_TAG = "cpython-314"
# PEP 552's flags word: bit 0 = hash-based, bit 1 = check the source. 0b01: unchecked hash.
UNCHECKED_HASH_FLAGS = 0b01
# Where Lambda unpacks the code: the path the bytecode names as its source (tracebacks).
TASK_ROOT = "/var/task"
PYTHON_ENV_VAR = "CAPACITY_BROKER_PYTHON314"

COMPILEALL_OPTIONS = ("-q", "--invalidation-mode", "unchecked-hash")

# The Docker fallback, run in the build image: copy the sources without the excluded names
# ($4...), compile, then check the bytecode as `check_bytecode` does for a local compile (every
# module's .pyc starts with CPython 3.14's magic and the unchecked-hash flags, and no other
# Python's .pyc is there). Arguments: source dir, bundle dir, python; then the names to leave out.
DOCKER_SCRIPT = """set -euo pipefail
src=$1 out=$2 python=$3
shift 3
cp -R "$src"/. "$out"/
cd "$out"
expr=(-false)
for name in "$@"; do expr+=(-o -name "$name"); done
find . -mindepth 1 \\( "${expr[@]}" \\) -prune -exec rm -rf {} +
"$python" -m compileall -q --invalidation-mode unchecked-hash -s "$out" -p /var/task "$out"
bad=0
while IFS= read -r -d '' source; do
  pyc="$(dirname "$source")/__pycache__/$(basename "$source" .py).@TAG@.pyc"
  if [ ! -f "$pyc" ] || [ "$(od -An -tx1 -N8 "$pyc" | tr -d ' \\n')" != @HEADER@ ]; then
    echo "${source#./}: no CPython 3.14 unchecked-hash ${pyc#./}" >&2
    bad=1
  fi
done < <(find . -name '*.py' -print0)
while IFS= read -r -d '' stray; do
  echo "${stray#./}: bytecode of another Python" >&2
  bad=1
done < <(find . -name '*.pyc' ! -name '*.@TAG@.pyc' -print0)
exit "$bad"
""".replace("@TAG@", CACHE_TAG).replace(
    "@HEADER@", (PYTHON_314_MAGIC + UNCHECKED_HASH_FLAGS.to_bytes(4, "little")).hex()
)


class BytecodeError(RuntimeError):
    """The asset's bytecode cannot be built, or is not what Lambda's Python 3.14 loads."""


def excluded_names(patterns: Iterable[str]) -> tuple[str, ...]:
    """`**/<name>` patterns as the names (globs) they leave out at any depth.

    Both the local copy and the Docker script match names, so every pattern must be of that
    form (a pattern with a path in it would need the CDK's own glob rules to agree with).
    """
    names = []
    for pattern in patterns:
        name = pattern.removeprefix("**/")
        if name == pattern or "/" in name or not name:
            raise BytecodeError(f"asset exclude {pattern!r} is not of the form '**/<name>'")
        names.append(name)
    return tuple(names)


def is_excluded(relative: PurePosixPath, names: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(part, name) for part in relative.parts for name in names)


def copy_sources(source: Path, destination: Path, names: Sequence[str]) -> list[PurePosixPath]:
    """Copy `source` into `destination` without the excluded names; the files copied."""
    copied = []
    for path in sorted(source.rglob("*")):
        relative = PurePosixPath(path.relative_to(source).as_posix())
        if is_excluded(relative, names) or path.is_dir():
            continue
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, target)
        copied.append(relative)
    return copied


def bytecode_path(module: PurePosixPath) -> PurePosixPath:
    return module.parent / "__pycache__" / f"{module.stem}.{CACHE_TAG}.pyc"


def check_bytecode(bundle: Path) -> list[str]:
    """What is wrong with the bundle's bytecode (empty: every module has a good .pyc)."""
    problems = []
    for source in sorted(bundle.rglob("*.py")):
        module = PurePosixPath(source.relative_to(bundle).as_posix())
        pyc = bundle / bytecode_path(module)
        if not pyc.is_file():
            problems.append(f"{module}: no {bytecode_path(module)}")
            continue
        header = pyc.read_bytes()[:16]
        if header[:4] != PYTHON_314_MAGIC:
            problems.append(
                f"{module}: magic {header[:4].hex()}, not CPython 3.14's {PYTHON_314_MAGIC.hex()}"
            )
        elif int.from_bytes(header[4:8], "little") != UNCHECKED_HASH_FLAGS:
            problems.append(f"{module}: flags {header[4:8].hex()}, not unchecked-hash")
    strays = [
        str(path.relative_to(bundle))
        for path in sorted(bundle.rglob("*.pyc"))
        if not path.name.endswith(f".{CACHE_TAG}.pyc")
    ]
    return problems + [f"{stray}: bytecode of another Python" for stray in strays]


@dataclass(frozen=True)
class Compiler:
    """A CPython 3.14 that runs `compileall` over a directory."""

    description: str
    prefix: tuple[str, ...]
    # Pyodide sees only the host directories mounted into it: the one it compiles.
    mounts_directory: bool = False

    def compileall(self, directory: Path) -> list[str]:
        """`python3.14 -m compileall`, for arguments within `directory`."""
        mount = (str(directory),) if self.mounts_directory else ()
        return [*self.prefix, *mount]

    def command(self, directory: Path) -> list[str]:
        return [
            *self.compileall(directory),
            *COMPILEALL_OPTIONS,
            *("-s", str(directory), "-p", TASK_ROOT),
            str(directory),
        ]

    def compile(self, directory: Path) -> None:
        # The interpreter is the operator's (their variable, their PATH, their npm ci).
        result = subprocess.run(  # noqa: S603
            self.command(directory), capture_output=True, text=True, timeout=600, check=False
        )
        if result.returncode != 0:
            raise BytecodeError(
                f"compileall with {self.description} failed ({result.returncode}):\n"
                f"{result.stdout}{result.stderr}"
            )


def find_compiler(env: Mapping[str, str] | None = None) -> Compiler | None:
    """The first CPython 3.14 found (the module docstring's order), or None (use Docker)."""
    env = os.environ if env is None else env
    path = env.get("PATH")
    named = env.get(PYTHON_ENV_VAR, "").strip()
    if named:
        found = shutil.which(named, path=path)
        if found is None:
            raise BytecodeError(f"{PYTHON_ENV_VAR}={named}: no such executable")
        return Compiler(f"{found} ({PYTHON_ENV_VAR})", (found, "-m", "compileall"))
    found = shutil.which("python3.14", path=path)
    if found is not None:
        return Compiler(f"{found} (python3.14 on PATH)", (found, "-m", "compileall"))
    node = shutil.which("node", path=path)
    if node is not None and PYODIDE_PACKAGE.is_file():
        version = json.loads(PYODIDE_PACKAGE.read_text())["version"]
        if str(version).startswith("314."):
            return Compiler(
                f"Pyodide {version} (node_modules, run by {node})",
                (node, str(PYODIDE_RUNNER)),
                mounts_directory=True,
            )
    return None


def docker_available(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return shutil.which(env.get("CDK_DOCKER", "docker"), path=env.get("PATH")) is not None


def sources_digest(source: Path, files: Iterable[PurePosixPath]) -> str:
    digest = hashlib.sha256()
    for relative in files:
        digest.update(f"{relative}\0".encode())
        digest.update(hashlib.sha256((source / relative).read_bytes()).digest())
    return digest.hexdigest()


# (compiler, digest of the sources) -> the bytecode compiled, by path in the bundle.
COMPILED: dict[tuple[str, str], dict[PurePosixPath, bytes]] = {}


@jsii.implements(ILocalBundling)
class LocalBytecode:
    """Bundles the asset on this machine when a CPython 3.14 is found (else: Docker).

    The CDK bundles once per asset and cloud assembly; a process that synthesizes several
    (the infra tests) compiles the same sources once: the bytecode is kept by the digest of
    the sources and the compiler.
    """

    def __init__(self, source: Path, exclude: Sequence[str]) -> None:
        self.source = source
        self.names = excluded_names(exclude)

    @jsii.member(jsii_name="tryBundle")
    def try_bundle(self, output_dir: str, *_options: Any, **_keywords: Any) -> bool:
        compiler = find_compiler()
        if compiler is None:
            if docker_available():
                return False
            raise BytecodeError(
                "the code asset's bytecode needs CPython 3.14 and none was found: run "
                "`npm ci` (Pyodide, with node on PATH), put python3.14 on PATH, set "
                f"{PYTHON_ENV_VAR}, or install Docker (docs/deploy.md)"
            )
        bundle = Path(output_dir)
        files = copy_sources(self.source, bundle, self.names)
        key = (compiler.description, sources_digest(self.source, files))
        if key in COMPILED:
            for relative, data in COMPILED[key].items():
                (bundle / relative).parent.mkdir(parents=True, exist_ok=True)
                (bundle / relative).write_bytes(data)
        else:
            compiler.compile(bundle)
            problems = check_bytecode(bundle)
            if problems:
                raise BytecodeError(
                    f"{compiler.description} did not write CPython 3.14 unchecked-hash "
                    "bytecode:\n" + "\n".join(problems[:10])
                )
            COMPILED[key] = {
                PurePosixPath(path.relative_to(bundle).as_posix()): path.read_bytes()
                for path in bundle.rglob("*.pyc")
            }
        return True


def docker_command(exclude: Sequence[str], *, source: str, output: str, python: str) -> list[str]:
    """The bash command of the Docker fallback (also run by the tests, on host paths)."""
    return ["bash", "-c", DOCKER_SCRIPT, "bundle", source, output, python, *excluded_names(exclude)]


def bundling_options(source: Path, exclude: Sequence[str], image: DockerImage) -> BundlingOptions:
    """Local compile when a CPython 3.14 is found; else `image` (the runtime's) in Docker."""
    return BundlingOptions(
        image=image,
        command=docker_command(
            exclude, source="/asset-input", output="/asset-output", python="python"
        ),
        local=LocalBytecode(source, exclude),
    )
