"""Where and in what dtype a model runs: `--device auto|cpu|cuda[:N]`, `--dtype auto|float32|
bfloat16|float16`, and the numeric regime (device kind) the model identity binds.

Lifecycle: `check_names` validates the strings when a RuntimeConfig is built (no CUDA probe);
`resolve_device` / `resolve_dtype` turn them into torch objects when the model is loaded, where a
CUDA device that is not there is a ModelError; `numeric_regime` names the device kind for the
identity (K/V computed in bf16 on a GPU is never served as exact to an fp32 CPU runtime).
"""

from __future__ import annotations

import re

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


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """auto -> float32 on CPU (GRM's bit-exact regime), bfloat16 on CUDA."""
    check_names("auto", name)
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return DTYPES[name]


def numeric_regime(device: torch.device) -> str:
    """The device kind that shapes K/V arithmetic: "cpu", or "cuda:sm<major><minor>"."""
    if device.type != "cuda":
        return device.type
    major, minor = torch.cuda.get_device_capability(device)
    return f"cuda:sm{major}{minor}"
