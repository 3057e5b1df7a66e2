"""Mount or re-read, decided per graft from measured costs.

Mounting a graft costs loading its payload (deserialize, verify, re-seat, splice: per token, plus
a fixed part); re-reading its text costs a forward pass (per token, plus a fixed part per call)
but keeps full fidelity: the text attends to everything placed before it, as in context. For a
short graft re-reading is the cheaper of the two; for a long one the stored K/V wins. `calibrate`
measures both on this machine and model; `load_or_calibrate` stores the result once as JSON
(`Costs`, one file per model identity) and reads it back after. `Costs.reread` decides per graft,
with an optional composition risk: each other graft mounted side by side makes the mount count
`risk` times dearer (grafts composed apart never attended to each other; see
bench/results/composition.md for what that loses). The arena (grm/grafts/arena.build, `reread=`)
reads the chosen grafts as text and names them in `Arena.reread`; their tokens count as computed,
never as from memory.

The load path measured is the payload's serialization round trip (KV.to_bytes / from_bytes), a
SHA-256 of the bytes (as verification hashes them), the re-seat rotation and the splice; store I/O
and decryption are not in it (a page-cache read on this machine is small beside the rest).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from grm.dialects import Dialect
from grm.kv import KV, cache_from_kv, reseat_kv
from grm.kv.forward import prefill, read_after_sinks

SIZES = (16, 256)  # tokens: the two points each cost line is fitted through
REPEATS = 3  # median of this many timings per point
QUICK = ((16, 128), 2)  # sizes and repeats of the runtime's once-per-machine calibration
RISK = 0.5  # composition risk: each other graft side by side makes a mount this much dearer


@dataclass(frozen=True)
class Costs:
    """Seconds to bring a graft of n tokens into an arena: fixed + per_token * n, each way."""

    identity: str  # the model these were measured with
    machine: str
    prefill_fixed_s: float
    prefill_per_token_s: float
    mount_fixed_s: float
    mount_per_token_s: float
    measured_at: float = 0.0

    def read_s(self, tokens: int) -> float:
        return self.prefill_fixed_s + self.prefill_per_token_s * tokens

    def mount_s(self, tokens: int) -> float:
        return self.mount_fixed_s + self.mount_per_token_s * tokens

    def reread(self, tokens: int, side_by_side: int = 1, risk: float = 0.0) -> bool:
        """Re-read a graft of `tokens` when that costs no more than mounting it, the mount's cost
        raised by `risk` for each other graft mounted beside it."""
        if risk < 0:
            raise ValueError("risk must be >= 0")
        return self.read_s(tokens) <= self.mount_s(tokens) * (1 + risk * max(side_by_side - 1, 0))


def _median_s(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _line(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(fixed, per_token) through two (tokens, seconds) points; never negative."""
    (n0, s0), (n1, s1) = points
    per = max((s1 - s0) / (n1 - n0), 0.0)
    return max(s0 - per * n0, 0.0), per


@torch.no_grad()
def calibrate(model: torch.nn.Module, dialect: Dialect, identity: str, sinks: KV, vocab: int,
              sizes: tuple[int, int] = SIZES, repeats: int = REPEATS) -> Costs:
    """Measure both cost lines on this machine: reading n tokens after the sinks, and mounting
    the same n tokens' K/V (round trip, hash, re-seat by 7 seats, splice after the sinks)."""
    from grm.grafts.arena import append

    g = torch.Generator().manual_seed(0)
    read, mount = [], []
    for n in sizes:
        ids = torch.randint(10, vocab, (n,), generator=g).tolist()

        def read_once() -> None:
            prefill(model, cache_from_kv(sinks), ids, sinks.tokens)

        kv = read_after_sinks(model, sinks, ids)

        def mount_once() -> None:
            data = kv.to_bytes({"calibration": "1"})
            hashlib.sha256(data).digest()
            back, _ = KV.from_bytes(data)
            append(cache_from_kv(sinks), reseat_kv(back, dialect, 7))

        read_once()  # warm up both paths once
        mount_once()
        read.append((n, _median_s(read_once, repeats)))
        mount.append((n, _median_s(mount_once, repeats)))
    pf, pt = _line(read)
    mf, mt = _line(mount)
    return Costs(identity, machine(model), pf, pt, mf, mt, time.time())


def machine(model: torch.nn.Module) -> str:
    """What the costs depend on besides the model: CPU kind and count, threads, the device."""
    return (f"{platform.machine()} {os.cpu_count()} CPUs {torch.get_num_threads()} threads "
            f"{next(model.parameters()).device}")


def load_or_calibrate(path: Path, model: torch.nn.Module, dialect: Dialect, identity: str, sinks: KV,
                      vocab: int, sizes: tuple[int, int] = SIZES, repeats: int = REPEATS) -> Costs:
    """The costs stored at `path` for this model on this machine, else calibrated now and stored
    there once (a file that does not parse is measured again)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        if data.get("identity") == identity and data.get("machine") == machine(model):
            return Costs(**data)
    except (OSError, ValueError, TypeError):
        pass
    costs = calibrate(model, dialect, identity, sinks, vocab, sizes, repeats)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(costs), indent=2) + "\n")
    os.replace(tmp, path)
    return costs
