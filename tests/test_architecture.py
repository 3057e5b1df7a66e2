"""Data flows one way (DESIGN.md, "Data flows one way"; ARCHITECTURE.md, "Who may import whom").

Every import statement of every module under grm/ (at any depth: module level, inside functions,
under TYPE_CHECKING), and every module a face names by string for a lazy import (`Choices(...)`,
`importlib.import_module(...)`), is read with `ast` and checked against the planes below:
1. a lower plane never imports an upper one, and the stricter planes and the faces import only
   what their allow-list names (the faces: the runtime, the errors, and a face they start);
2. no cycle among the imports that run when a module is imported (module level, TYPE_CHECKING
   blocks and function bodies left out), inside a folder or across folders;
3. no private name (`_x`) is imported from another module.
Each violation is named with file:line. Every checker takes the root of a tree, and is run on
synthetic trees in tmp_path too, so each can fail.
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
    # The faces call the runtime only (grm/runtime/admin.py, commands.py, tiering.py, archiving.py
    # hold what they do to a store without a model or after a write), and start one another:
    "cli": {"errors", "runtime", "serve", "demo"},  # `grm serve` starts grm/serve; cli/remote.py reads the
    #   endpoint file grm/serve/endpoint.py writes; `grm demo` and `grm bench` run grm/demo
    "serve": {"errors", "runtime"},
    "demo": {"errors", "runtime"},
    "grm": {"errors", "runtime"},  # the package's facade: Runtime, RuntimeConfig, Answer
    "__main__": {"cli"},  # `python -m grm`
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


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def from_target(node: ast.ImportFrom, path: Path, root: Path) -> str:
    """The absolute module an `ImportFrom` reads from, a relative one resolved."""
    if not node.level:
        return node.module or ""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


LAZY = {"Choices", "import_module"}  # calls that import the module named by their first argument


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module) for every import in the file, relative imports resolved, and every
    grm module named as a string to a lazy import (`Choices("grm.runtime.config", ...)`)."""
    out = []
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = from_target(node, path, root)
            if target == "grm":  # `from grm import store` names a plane; `from grm import Runtime` the facade
                out += [(node.lineno, f"grm.{a.name}" if a.name in LAYERS else "grm") for a in node.names]
            else:
                out.append((node.lineno, target))
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            value = node.args[0].value
            if name in LAZY and isinstance(value, str) and value.startswith("grm."):
                out.append((node.lineno, value))
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


# ----- cycles ---------------------------------------------------------------------------------------
def run_at_import(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported: module level and class bodies,
    inside if/try/with; not function bodies (run later) nor `if TYPE_CHECKING:` (never run)."""
    out: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.append(node)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, (ast.With, ast.ClassDef)):
                visit(node.body)

    visit(tree.body)
    return out


def module_graph(root: Path) -> dict[str, dict[str, str]]:
    """module -> {module of the tree it imports when imported: where}. `from pkg import name`
    points at the submodule `pkg.name` when there is one, else at `pkg`."""
    paths = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, dict[str, str]] = {}
    for me, path in paths.items():
        out: dict[str, str] = {}
        for node in run_at_import(parse(path)):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = from_target(node, path, root)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in paths else base for a in node.names]
            for target in targets:
                if target in paths and target != me:
                    out.setdefault(target, f"{path.relative_to(root.parent)}:{node.lineno}")
        graph[me] = out
    return graph


def cycles(root: Path) -> list[str]:
    """Every import cycle of the tree (one per strongly connected set of modules), as
    'a (file:line) -> b (file:line) -> a'."""
    graph = module_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                found.append(sorted(members))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    out = []
    for members in sorted(found):
        path, here = [], members[0]
        while here not in path:  # walk inside the set until a module repeats: one cycle through it
            path.append(here)
            here = min(w for w in graph[here] if w in members)
        loop = path[path.index(here):] + [here]
        out.append(" -> ".join(f"{a} ({graph[a][b]})" for a, b in zip(loop, loop[1:])) + f" -> {here}")
    return out


# ----- private names --------------------------------------------------------------------------------
def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_imports(root: Path) -> list[str]:
    """Every private name (`_x`, or a module `_x`) imported from another module, as file:line."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.ImportFrom):
                target = from_target(node, path, root)
                names = [a.name for a in node.names if private(a.name)]
                names += [target] if any(private(part) for part in target.split(".")) else []
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names if any(private(part) for part in a.name.split("."))]
            else:
                continue
            found += [f"{path.relative_to(root.parent)}:{node.lineno}: {module_name(path, root)} imports {n}"
                      for n in names]
    return found


def test_no_lower_plane_imports_an_upper_one() -> None:
    edges = scan(GRM)
    assert len(edges) > 100  # the scan saw the package
    assert check(edges) == []


def test_no_import_cycle_anywhere_in_grm() -> None:
    assert len(module_graph(GRM)) > 100  # the graph saw the package
    assert cycles(GRM) == []


def test_no_private_name_is_imported_from_another_module() -> None:
    assert private_imports(GRM) == []


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
    # the faces call the runtime only
    ("grm.cli.stats", "grm.store.tiering"), ("grm.cli.common", "grm.store"), ("grm.cli.common", "grm.models.registry"),
    ("grm.cli.tier", "grm.archive.policy"), ("grm.cli.memory", "grm.policy.grammar"), ("grm.cli.x", "grm.exact"),
    ("grm.serve.engine", "grm.archive.policy"), ("grm.serve.memory_api", "grm.policy.grammar"),
    ("grm.serve.http", "grm.store.tenant"), ("grm.serve.server", "grm.models"), ("grm.serve.x", "grm.cli"),
    ("grm.serve.x", "grm.demo"), ("grm.demo.run", "grm.store"), ("grm.demo.run", "grm.serve"),
    ("grm", "grm.store"), ("grm.__main__", "grm.runtime"),
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
    ("grm.cli.stats", "grm.runtime.admin"), ("grm.serve.memory_api", "grm.runtime.commands"),
    ("grm.cli.bench", "grm.demo.run"), ("grm.demo.run", "grm.runtime.config"), ("grm.serve.app", "grm.errors"),
    ("grm.cli.ask", "argparse"), ("grm.serve.app", "starlette.routing"),
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


def package(root: Path, *names: str) -> None:
    """Empty packages grm, grm/NAME... under `root`'s parent (`root` is the tree's grm/)."""
    for name in ("", *names):
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "__init__.py").write_text("")


def test_a_face_reaching_past_the_runtime_is_found(tmp_path: Path) -> None:
    """A face that imports the store, the policy plane or the archive (at module level, in a
    function, or named by string for a lazy import) is reported; one that calls the runtime, the
    errors and the face it starts is not."""
    root = tmp_path / "grm"
    package(root, "cli", "serve", "demo", "runtime", "store", "policy", "archive")
    (root / "cli" / "ok.py").write_text(
        "from grm.runtime.admin import open_store\nfrom grm.errors import UserInputError\n"
        "from grm.serve import endpoint\nx = Choices('grm.runtime.config', 'LAYOUTS')\n"
        "def f():\n    from grm.demo.run import run_demo\n")
    (root / "serve" / "ok.py").write_text("from grm.runtime import commands\nimport starlette\n")
    assert check(scan(root)) == []
    (root / "cli" / "stats.py").write_text("def run():\n    from grm.store.tiering import inventory\n")
    (root / "cli" / "flags.py").write_text("import importlib\nx = Choices('grm.store.config', 'DURABILITY_MODES')\n"
                                           "y = importlib.import_module('grm.archive.salient')\n")
    (root / "serve" / "api.py").write_text("from grm.policy.grammar import parse\n")
    (root / "demo" / "run.py").write_text("from grm.serve import app\n")
    found = check(scan(root))
    assert [f.split(": ")[0] for f in found] == ["grm/cli/flags.py:2", "grm/cli/flags.py:3", "grm/cli/stats.py:2",
                                                 "grm/demo/run.py:1", "grm/serve/api.py:1"]
    assert "grm.cli.stats -> grm.store.tiering: cli may import only ['demo', 'errors', 'runtime', 'serve']" in found[2]
    assert "serve may import only ['errors', 'runtime'], not policy" in found[4]


def test_an_import_cycle_is_found_inside_and_across_folders(tmp_path: Path) -> None:
    """Two modules of one folder importing each other, and three modules of three folders in a
    ring, are each one cycle with file:line per edge; an import back inside a function or under
    TYPE_CHECKING is no cycle (it runs later, or never)."""
    root = tmp_path / "grm"
    package(root, "store", "exact", "sections", "grafts")
    (root / "store" / "a.py").write_text("from grm.store.b import B\nA = 1\n")
    (root / "store" / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                         "    from grm.store.a import A\nB = 1\n"
                                         "def f():\n    from grm.store import a\n")
    (root / "exact" / "x.py").write_text("import os\nfrom grm.sections import y\n")
    assert cycles(root) == []
    (root / "store" / "b.py").write_text("import json\nfrom . import a\nB = 1\n")
    (root / "sections" / "y.py").write_text("from grm.grafts.z import Z\n")
    (root / "grafts" / "z.py").write_text("try:\n    from grm.exact.x import X\nexcept ImportError:\n    X = None\nZ = 1\n")
    assert cycles(root) == [
        "grm.exact.x (grm/exact/x.py:2) -> grm.sections.y (grm/sections/y.py:1) -> grm.grafts.z (grm/grafts/z.py:2)"
        " -> grm.exact.x",
        "grm.store.a (grm/store/a.py:1) -> grm.store.b (grm/store/b.py:2) -> grm.store.a",
    ]


def test_a_private_name_imported_from_another_module_is_found(tmp_path: Path) -> None:
    root = tmp_path / "grm"
    package(root, "store")
    (root / "store" / "log.py").write_text("def _check():\n    pass\n\ndef check():\n    _check()\n")
    (root / "store" / "ok.py").write_text("from grm.store.log import check\nfrom grm import __version__\n")
    assert private_imports(root) == []
    (root / "store" / "salvage.py").write_text("from grm.store.log import check, _check\n"
                                               "def f():\n    from ._impl import x\n")
    assert private_imports(root) == ["grm/store/salvage.py:1: grm.store.salvage imports _check",
                                     "grm/store/salvage.py:3: grm.store.salvage imports grm.store._impl"]


# The only modules that name a concrete store class: they open one. Everything else takes a
# grm.store.backend.StoreBackend (and checks optional abilities with isinstance).
OPENERS = {"grm.runtime.runtime", "grm.runtime.admin"}
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
