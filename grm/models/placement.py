"""Where and in what dtype a model runs: `--device auto|cpu|cuda[:N]`, `--dtype auto|float32|
bfloat16|float16`, and the numeric regime (device kind) the model identity binds.

Lifecycle: `check_names` validates the strings when a RuntimeConfig is built (no CUDA probe);
`resolve_device` / `resolve_dtype` turn them into torch objects when the model is loaded, where a
CUDA device that is not there is a ModelError; `numeric_regime` names the device kind for the
identity (K/V computed in bf16 on a GPU is never served as exact to an fp32 CPU runtime).

`--dtype auto` is bf16 on CUDA. On a CPU it is bf16 where this machine's bf16 kernels run a
decoder block of the model's width at least `BF16_PAYS` times faster than fp32 (a 2-core AMD EPYC
with avx512_bf16: 1.9-2.3x at SmolLM2's 576, 2.4x at Qwen2.5-1.5B's 1,536), else fp32. A model
narrower than `BF16_MIN_WIDTH` stays fp32 unmeasured: at the tiny test models' 64 the same
measurement gave 1.2-1.5x from one run to the next on a shared machine, too close to call, and
a choice that flips with the machine's load would flip the model identity with it. The measurement takes about a second and is kept per (CPU, torch,
threads, width) in `<cache>/calibration/dtype-cpu.json` (`auto_cpu_dtype`). Exactness is per
dtype: the dtype is part of the model identity, so K/V stored in one is never served to the other.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import torch

from grm.errors import ModelError, UserInputError

DEVICE_NAMES = re.compile(r"auto|cpu|cuda(:\d+)?")
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
DTYPE_NAMES = ("auto", *DTYPES)


def check_names(device: str, dtype: str) -> None:
    """UserInputError if `device` / `dtype` are not names GRM accepts (no CUDA check here)."""
    if not DEVICE_NAMES.fullmatch(device):
        raise UserInputError(f"bad device {device!r}: one of auto, cpu, cuda, cuda:N")
    if dtype not in DTYPE_NAMES:
        raise UserInputError(f"bad dtype {dtype!r}: one of {', '.join(DTYPE_NAMES)}")


def resolve_device(name: str) -> torch.device:
    """auto -> the first CUDA device if there is one, else cpu; ModelError if CUDA is asked for
    and absent (a CPU-only torch, no driver, or no such device index)."""
    check_names(name, "auto")
    if name == "auto":
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelError(f"--device {name}: CUDA is not available here (torch {torch.__version__}); "
                             "use --device cpu or auto")
        index = device.index or 0
        if index >= torch.cuda.device_count():
            raise ModelError(f"--device {name}: only {torch.cuda.device_count()} CUDA device(s) here")
        device = torch.device("cuda", index)
    return device


BF16_PAYS = 1.5  # bf16 speed-up over fp32 a CPU must show for `auto` to pick bf16
BF16_MIN_WIDTH = 512  # narrower models stay fp32 on a CPU (see the module's docstring)


def resolve_dtype(name: str, device: torch.device, width: int | None = None,
                  cache_dir: Path | None = None) -> torch.dtype:
    """auto -> bfloat16 on CUDA; on a CPU bfloat16 where it pays at the model's `width` (hidden
    size; `auto_cpu_dtype`), else float32 (also when no width is known)."""
    check_names("auto", name)
    if name != "auto":
        return DTYPES[name]
    if device.type == "cuda":
        return torch.bfloat16
    if not width or width < BF16_MIN_WIDTH:
        return torch.float32
    return auto_cpu_dtype(width, cache_dir)


_BF16_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")  # what decides how fast bf16 runs on x86


def _cpu_name(cpuinfo: str | None = None) -> str:
    """The CPU as the calibration keys it (from `cpuinfo`, default /proc/cpuinfo): its model name,
    family/model/stepping and which of the bf16-relevant flags it has. The name alone is not enough:
    VMs report "AMD EPYC" both for a CPU with AVX2 only (bf16 at 0.13x fp32) and for one with
    avx512_bf16 (3.1x)."""
    try:
        fields: dict[str, str] = {}
        for line in (cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text()).splitlines():
            name, _, value = line.partition(":")
            if not name.strip():
                break  # the first processor's block is enough
            fields.setdefault(name.strip(), value.strip())
    except OSError:
        return os.uname().machine
    flags = set(fields.get("flags", "").split())
    have = "+".join(f for f in _BF16_FLAGS if f in flags) or "-"
    where = "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping"))
    return f"{fields.get('model name', os.uname().machine)} ({where}; {have})"


def block_speedup(width: int, tokens: int = 128, rounds: int = 9) -> float:
    """fp32 time / bf16 time of one decoder-shaped block (RMS norm, up and down projections, SiLU)
    of `width` over `tokens` tokens on this CPU, at torch's current thread count. The two dtypes
    take turns and each keeps its fastest round, so a busy neighbour slows both or neither."""
    def block(dt: torch.dtype):
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(tokens, width, generator=gen).to(dt)
        up, down = torch.randn(3 * width, width, generator=gen).to(dt), torch.randn(width, 3 * width, generator=gen).to(dt)

        def run() -> None:
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
            torch.nn.functional.linear(torch.nn.functional.silu(torch.nn.functional.linear(y, up)), down)
        return run

    runs = {dt: block(dt) for dt in (torch.float32, torch.bfloat16)}
    t0 = time.perf_counter()
    runs[torch.float32]()
    calls = max(1, int(0.02 / max(time.perf_counter() - t0, 1e-6)))  # ~20 ms of fp32 a round
    best = {dt: float("inf") for dt in runs}
    for _ in range(rounds):
        for dt, run in runs.items():
            run()
            t0 = time.perf_counter()
            for _ in range(calls):
                run()
            best[dt] = min(best[dt], (time.perf_counter() - t0) / calls)
    return best[torch.float32] / best[torch.bfloat16]


def auto_cpu_dtype(width: int, cache_dir: Path | None = None) -> torch.dtype:
    """bfloat16 if `block_speedup(width)` >= BF16_PAYS on this CPU, else float32; measured once
    and kept under `cache_dir` (re-measured where the file cannot be read or written)."""
    key = f"{_cpu_name()} | torch {torch.__version__} | threads {torch.get_num_threads()} | width {width}"
    path = cache_dir / "calibration" / "dtype-cpu.json" if cache_dir is not None else None
    try:
        known = json.loads(path.read_text()) if path is not None else {}
    except (OSError, ValueError):
        known = {}
    if key not in known:
        known[key] = {"bf16_speedup": round(block_speedup(width), 3)}
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps(known, indent=1, sort_keys=True))
                os.replace(tmp, path)
            except OSError:
                pass  # an unwritable cache only costs measuring again next time
    return torch.bfloat16 if known[key]["bf16_speedup"] >= BF16_PAYS else torch.float32


def numeric_regime(device: torch.device) -> str:
    """The device kind that shapes K/V arithmetic: "cpu", or "cuda:sm<major><minor>"."""
    if device.type != "cuda":
        return device.type
    major, minor = torch.cuda.get_device_capability(device)
    return f"cuda:sm{major}{minor}"
