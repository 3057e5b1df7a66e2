"""Loading a model by name or path: install, materialize once into the cache, load, identify.

Packaged GGUF weights (and any local `.gguf` file given by path) are dequantized by transformers
once and saved as an HF folder in the dtype they run in: fp32 under `<cache>/models/NAME`, bf16
under `<cache>/models/NAME@bfloat16` (half the bytes; a file given by path: `gguf-<first 16 hex of
its SHA-256>` likewise); float16 is cast from the fp32 folder at load. Later loads read that folder
(safetensors, memory-mapped). A GGUF shipped in parts is joined once into `<cache>/models/NAME.gguf`
and kept there (other tools read the same file). A file lock keeps two processes from
materializing the same model at once; the folder appears atomically (temp folder + rename).
"""

from __future__ import annotations

import fcntl
import json
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from grm.dialects import DIALECT_FAMILIES, position_law
from grm.errors import DialectError, ModelError, UserInputError
from grm.models.attention import use_grouped_attention
from grm.models.identity import cached_file_digests, model_identity, tensor_digest
from grm.models.install import assemble_parts, ensure_installed, locate_gguf
from grm.models.placement import numeric_regime, resolve_device, resolve_dtype
from grm.models.random import INIT_LAW as RANDOM_INIT
from grm.models.random import PREFIX as RANDOM_PREFIX
from grm.models.random import SEED as RANDOM_SEED
from grm.models.random import build_random, random_config
from grm.models.registry import MODELS
from grm.models.tiny import build_tiny
from grm.models.tokenizer import CHATML, HFTokenizer, Tokenizer

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model")


@dataclass
class LoadedModel:
    name: str
    model: torch.nn.Module
    tokenizer: Tokenizer
    identity: str  # hex digest, see grm.models.identity
    family: str  # transformers model_type
    for_answers: bool = True  # False: random weights (random:...), for speed and memory only

    def __post_init__(self) -> None:
        use_grouped_attention(self.model)  # the same numbers, no K/V copies (grm/models/attention.py)

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def config(self) -> object:
        return self.model.config


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _materialize(locate: Callable[[Path], Path], label: str, source: dict, folder: Path,
                 dtype: torch.dtype = torch.float32) -> None:
    """Dequantize a GGUF (`locate(work_dir)` gives its path) into an HF folder at `folder` in
    `dtype`, atomically."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from tqdm import tqdm

    work = folder.parent / f".{folder.name}.tmp"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    steps = tqdm(total=4, desc=f"materializing {label} (once)", unit="step", leave=False)
    try:
        gguf = locate(work)
        steps.update()
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=dtype)
        except Exception as exc:  # transformers raises many types for a bad or unsupported GGUF
            raise ModelError(f"cannot load the GGUF {label}: {str(exc).splitlines()[0] if str(exc) else exc!r}") from exc
        steps.update()
        # Drop the GGUF quantizer marker: the weights are plain tensors in `dtype` now.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(work))
        tok.save_pretrained(str(work))
        steps.update()
        source_digest = source.get("gguf_sha256") or cached_file_digests([gguf], work / "grm-source.json")[str(gguf)]
        (work / "grm-source.json").write_text(json.dumps({**source, "gguf_sha256": source_digest}))
        if gguf.parent == work:
            gguf.unlink()
        shutil.rmtree(folder, ignore_errors=True)
        work.rename(folder)
        steps.update()
    finally:
        steps.close()
        shutil.rmtree(work, ignore_errors=True)


def _stored_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a GGUF is materialized in for a run in `dtype`: bf16 as itself, else fp32."""
    return torch.bfloat16 if dtype == torch.bfloat16 else torch.float32


def _dtype_folder(folder: Path, dtype: torch.dtype) -> Path:
    """Where the materialized weights of a run in `dtype` live (fp32 keeps the bare name)."""
    return folder if _stored_dtype(dtype) == torch.float32 else folder.with_name(f"{folder.name}@bfloat16")


def _materialized(folder: Path, locate: Callable[[Path], Path], label: str, source: dict,
                  log: Callable[[str], None], dtype: torch.dtype = torch.float32) -> Path:
    """The folder of `folder`'s weights for a run in `dtype`, materialized from the GGUF first if
    it is not there yet (once, under a file lock)."""
    folder = _dtype_folder(folder, dtype)
    folder.parent.mkdir(parents=True, exist_ok=True)
    if not (folder / "config.json").exists():
        with open(folder.parent / f".{folder.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be materializing it right now
            if not (folder / "config.json").exists():
                log(f"materializing {label} into {folder} (once)")
                _materialize(locate, label, source, folder, _stored_dtype(dtype))
    return folder


def _load_folder(folder: Path, sink_text: str | None, device: torch.device, dtype: torch.dtype,
                 chat: bool = True) -> tuple[torch.nn.Module, HFTokenizer, str]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        placed = {"device_map": str(device)} if device.type != "cpu" else {}  # straight onto the accelerator
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, **placed)
        tok = AutoTokenizer.from_pretrained(str(folder))
    except Exception as exc:
        raise ModelError(f"cannot load model folder {folder}: {exc}") from exc
    model.eval()
    files = sorted(p for p in folder.iterdir() if p.suffix in (".safetensors", ".bin"))
    files += [folder / n for n in _TOKENIZER_FILES if (folder / n).exists()]
    digests = cached_file_digests(files, folder / "grm-digests.json")
    weights = [digests[str(p)] for p in files if p.suffix in (".safetensors", ".bin")]
    tokd = [digests[str(p)] for p in files if p.name in _TOKENIZER_FILES]
    source = folder / "grm-source.json"
    if source.exists():
        weights.append(json.loads(source.read_text())["gguf_sha256"])
    cfg = model.config.to_dict()
    identity = model_identity(cfg.get("model_type", "?"), cfg, weights, tokd, str(dtype), position_law(model.config),
                              numeric_regime(device))
    return model, HFTokenizer(tok, sink_text=sink_text, chat=chat), identity


def _gguf_folder(path: Path, cache_dir: Path, log: Callable[[str], None], dtype: torch.dtype) -> Path:
    """The cache folder of a local GGUF file, keyed by the file's SHA-256 (materialized once)."""
    models = cache_dir / "models"
    models.mkdir(parents=True, exist_ok=True)
    digest = cached_file_digests([path.resolve()], models / "gguf-digests.json")[str(path.resolve())]
    source = {"gguf_sha256": digest, "file": path.name}
    return _materialized(models / f"gguf-{digest[:16]}", lambda _work: path, path.name, source, log, dtype)


def _config_width(config: dict) -> int | None:
    """A model's hidden size from its config (a multimodal config's text tower's)."""
    width = config.get("hidden_size") or (config.get("text_config") or {}).get("hidden_size")
    return int(width) if width else None


def _folder_width(*folders: Path) -> int | None:
    """The hidden size in the first of `folders` that holds a readable config.json."""
    for folder in folders:
        try:
            return _config_width(json.loads((folder / "config.json").read_text()))
        except (OSError, ValueError):
            continue
    return None


def _gguf_width(path: Path) -> int | None:
    """The hidden size a GGUF's header states (`<architecture>.embedding_length`), None if unread."""
    try:
        from gguf import GGUFReader

        fields = GGUFReader(str(path)).fields
        arch = bytes(fields["general.architecture"].parts[-1]).decode()
        return int(fields[f"{arch}.embedding_length"].parts[-1][0])
    except Exception:  # a header gguf cannot parse: the dtype falls back to fp32, the load says why
        return None


def _check_family(folder: Path, label: str) -> None:
    """DialectError before any weights load if GRM has no dialect for the folder's model family."""
    try:
        family = json.loads((folder / "config.json").read_text()).get("model_type", "?")
    except (OSError, ValueError) as exc:
        raise ModelError(f"{label}: unreadable config.json: {exc}") from exc
    if family not in DIALECT_FAMILIES:
        raise DialectError(f"{label}: model family {family!r} has no GRM dialect "
                           f"(supported: {', '.join(sorted(DIALECT_FAMILIES))})")


def load_model(name: str, cache_dir: Path, log: Callable[[str], None] = lambda _m: None,
               device: str = "cpu", dtype: str = "auto") -> LoadedModel:
    """Load `name`: a registry name, `random:GEOMETRY[@small]`, a local `.gguf` file or a local HF
    folder, on `device` ("auto", "cpu", "cuda[:N]") in `dtype` ("auto": bfloat16 on CUDA, and on
    a CPU where it pays at the model's width, grm/models/placement.py; else float32). Raises
    ModelError/UserInputError/DialectError."""
    _quiet()
    torch.set_grad_enabled(False)
    dev = resolve_device(device)

    def resolve(width: int | None) -> torch.dtype:
        return resolve_dtype(dtype, dev, width, cache_dir)

    regime = numeric_regime(dev)
    if name.startswith(RANDOM_PREFIX):
        dt = resolve(random_config(name).hidden_size)
        model, tok = build_random(name, dev, dt)
        cfg = model.config.to_dict()
        identity = model_identity(cfg["model_type"], cfg, [f"seed={RANDOM_SEED}", RANDOM_INIT],
                                  [b.hex() for b in tok.files_digest_parts()], str(dt), position_law(model.config),
                                  regime)
        return LoadedModel(name, model, tok, identity, model.config.model_type, for_answers=False)
    spec = MODELS.get(name)
    if spec is None:
        path = Path(name).expanduser()
        if path.is_file() and path.suffix == ".gguf":
            dt = resolve(_gguf_width(path) if dtype == "auto" else None)
            folder = _gguf_folder(path, cache_dir, log, dt)
        elif path.is_dir() and (path / "config.json").exists():
            folder = path
            dt = resolve(_folder_width(folder))
        else:
            known = ", ".join(sorted(MODELS))
            raise UserInputError(f"unknown model {name!r}: use one of {known}, random:llama-3-8b (or another "
                                 "random: geometry), a path to a .gguf file or to an HF model folder")
        _check_family(folder, str(path))
        model, tok, identity = _load_folder(folder, None, dev, dt)
        return LoadedModel(str(path), model, tok, identity, model.config.model_type)
    if spec.source == "tiny":
        model, tok = build_tiny(spec.family, CHATML if spec.chat_template else None)
        dt = resolve(model.config.hidden_size)
        cfg = model.config.to_dict()
        weights = tensor_digest(model)  # of the fp32 weights as built, before any cast
        model = model.to(device=dev, dtype=dt)
        identity = model_identity(
            cfg["model_type"], cfg, [weights], [b.hex() for b in tok.files_digest_parts()],
            str(dt), position_law(model.config), regime,
        )
        return LoadedModel(spec.name, model, tok, identity, model.config.model_type)

    models = cache_dir / "models"

    def locate(work: Path) -> Path:
        ensure_installed(spec, log)
        if spec.parts:  # joined once and kept in the cache, beside the folders made from it
            log(f"joining the {len(spec.parts)} parts of {spec.name} into {models / spec.name}.gguf")
            return assemble_parts(spec, models / f"{spec.name}.gguf")
        return locate_gguf(spec, work)

    width = None
    if dtype == "auto" and dev.type != "cuda":  # the width from a folder made before, else the GGUF's header
        base = models / spec.name
        width = _folder_width(base, _dtype_folder(base, torch.bfloat16)) or _gguf_width(locate(models))
    dt = resolve(width)
    source = {"package": spec.package, **({"gguf_sha256": spec.gguf_sha256} if spec.gguf_sha256 else {})}
    folder = _materialized(models / spec.name, locate, spec.name, source, log, dt)
    model, tok, identity = _load_folder(folder, spec.sink_text, dev, dt, spec.chat_template)
    return LoadedModel(spec.name, model, tok, identity, model.config.model_type)
