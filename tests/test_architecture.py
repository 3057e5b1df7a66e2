"""Data flows one way (DESIGN.md, "Data flows one way"; ARCHITECTURE.md, "Who may import whom").

Every import statement of every module under grm/ (at any depth: module level, inside functions,
under TYPE_CHECKING) is read with `ast` and checked against the planes below. A lower plane that
imports an upper one fails the test with file:line. The checker itself is tested on hand-made
import lists and on a synthetic package tree, so it can fail.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

GRM = Path(__file__).resolve().parents[1] / "grm"

# Layers, lowest first: a plane may import its own layer and the layers below, never above.
LAYERS: dict[str, int] = {
    "errors": 0, "english": 0,  # English words and date patterns: pure functions over strings
    "store": 1, "dialects": 1, "models": 1,  # durable plane; what GRM knows of models
    "kv": 2, "route": 2, "exact": 2, "sections": 2, "grafts": 2, "archive": 2, "policy": 2,
    "runtime": 3,  # the loop that ties them: ingest and the one answer pipeline
    "demo": 4,  # the first minute, run by `grm demo`
    "cli": 5, "serve": 5, "grm": 5, "__main__": 5,  # the faces (and the package's root facade)
}
# Stricter than the layers: what each of these may import besides itself (and nothing else of grm).
ONLY: dict[str, set[str]] = {
    "errors": set(),
    "english": set(),  # words know nothing of grm: every plane that reads text by rule may use them
    "store": {"errors"},  # the store knows nothing of models, tensors or policy
    "dialects": {"errors"},  # dialects know nothing of storage
    "models": {"errors", "dialects"},
    "kv": {"errors", "dialects", "models"},  # mechanics on caches: no routing, grafts or policy
    "policy": {"errors", "english", "store"},  # policy decides what is true, in Python, on store rows
}
MECHANICS = {"kv", "route", "exact", "sections", "grafts", "archive"}  # never decide what is true
# Third-party packages a plane may not import.
NO_THIRD_PARTY: dict[str, set[str]] = {
    "policy": {"torch", "numpy", "transformers", "safetensors"},  # policy never reaches into tensors
    "english": {"torch", "numpy", "transformers", "safetensors"},  # words are strings
    "store": {"torch", "numpy", "transformers"},  # payloads are opaque bytes
}


def plane(module: str) -> str:
    """'grm.store.log' -> 'store'; 'grm.errors' -> 'errors'; 'grm' -> 'grm'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in the file, relative imports resolved."""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "grm":  # `from grm import store` names a plane; `from grm import Runtime` the facade
                out += [(node.lineno, f"grm.{a.name}" if a.name in LAYERS else "grm") for a in node.names]
            else:
                out.append((node.lineno, target))
    return out


def violation(src: str, target: str) -> str | None:
    """Why `src` (a grm module) may not import `target` (any module), or None if it may."""
    here = plane(src)
    if here not in LAYERS:
        return f"{src} is in no plane: add {here!r} to ARCHITECTURE.md and this test's LAYERS"
    top = target.split(".")[0]
    if top != "grm":
        if top in NO_THIRD_PARTY.get(here, ()):
            return f"{here} may not import {top}"
        return None
    there = plane(target)
    if there == here:
        return None
    if there not in LAYERS:
        return f"{target} is in no plane"
    if here in ONLY and there not in ONLY[here]:
        return f"{here} may import only {sorted(ONLY[here]) or 'nothing of grm'}, not {there}"
    if here in MECHANICS and there == "policy":
        return f"{here} is mechanics and may not import policy"
    if LAYERS[there] > LAYERS[here]:
        return f"{here} (layer {LAYERS[here]}) may not import {there} (layer {LAYERS[there]})"
    return None


def check(edges: Iterable[tuple[str, str, str]]) -> list[str]:
    """edges: (where, source module, imported module) -> 'where: source -> target: why'."""
    return [f"{where}: {src} -> {target}: {why}" for where, src, target in edges
            if (why := violation(src, target)) is not None]


def scan(root: Path) -> list[tuple[str, str, str]]:
    edges = []
    for path in sorted(root.rglob("*.py")):
        src = module_name(path, root)
        edges += [(f"{path.relative_to(root.parent)}:{line}", src, target) for line, target in imports(path, root)]
    return edges


def test_no_lower_plane_imports_an_upper_one() -> None:
    edges = scan(GRM)
    assert len(edges) > 100  # the scan saw the package
    assert check(edges) == []


def test_every_package_under_grm_is_a_plane() -> None:
    packages = {p.name for p in GRM.iterdir() if (p / "__init__.py").exists()}
    assert packages <= set(LAYERS), sorted(packages - set(LAYERS))


@pytest.mark.parametrize("src,target", [
    ("grm.store.sim.workloads", "grm.policy.memory"),  # store -> policy
    ("grm.store.store", "grm.runtime"),
    ("grm.store.payloads", "torch"),
    ("grm.dialects.llama", "grm.store.record"),  # dialects -> store
    ("grm.kv.cache", "grm.policy"),  # kv -> policy
    ("grm.kv.cache", "grm.grafts.arena"),
    ("grm.kv.device", "grm.runtime.config"),
    ("grm.models.loader", "grm.store"),
    ("grm.models.loader", "grm.kv.device"),
    ("grm.policy.memory", "torch"),
    ("grm.policy.memory", "grm.kv"),
    ("grm.policy.memory", "grm.grafts.memory"),
    ("grm.exact.memory", "grm.runtime.answer"),
    ("grm.grafts.memory", "grm.policy.ledger"),
    ("grm.archive.tier", "grm.cli.common"),
    ("grm.route.lexical", "grm.serve"),
    ("grm.runtime.answer", "grm.cli"),
    ("grm.runtime.runtime", "grm.serve.engine"),
    ("grm.demo.run", "grm.cli"),
    ("grm.newplane.x", "grm.errors"),  # an unknown plane is never silently allowed
    ("grm.english.words", "grm.errors"),  # english imports nothing of grm
    ("grm.english.dates", "torch"),
])
def test_checker_flags_each_forbidden_direction(src: str, target: str) -> None:
    assert violation(src, target) is not None


@pytest.mark.parametrize("src,target", [
    ("grm.store.store", "grm.errors"), ("grm.store.store", "grm.store.log"), ("grm.store.crypt", "cryptography"),
    ("grm.models.loader", "grm.dialects"), ("grm.kv.payload", "grm.models.identity"),
    ("grm.exact.memory", "grm.store.backend"), ("grm.sections.memory", "grm.exact"),
    ("grm.grafts.memory", "grm.route"), ("grm.policy.ledger", "grm.store"),
    ("grm.runtime.answer", "grm.policy"), ("grm.runtime.answer", "grm.exact"),
    ("grm.cli.ask", "grm.runtime"), ("grm.serve.engine", "grm.runtime"), ("grm.cli.serve", "grm.serve"),
    ("grm", "grm.runtime"), ("grm.__main__", "grm.cli"),
    ("grm.policy.fact", "grm.english.words"), ("grm.grafts.floor", "grm.english.dates"),
    ("grm.route.lexical", "grm.english.words"), ("grm.runtime.lead", "grm.english.verbs"),
])
def test_checker_allows_the_one_way_flow(src: str, target: str) -> None:
    assert violation(src, target) is None


def test_scan_finds_a_violating_import_anywhere_in_a_synthetic_tree(tmp_path: Path) -> None:
    """A function-local import, a relative import and a TYPE_CHECKING import are all seen, with
    their file:line; a clean tree passes."""
    root = tmp_path / "grm"
    for pkg in ("store", "policy", "kv"):
        (root / pkg).mkdir(parents=True)
        (root / pkg / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    (root / "store" / "ok.py").write_text("from grm.errors import StoreError\nfrom . import ok\n")
    assert check(scan(root)) == []
    (root / "store" / "bad.py").write_text("import os\n\ndef f():\n    from ..policy import memory\n")
    (root / "kv" / "bad.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from grm.policy.fact import Fact\n")
    (root / "policy" / "bad.py").write_text("import torch.nn\n")
    found = check(scan(root))
    assert [f.split(": ")[0] for f in found] == ["grm/kv/bad.py:3", "grm/policy/bad.py:1", "grm/store/bad.py:4"]
    assert "grm.store.bad -> grm.policy" in found[2]


# The only modules that name a concrete store class: they open one. Everything else takes a
# grm.store.backend.StoreBackend (and checks optional abilities with isinstance).
OPENERS = {"grm.runtime.runtime", "grm.cli.common"}
CONCRETE = {"Store", "RedisStore"}


def concrete_store_imports(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        src = module_name(path, root)
        if plane(src) == "store" or src in OPENERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grm.store"):
                found += [f"{path.relative_to(root.parent)}:{node.lineno}: {src} imports {a.name}"
                          for a in node.names if a.name in CONCRETE]
    return found


def test_only_the_openers_name_a_concrete_store() -> None:
    assert concrete_store_imports(GRM) == []


def test_a_plane_importing_store_itself_is_found(tmp_path: Path) -> None:
    root = tmp_path / "grm"
    (root / "policy").mkdir(parents=True)
    (root / "policy" / "ok.py").write_text("from grm.store.backend import StoreBackend\n")
    assert concrete_store_imports(root) == []
    (root / "policy" / "bad.py").write_text("def f():\n    from grm.store import Record, Store\n")
    assert concrete_store_imports(root) == ["grm/policy/bad.py:2: grm.policy.bad imports Store"]


# Record kinds are named once (grm/store/kinds.py): a store call outside the store never spells one.
STORE_CALLS = {"get", "put", "records", "children", "delete", "set_state", "search_text"}


def kind_literals(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        if plane(module_name(path, root)) == "store":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in STORE_CALLS):
                continue
            receiver = ast.unparse(node.func.value)
            if not receiver.endswith(("store", "txn")):
                continue
            kinds = node.args[1:2] + [k.value for k in node.keywords if k.arg == "kind"]
            found += [f"{path.relative_to(root.parent)}:{node.lineno}: {receiver}.{node.func.attr}(..., {k.value!r})"
                      for k in kinds if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    return found


def test_store_calls_name_kinds_from_store_kinds() -> None:
    assert kind_literals(GRM) == []


def test_a_spelled_kind_is_found(tmp_path: Path) -> None:
    root = tmp_path / "grm"
    (root / "exact").mkdir(parents=True)
    (root / "exact" / "ok.py").write_text("from grm.store.kinds import BLOCK\n"
                                          "def f(self, txn):\n"
                                          "    self.store.get(self.tenant, BLOCK, 'k')\n"
                                          "    txn.put('t', BLOCK, 'key-literal-is-fine')\n"
                                          "    self.cache.get('block', 1)\n")
    assert kind_literals(root) == []
    (root / "exact" / "bad.py").write_text("def f(ex, rt):\n"
                                           "    ex.store.children(ex.tenant, 'block', ex.sink_fp)\n"
                                           "    list(rt.store.records(kind='document'))\n")
    assert kind_literals(root) == ["grm/exact/bad.py:2: ex.store.children(..., 'block')",
                                   "grm/exact/bad.py:3: rt.store.records(..., 'document')"]
