"""The graftability self-test, run when the runtime is built.

remountable: read a short probe at seats 0..n-1 and again at d..d+n-1; rotating the first run's
cached keys by d must reproduce the second run's keys on every layer, or the dialect is refused.
same_position_only: the probe's keys must *change* when the probe moves (else the position law is
misdescribed), and re-seating must be refused.

What the remountable check compares. The forward pass at +d is not an exact reference: in exact
arithmetic a rotary model's hidden states do not depend on where a text starts (only relative
positions enter), but the model's own rounding does (in 16-bit dtypes its rotary runs in the
compute dtype too: cos and sin rounded to it, every product rounded), and that noise grows with
depth and with the probe's length. The values of the two runs show it without any rotation in
the way: they would be equal in exact arithmetic, so their difference per layer (`floor`) is the
model's own position noise at that layer's input. A layer's re-seat error beyond it (`excess`:
key error minus value drift, max over layers) is what the re-seat itself adds, and that is what
must stay within the dtype's tolerance: a few units in the last place of the largest key. Both
the raw error (`max_rel_error`) and the floor are reported. Measured (bf16, CPU, 1,024 tokens of a
repeated sentence; bench/results/reseat*.md): Qwen2.5-Coder-1.5B raw 2.7e-1, floor 4.5e-1, excess
3.1e-2; random:gemma-3-4b@small raw 2.1e-2, excess 8.4e-3. A rotary map that is off leaves an
excess of order 1 on every layer it misdescribes.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from grm.dialects.base import REMOUNTABLE, SAME_POSITION_ONLY, Dialect
from grm.errors import DialectError

PROBE_TEXT = "GRM self-test: the quick brown fox jumps over 13 lazy dogs."
SHIFT = 37
TOLERANCE = 1e-4  # fp32
# 16-bit K/V carry 8 (bf16) or 11 (fp16) mantissa bits: the model's rotary rounds its products in
# that dtype and the re-seat rounds once, so a re-seated key differs from a forward pass's by a
# few ulps of the largest key beyond the forward pass's own position noise.
TOLERANCES = {torch.float32: TOLERANCE, torch.float16: 1e-2, torch.bfloat16: 6e-2}


@dataclass(frozen=True)
class SelfTestResult:
    profile: str
    shift: int
    max_rel_error: float  # remountable: rotated vs forward at +shift (max over layers); else the keys' relative change
    floor: float = 0.0  # remountable: the values' own drift between the two runs (max over layers)
    excess: float = 0.0  # remountable: max over layers of (key error - value drift): the re-seat's own part
    tolerance: float = TOLERANCE  # the bound `excess` is held to (by the compute dtype)
    tokens: int = 0  # probe length

    @property
    def passed(self) -> bool:
        return self.excess <= self.tolerance


@torch.no_grad()
def _probe(model: torch.nn.Module, ids: list[int], start: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(keys, values) [kv_heads, tokens, head_dim] per layer, the probe read from seat `start`."""
    from transformers import DynamicCache

    input_ids = torch.tensor([ids], device=model.device)
    positions = torch.arange(start, start + len(ids), device=model.device)[None]
    out = model(input_ids=input_ids, position_ids=positions, cache=DynamicCache(), use_cache=True, logits_to_keep=1)
    return [(layer.keys[0], layer.values[0]) for layer in out.cache.layers]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-12))


def measure(dialect: Dialect, model: torch.nn.Module, ids: list[int]) -> SelfTestResult:
    """The self-test's figures on probe token ids, without judging the rotary ones (`passed` says
    whether they are within the tolerance); DialectError only where the dialect cannot describe
    the model at all (layer count, an absolute law that does not move or allows a re-seat)."""
    if len(ids) < 4:
        raise ValueError("the self-test probe needs at least 4 tokens")
    base = _probe(model, ids, 0)
    moved = _probe(model, ids, SHIFT)
    if len(base) != dialect.n_layers:
        raise DialectError(f"{dialect.family}: model has {len(base)} cache layers, dialect says {dialect.n_layers}")
    if dialect.profile == REMOUNTABLE:
        keys = [_rel(dialect.reseat(k, i, SHIFT), m) for i, ((k, _), (m, _)) in enumerate(zip(base, moved))]
        drift = [_rel(v, w) for (_, v), (_, w) in zip(base, moved)]
        tolerance = TOLERANCES.get(base[0][0].dtype, TOLERANCE)
        return SelfTestResult(dialect.profile, SHIFT, max(keys), max(drift),
                              max(k - v for k, v in zip(keys, drift)), tolerance, len(ids))
    if dialect.profile == SAME_POSITION_ONLY:
        change = max(_rel(k, m) for (k, _), (m, _) in zip(base, moved))
        if change < 1e-3:
            raise DialectError(f"{dialect.family}: keys do not depend on position; the absolute law is wrong here")
        try:
            dialect.check_reseat(SHIFT)
        except DialectError:
            return SelfTestResult(dialect.profile, SHIFT, change, tokens=len(ids))
        raise DialectError(f"{dialect.family}: an absolute-position dialect allowed a re-seat")
    return SelfTestResult(dialect.profile, SHIFT, 0.0, tokens=len(ids))


def self_test(dialect: Dialect, model: torch.nn.Module, ids: list[int]) -> SelfTestResult:
    """Run the self-test on probe token ids; raise DialectError if the dialect misdescribes the model."""
    result = measure(dialect, model, ids)
    if not result.passed:
        raise DialectError(
            f"{dialect.family}: rotary self-test failed (rotating cached keys by {SHIFT} differs from a "
            f"forward pass there by {result.max_rel_error:.2e}, {result.excess:.2e} beyond the model's own "
            f"position noise of {result.floor:.2e} > {result.tolerance}); this model cannot be re-seated"
        )
    return result


def _code_digest() -> str:
    """SHA-256 of the dialects' source (this folder's modules): the rotary maps the test checks."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def kept_self_test(dialect: Dialect, model: torch.nn.Module, ids: list[int], identity: str,
                   cache_dir: Path | None) -> SelfTestResult:
    """`self_test`, its passing result kept under `cache_dir` (`selftest/<key>.json`), so a later
    process opening the same model skips the probe's two forward passes (seconds for a 1.5B model
    on 2 CPU cores: bench/results/open-cost-*.md). The key binds what the result depends on: the model identity (weights, config,
    tokenizer, dtype, device kind), the dialects' source, the torch and transformers versions and
    the probe's token ids; a change in any of them, or a file that cannot be read or does not
    parse, runs the test again. A failing result is never kept (it raises every time)."""
    import transformers

    key = hashlib.sha256(json.dumps([identity, _code_digest(), torch.__version__, transformers.__version__,
                                     dialect.family, list(ids)]).encode()).hexdigest()[:32]
    path = cache_dir / "selftest" / f"{key}.json" if cache_dir is not None else None
    try:
        if path is not None:
            kept = SelfTestResult(**json.loads(path.read_text()))
            if kept.passed and kept.profile == dialect.profile:
                return kept
    except (OSError, ValueError, TypeError):
        pass
    result = self_test(dialect, model, ids)
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(asdict(result)))
            os.replace(tmp, path)
        except OSError:  # a read-only cache: the test runs at every open
            pass
    return result
