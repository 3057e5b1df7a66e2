"""Process kills through the real CLI: a child running `grm ingest` over a few documents is
SIGKILLed at random points (after a random number of new payload files have appeared, or a random
delay after its first one), one to two times over each store (11 kills on the tiny model, 2 more
on SmolLM2), and then the job is finished by re-running ingest.

Every durability mode promises to survive a process crash (`DURABILITY_PROMISES`: the OS keeps
what the process wrote, so even `volatile` and `async` lose nothing acknowledged to a SIGKILL;
power loss is the crash-image simulator's job, in tests/store). So for every mode, for the
`sections` layout, and for an encrypted store:

1. After each kill, `grm fsck --json` exits 0 with no damaged record (orphan payloads of the
   write the kill interrupted are allowed), and every block the store had after the previous
   kill is still there, unchanged (nothing acknowledged is lost).
2. Re-running `grm ingest` finishes the job: the same documents, blocks and tokens as a store
   that was never killed, computing exactly the blocks that were missing; a further run computes
   none.
3. After `grm fsck --repair` (which removes the orphans) fsck finds no orphans, and the store
   holds exactly as many records as the never-killed store.
4. Every stored block's K/V is bit-identical, and its bound metadata equal, to the never-killed
   store's (decrypted, for the encrypted store). Payload files are compared decoded: safetensors
   writes the metadata keys in a per-process order, so the same K/V written by two processes are
   two different files.
5. `grm ask --json` gives the never-killed store's answer, mode, token counts and mounted blocks,
   and its tokens from memory are exactly the sinks plus the mounted stored blocks.

The children: each is a new interpreter that runs `grm.cli.main(argv)`, the code `python -m grm`
runs, with its stdout and stderr piped to the test. `Warm` keeps the next two started ahead of
time: each imports what `grm ingest` imports (~5 s, the most of a child's start) and waits for its
argv on stdin, while the children before it ingest and the test checks what they left. Nothing is
written before a child gets its argv, and the kill moments count payload files from then on, as before.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from grm.cli import main as grm_main
from grm.kv import KV
from grm.store import Store, StoreConfig
from grm.store.layout import is_tmp
from tests.conftest import ROOT, lorem

TINY = "tiny-random-llama"
SMOLLM = "smollm2-135m"
BLOCK_TOKENS = "64"  # small blocks: many records, so kills land between and inside many writes
THREADS = "1"  # one thread everywhere: the same kernels in the child and here, so K/V are bit-equal
# What a `grm ingest` child imports before it writes anything (the tiny model and SmolLM2 are llamas).
PRELOAD = ["grm.cli", "grm.cli.ingest", "grm.runtime.runtime", "grm.models.tiny",
           "transformers.models.llama.modeling_llama"]
WARM_CHILD = "\n".join(["import json, sys", *(f"import {m}" for m in PRELOAD), "from grm.cli import main",
                         "line = sys.stdin.readline()",
                         "sys.exit(main(json.loads(line)) if line else 0)"])


class Warm:
    """Children for the kills, each started two kills ahead (see the module docstring): one kill
    ahead is not enough when a test kills twice, the second child would still be importing."""

    def __init__(self) -> None:
        self._waiting = [self._spawn(), self._spawn()]

    @staticmethod
    def _spawn() -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", WARM_CHILD], cwd=ROOT, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, "OMP_NUM_THREADS": THREADS})

    def start(self, argv: list[str]) -> subprocess.Popen:
        """A child running `grm ARGV` from now on; another starts importing."""
        child = self._waiting.pop(0)
        self._waiting.append(self._spawn())
        if child.poll() is not None:
            _out, err = child.communicate()
            raise AssertionError(f"a waiting child exited with {child.returncode}: {err.decode(errors='replace')}")
        child.stdin.write((json.dumps(argv) + "\n").encode())
        child.stdin.flush()  # (left open: `communicate` closes it)
        return child

    def close(self) -> None:
        for child in self._waiting:  # not needed after all (nothing written yet)
            child.kill()
            child.communicate(timeout=60)


@pytest.fixture(scope="module")
def warm():
    w = Warm()
    yield w
    w.close()


@pytest.fixture(scope="module", autouse=True)
def _restore_torch_threads():
    """The in-process CLI calls set torch's thread count; give the rest of the session its own back."""
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def cli(*args: str) -> tuple[int, dict]:
    """`grm ARGS` in this process (the kill targets are the only subprocesses): (exit status, JSON)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = grm_main(list(args))
    text = out.getvalue().strip()
    return rc, json.loads(text) if text else {}


@dataclass(frozen=True)
class Setup:
    """One store's flags: the same on every command that touches it."""

    store: Path
    model: str = TINY
    durability: str = "normal"
    key_file: Path | None = None
    layout: str = "chain"

    def common(self) -> list[str]:
        flags = ["--store", str(self.store), "--model", self.model, "--threads", THREADS, "--json",
                 "--durability", self.durability]
        return flags + (["--key-file", str(self.key_file)] if self.key_file else [])

    def ingest_args(self, docs: Path) -> list[str]:
        return ["ingest", str(docs), *self.common(), "--block-tokens", BLOCK_TOKENS, "--layout", self.layout,
                "--section-tokens", BLOCK_TOKENS]

    def master_key(self) -> bytes | None:
        return bytes.fromhex(self.key_file.read_text()) if self.key_file else None


def payload_files(store: Path) -> int:
    """Payload files on disk, temporaries excluded (a proxy for records written: each payload file
    is written just before the log record that names it)."""
    folder = store / "payloads"
    if not folder.is_dir():
        return 0
    return sum(1 for _, _, names in os.walk(folder) for n in names if not is_tmp(n))


def raw_bytes(tensor) -> bytes:
    """A tensor's bytes whatever its dtype (numpy has no bfloat16: view it as 16-bit integers)."""
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    return tensor.contiguous().numpy().tobytes()


def blocks(setup: Setup) -> dict[str, tuple[dict, bytes, bytes]]:
    """Block key -> (bound metadata, K bytes, V bytes) of its verified (decrypted) payload. Decoded,
    not the payload file's bytes: safetensors writes the metadata in a per-process order."""
    out = {}
    with Store.open(StoreConfig(root=setup.store, durability=setup.durability,
                                master_key=setup.master_key())) as store:
        for rec in store.records("default", "block"):
            data = store.read_payload(rec)
            assert data is not None, f"block {rec.key} failed verification"
            kv, meta = KV.from_bytes(data)
            out[rec.key] = (meta, raw_bytes(kv.keys), raw_bytes(kv.values))
    return out


def kill_ingest(warm: Warm, setup: Setup, docs: Path, rng: random.Random, total_files: int, how: str) -> int:
    """Start `grm ingest` in a child and SIGKILL it: `records` - once a random number of new
    payload files have appeared; `delay` - a random delay after its first new payload file.
    Returns the child's exit status (-SIGKILL, or 0 if it finished first)."""
    before = payload_files(setup.store)
    room = max(1, (total_files - before) * 2 // 3)
    target = before + (rng.randint(1, room) if how == "records" else 1)
    child = warm.start(setup.ingest_args(docs))
    deadline = time.monotonic() + 300
    while child.poll() is None and payload_files(setup.store) < target and time.monotonic() < deadline:
        time.sleep(0.002)
    if how == "delay":
        time.sleep(rng.uniform(0.0, 0.4))
    child.send_signal(signal.SIGKILL)  # a no-op if it already exited
    _out, err = child.communicate(timeout=60)
    assert child.returncode in (0, -signal.SIGKILL), err.decode(errors="replace")
    return child.returncode


def ask_json(setup: Setup, prompt: str, mode: str, max_new: str = "8") -> dict:
    rc, out = cli("ask", prompt, *setup.common(), "--mode", mode, "--max-new-tokens", max_new)
    assert rc == 0
    out.pop("ttft_s"), out.pop("total_s")  # wall-clock: the only fields allowed to differ
    return out


@dataclass
class Reference:
    """What a store that was never killed holds and answers."""

    ingest: dict
    records: int
    files: int  # payload files (sinks, blocks, documents; grafts share their block's file)
    blocks: dict[str, tuple[dict, bytes, bytes]]
    answers: dict[str, dict]


def questions(docs: Path, layout: str) -> dict[str, tuple[str, str]]:
    """name -> (prompt, ask mode). chain: each of the first and last document followed by a
    question (auto picks exact); sections: a question routed to one section."""
    if layout == "sections":
        return {"section": ("What did the village market record in winter?", "exact-section")}
    names = sorted(p.name for p in docs.iterdir())
    return {n: ((docs / n).read_text("utf-8") + "\n\nQuestion: what is the first word?\nAnswer:", "auto")
            for n in (names[0], names[-1])}


def build_reference(setup: Setup, docs: Path) -> Reference:
    rc, first = cli(*setup.ingest_args(docs))
    stored = blocks(setup)
    assert rc == 0 and first["computed"] == len(stored) > 10  # (sections: repeated text is stored once)
    rc, fsck = cli("fsck", *setup.common())
    assert rc == 0 and fsck["damaged"] == [] and fsck["orphans"] == []
    answers = {n: ask_json(setup, p, m) for n, (p, m) in questions(docs, setup.layout).items()}
    return Reference(first, fsck["records"], payload_files(setup.store), stored, answers)


def kill_and_finish(warm: Warm, setup: Setup, docs: Path, ref: Reference, kills: list[str], seed: int) -> None:
    """The scenario of the module docstring, expectations 1-5."""
    rng = random.Random(seed)
    seen: dict[str, tuple[dict, bytes, bytes]] = {}
    interrupted = 0
    for n, how in enumerate(kills):
        rc = kill_ingest(warm, setup, docs, rng, ref.files, how)
        fsck_rc, fsck = cli("fsck", *setup.common())
        assert fsck_rc == 0 and fsck["damaged"] == [], (n, how, fsck)  # 1. no acknowledged record damaged
        now = blocks(setup)
        assert {k: now.get(k) for k in seen} == seen, (n, how)  # 1. nothing acknowledged lost or changed
        interrupted += rc == -signal.SIGKILL and len(now) < len(ref.blocks)
        seen = now
    assert interrupted >= 1, "no kill landed inside the ingest"

    rc, resumed = cli(*setup.ingest_args(docs))  # 2. finishes the job, computing only what is missing
    assert rc == 0
    assert (resumed["documents"], resumed["blocks"], resumed["tokens"]) == (
        ref.ingest["documents"], ref.ingest["blocks"], ref.ingest["tokens"])
    assert resumed["computed"] == len(ref.blocks) - len(seen)
    rc, again = cli(*setup.ingest_args(docs))
    assert rc == 0 and again["computed"] == 0 and again["blocks"] == ref.ingest["blocks"]

    rc, fsck = cli("fsck", *setup.common(), "--repair")  # 3. orphans of the kills removed
    assert rc == 0 and fsck["damaged"] == []
    rc, fsck = cli("fsck", *setup.common())
    assert rc == 0 and {k: fsck[k] for k in ("records", "damaged", "orphans", "repaired")} == {
        "records": ref.records, "damaged": [], "orphans": [], "repaired": []}
    assert fsck.get("already_damaged", []) == [] and fsck.get("catalog_ok", True) is True

    assert blocks(setup) == ref.blocks  # 4. bit-identical K/V
    for name, (prompt, mode) in questions(docs, setup.layout).items():
        got = ask_json(setup, prompt, mode)  # 5. the never-killed store's answer, from memory
        assert got == ref.answers[name], name
        # The stored blocks were served: memory is the sinks (the first block's seat) plus their tokens.
        metas = [ref.blocks[m["id"]][0] for m in got["mounted"]]
        served = sum(len(json.loads(m["ids"])) for m in metas)
        assert metas and got["tokens_from_memory"] == int(metas[0]["seat"]) + served
        if setup.layout == "chain":
            assert got["mode"] == "exact" and got["tokens_from_memory"] > got["tokens_computed"]


def write_docs(folder: Path, n: int, paragraphs: int, seed: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"doc{i}.txt").write_text(lorem(paragraphs, seed=seed + i), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    return write_docs(tmp_path_factory.mktemp("docs"), 4, 10, seed=100)  # ~9 kB: ~200 blocks


@pytest.fixture(scope="module")
def reference(tmp_path_factory, docs) -> dict[str, Reference]:
    """layout -> the never-killed store's ingest counts, records, block payloads and answers."""
    base = tmp_path_factory.mktemp("reference")
    return {layout: build_reference(Setup(base / layout, layout=layout), docs) for layout in ("chain", "sections")}


@pytest.mark.parametrize("durability, kills", [
    ("normal", ["records", "delay"]),
    ("full", ["delay", "records"]),
    ("strict", ["records"]),
    ("async", ["records", "delay"]),
    ("volatile", ["records"]),
])
def test_killed_chain_ingest_resumes_to_the_never_killed_store(warm, tmp_path, docs, reference, durability, kills):
    setup = Setup(tmp_path / "store", durability=durability)
    kill_and_finish(warm, setup, docs, reference["chain"], kills, seed=zlib.crc32(durability.encode()))


def test_killed_sections_ingest_resumes_to_the_never_killed_store(warm, tmp_path, docs, reference):
    setup = Setup(tmp_path / "store", layout="sections")
    kill_and_finish(warm, setup, docs, reference["sections"], ["delay"], seed=11)


def test_killed_encrypted_ingest_resumes_to_the_never_killed_plain_store(warm, tmp_path, docs, reference):
    """Encrypted at rest: the same plaintext K/V and answers as the plain never-killed store."""
    key = tmp_path / "master.key"
    key.write_text(random.Random(5).randbytes(32).hex())
    setup = Setup(tmp_path / "store", durability="full", key_file=key)
    kill_and_finish(warm, setup, docs, reference["chain"], ["records", "delay"], seed=12)
    marker = json.loads((setup.store / "GRM-STORE").read_text())
    assert "encryption" in marker and not (setup.store / "catalog.sqlite").exists()


@pytest.mark.model
def test_killed_smollm2_ingest_resumes_to_the_never_killed_store(warm, tmp_path):
    docs = write_docs(tmp_path / "docs", 3, 6, seed=200)  # ~720 SmolLM2 tokens: 14 blocks
    ref = build_reference(Setup(tmp_path / "reference", model=SMOLLM), docs)
    kill_and_finish(warm, Setup(tmp_path / "store", model=SMOLLM), docs, ref, ["records", "delay"], seed=13)
