"""What every subcommand shares: the common flags, the one store opener, the one runtime opener,
and printing.

Nothing here imports torch at module level: building the parser (`grm --help`) stays fast. Choices
come from the runtime's constants through `Choices`, which imports the constant only when argparse
checks a value or prints a subcommand's help.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from grm.cli.terminal import json_text, say, waiting
from grm.errors import UserInputError
from grm.runtime.locations import DEFAULT_MODEL

if TYPE_CHECKING:
    from grm.runtime import Runtime
    from grm.runtime.admin import StoreBackend
    from grm.runtime.config import RuntimeConfig

# Flags every subcommand (and every action of a nested one) accepts. `dest` -> default.
COMMON_DEFAULTS = {"store": None, "tenant": "default", "model": None, "threads": None, "json": False,
                   "durability": "normal", "key_file": None, "compress": False, "verbose": False,
                   "device": "auto", "dtype": "auto", "system": None}


class Choices:
    """A tuple of allowed values the runtime names, imported on first use
    (`Choices("grm.runtime.config", "CHANNELS")`).

    argparse only iterates or tests membership when it checks a given value or formats help, so
    a parser built with these imports nothing heavy. Give such an argument a `metavar`: argparse
    would otherwise iterate the choices when the argument is added."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name

    def _values(self) -> tuple[str, ...]:
        return tuple(getattr(importlib.import_module(self.module), self.name))

    def __contains__(self, value: object) -> bool:
        return value in self._values()

    def __iter__(self) -> Iterator[str]:
        return iter(self._values())

    def __len__(self) -> int:
        return len(self._values())


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def seconds(text: str) -> float:
    """argparse type: a number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds, got {text!r}")
    return value


def byte_count(text: str) -> int:
    """argparse type: '64M', '512k', '1G' or a plain byte count."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().removesuffix("b")
    try:
        value = int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)
    except (ValueError, KeyError):
        raise argparse.ArgumentTypeError(f"not a byte count: {text!r} (e.g. 65536, 512k, 64M)") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 bytes, got {text!r}")
    return value


def share(text: str) -> float:
    """argparse type: a share in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return value


def add_mount_flags(p: argparse.ArgumentParser) -> None:
    """How routed grafts are placed beside each other and a question is read after them: the
    flags `ask`, `chat` and `serve` share."""
    p.add_argument("--repair", type=int, default=0, metavar="N",
                   help="recompute the first N tokens of each mounted graft in context (default 0)")
    p.add_argument("--blend", type=share, default=0.0, metavar="SHARE",
                   help="with two or more grafts mounted, recompute this share of their tokens, those whose "
                        "K/V deviate most from a joint read (CacheBlend-style; e.g. 0.15; default 0: off)")
    p.add_argument("--reread", default="auto", choices=Choices("grm.runtime.config", "REREAD"), metavar="WHEN",
                   help="%(choices)s: read a graft's text instead of mounting its K/V: auto (default) reads "
                        "chat turns and facts as text for a model with a chat template, and any other graft "
                        "where that costs no more than its mount (costs measured once per model and machine); "
                        "never; always")
    p.add_argument("--lead", default="auto", choices=Choices("grm.runtime.config", "LEADS"), metavar="HOW",
                   help="%(choices)s: begin a plain question's answer from its words: auto (default) is off for "
                        "a model with a chat template and model otherwise; rules; model (the rules, then the "
                        "model where no rule applies); off (the question plain)")
    p.add_argument("--extractor", default="rule", choices=Choices("grm.runtime.config", "EXTRACTORS"), metavar="WHO",
                   help="%(choices)s: who reads a plain-words update of a fact memory holds (\"changed the wifi pw "
                        "to X\"): the rules (default), the model shown the turn and the facts held, or the rules "
                        "then the model")
    p.add_argument("--rules", default="auto", choices=Choices("grm.runtime.config", "RULES"), metavar="SWITCH",
                   help="%(choices)s: the English layer, one switch: answer leads, facts and updates read from plain "
                        "turns by rule, the abstain floor and its related words. off: each of them left at its "
                        "default is off and the model reads memory as routed (memory commands stay; --lead and "
                        "--extractor given still apply); on: as those options say; "
                        "auto (default): off for a model with a chat template, on otherwise")
    p.add_argument("--later", type=int, default=1, metavar="N",
                   help="per routed memory, mount up to N turns said after it that name one of its rare words "
                        "(a name, a code, the old value), read after it; 0: off (default 1)")
    p.add_argument("--meaning", default="auto", choices=Choices("grm.runtime.config", "MEANINGS"), metavar="SWITCH",
                   help="%(choices)s: route chat turns and facts also by what they mean (the model's reading of "
                        "each, one short forward pass per turn and question), so a turn that shares no word "
                        "with the question, and the later turn that changed it, are mounted; auto (default): on "
                        "for a model with a chat template, off otherwise")


def mount_options(args: argparse.Namespace) -> dict[str, object]:
    """The RuntimeConfig fields `add_mount_flags` sets."""
    return {"repair": args.repair, "blend": args.blend, "reread": args.reread, "lead": args.lead,
            "extractor": args.extractor, "rules": args.rules, "later": args.later, "meaning": args.meaning}


MAX_NEW_TOKENS_HELP = "most tokens generated for an answer (>= 1; default %(default)s)"


def common_parser(*, nested: bool = False) -> argparse.ArgumentParser:
    """The common flags as an argparse parent. The top-level parser takes the one with defaults;
    `nested=True` gives the copy for subcommands and their actions (`grm grafts list`): its flags
    default to nothing, so a flag given before (`grm --store D grafts list`, `grm grafts --store D
    list`) is not overwritten by a later parser's default."""
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("common options")
    d = {k: argparse.SUPPRESS for k in COMMON_DEFAULTS} if nested else COMMON_DEFAULTS
    g.add_argument("--store", metavar="DIR|URL", default=d["store"],
                   help="store directory (default $GRM_HOME, else ~/.grm), or redis://HOST:PORT/NAMESPACE "
                   "for a memory shared by several processes")
    g.add_argument("--tenant", metavar="NAME", default=d["tenant"],
                   help="owner of the memory: 1-64 letters, digits, '_', '.', '-', not starting with '_' "
                   "(default: default)")
    g.add_argument("--model", metavar="NAME|PATH", default=d["model"],
                   help=f"a registry name ({DEFAULT_MODEL}, smollm2-135m, gemma3-270m, random:llama-3-8b, ...), a "
                   f"local HF folder or a local .gguf file (default {DEFAULT_MODEL})")
    g.add_argument("--threads", type=positive_int, metavar="N", default=d["threads"],
                   help="torch threads (default: all cores; more than the cores here is clamped)")
    g.add_argument("--json", action="store_true", default=d["json"], help="print only JSON on stdout")
    g.add_argument("--durability", choices=Choices("grm.runtime.admin", "DURABILITY_MODES"), metavar="MODE",
                   default=d["durability"], help="store durability mode: %(choices)s (default normal)")
    g.add_argument("--key-file", metavar="PATH", default=d["key_file"],
                   help="master key (32 raw bytes or 64 hex chars) for encryption at rest; or set GRM_MASTER_KEY "
                   "(default: neither, no encryption)")
    g.add_argument("--compress", action="store_true", default=d["compress"],
                   help="compress payload files losslessly: the bytes of each K/V element split into planes, then "
                   "zstd (bf16 K/V: ~68%% of the bytes; reading costs ~10x a plain check per MB; default: "
                   "not compressed)")
    g.add_argument("--device", metavar="auto|cpu|cuda[:N]", default=d["device"],
                   help="where the model runs (default auto: cuda if present, else cpu)")
    g.add_argument("--dtype", metavar="auto|float32|bfloat16|float16", default=d["dtype"],
                   help="model weights' dtype (default auto: bfloat16 on a GPU, and on a CPU where bf16 was "
                   "measured at least 1.5x faster than fp32 at the model's width (once per CPU, kept in "
                   "~/.cache/grm/calibration); else float32)")
    g.add_argument("--system", metavar="memory|model|TEXT", default=d["system"],
                   help="the system message a model with a chat template reads first in every request: memory "
                   "(GRM's: answer from what you remember, the latest version holds), model (the template's own "
                   "default) or the text itself. K/V stored under one is not served under another (default "
                   "memory)")
    g.add_argument("-v", "--verbose", action="store_true", default=d["verbose"], help="more log lines on stderr")
    return p


# ---------------------------------------------------------------------------------------- openers


def master_key(args: argparse.Namespace) -> bytes | None:
    from grm.runtime.admin import load_master_key

    return load_master_key(args.key_file, os.environ.get("GRM_MASTER_KEY"))


def cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads(args: argparse.Namespace) -> int | None:
    """--threads, clamped to the cores here with a warning (torch crashes on absurd counts)."""
    n = args.threads
    if n is not None and n > cores():
        print(f"grm: warning: --threads {n} is more than the {cores()} cores here; using {cores()}",
              file=sys.stderr)
        return cores()
    return n


def store_root(args: argparse.Namespace) -> Path | str:
    """--store as a location: a folder (default $GRM_HOME, else ~/.grm) or a redis:// URL."""
    from grm.runtime.locations import store_location

    return store_location(args.store or None)


def open_store(args: argparse.Namespace, *, create: bool = False, read_only: bool = False) -> StoreBackend:
    """The one store opener of the model-free commands (grm/runtime/admin.py `open_store`: a folder
    or redis://HOST:PORT/NS). Without `create` a missing store is a user error (exit 2); a writer
    held off by another process's lock is told which (a running `grm serve` by its address)."""
    from grm.runtime.admin import open_store as open_location

    with named_holder():
        return open_location(store_root(args), args.tenant, durability=args.durability, master_key=master_key(args),
                             compress=args.compress, create=create, read_only=read_only, before_lock=check_unlocked)


def runtime_config(args: argparse.Namespace, **fields: object) -> RuntimeConfig:
    """A RuntimeConfig from the common flags plus a subcommand's `fields`."""
    from grm.runtime.config import RuntimeConfig

    opts: dict[str, object] = dict(tenant=args.tenant, threads=threads(args), durability=args.durability,
                                   master_key=master_key(args), compress=args.compress)
    if args.system is not None:
        opts["system"] = args.system
    for name in ("device", "dtype"):
        value = getattr(args, name)
        if name in RuntimeConfig.__dataclass_fields__:
            opts[name] = value
        elif value != "auto":
            raise UserInputError(f"--{name} {value} is not supported by this build (only auto)")
    return RuntimeConfig.from_options(store=args.store, model=args.model, **opts, **fields)


def open_runtime(args: argparse.Namespace, *, create: bool = True, **fields: object) -> Runtime:
    """The one runtime opener: RuntimeConfig -> Runtime.open. Without `create` a missing store is
    a user error (exit 2) and nothing is created."""
    from grm.runtime.admin import require_store

    config = runtime_config(args, **fields)
    if not create:
        require_store(config.store)
    check_unlocked(config.store)  # before the model loads: a held store fails at once
    from grm.runtime import Runtime

    with named_holder(), waiting(f"loading {config.model} (the first use of a model prepares it once)"):
        return Runtime.open(config)


def check_unlocked(root: Path | str) -> None:
    """StoreLocked, naming the holder (a `grm serve` by its address), if another process holds
    the writer lock of the local store at `root`."""
    from grm.runtime.admin import lock_pid

    pid = lock_pid(root)
    if pid is not None:
        from grm.cli.remote import locked

        raise locked(root, pid)


@contextlib.contextmanager
def named_holder() -> Iterator[None]:
    """A lock error raised inside (the store taken between the check and the open) names the holder."""
    from grm.errors import StoreLocked

    try:
        yield
    except StoreLocked as e:
        from grm.cli.remote import locked

        raise locked(Path(e.root), e.pid) from None


# --------------------------------------------------------------------------------------- printing


def _plain(value: object) -> str:
    """A value as a person reads it: lists comma-separated ('none' when empty), dicts as JSON."""
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value) if value else "none"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def human_bytes(n: int) -> str:
    """A byte count as a person reads it: 512 B, 1.5 KiB, 3.2 MiB, 1.1 GiB."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return str(n)


def emit(obj: dict, as_json: bool) -> None:
    """One JSON object, or `key: value` lines."""
    if as_json:
        say(json_text(obj))
    else:
        for key, value in obj.items():
            say(f"{key}: {_plain(value)}")


def show_progress(args: argparse.Namespace) -> bool:
    """Progress bars go to stderr: shown unless --json is asked and stderr is not a terminal."""
    return not args.json or sys.stderr.isatty()


def check_text(value: str, what: str) -> str:
    """`value` (from argv or a line of input) as text; UserInputError if it holds bytes that are not
    UTF-8 (Python carries them as lone surrogates)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start:exc.end].encode("utf-8", "surrogateescape")
        raise UserInputError(f"{what} is not UTF-8 text (bytes {bad!r} at character {exc.start})") from None
    return value
