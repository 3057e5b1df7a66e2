"""Process kills of the memory chat: a child that runs `grm ingest --layout sections` and then
`grm chat --script` (ordinary turns, harvested as grafts, and memory commands: "remember
permanently: my locker code is C0", then "correct memory: locker code C(i-1) => Ci" again and
again) is SIGKILLed at seeded random moments, >= 50 times over two stores (durability `normal`
and `full`), and restarted each time to go on.

How the test knows what was acknowledged: the child prints one JSON line per script line, after
`ChatSession.send` returned (the turn's graft, or the command's fact transaction, committed). A
restarted child gets the script from the first line whose JSON line did not appear; ingest is
idempotent and simply runs again. At most one line beyond the acknowledged ones can have
committed (the one in flight when the kill came), so the locker value may be that line's.

The child: the first kill of each store hits real `python -m grm ingest ... && python -m grm chat
...` processes; the others hit processes forked from a server that has imported grm, torch and
transformers (multiprocessing's forkserver), each running `grm.cli.main(argv)` for the same two
commands - the code `python -m grm` runs, without paying ~5 s of imports per kill. The kill
moments are in `wait_and_kill` (during startup and ingest, mid-turn, or right after a payload
file appears). Those are timed from outside, so whether one lands inside a write is luck; every
fifth forked child therefore kills itself at a fixed point instead: right after its n-th new
payload file is in place and before the log record naming it is appended (`die_inside_write`).
Each of those must leave a new orphan (fsck finds it), so a write cut short is tested on every run.

After every kill:
1. `grm fsck --json` exits 0 and reports no damaged record (orphans of the interrupted write are
   allowed).
2. Every record the store held after the previous kill is still there, and every record with a
   payload verifies (`Store.read_payload` is not None).
3. Every acknowledged turn's graft (its `harvested` id) is there and verifies; every fact an
   acknowledged command named (`f-...` in its answer) is there, with its fact graft verifying.
4. Exactly one live locker fact (none before the first "remember" committed), holding the value
   the last acknowledged command set or the value of the command in flight; every superseded fact
   has its lineage edge (a correction is one transaction).
At the end, after an unkilled run finishes the script:
5. `grm memory list` and `grm memory "show memory about: locker"` show exactly one locker fact,
   with the last correction's value.
6. A chat probe "What is my locker code?" mounts the live fact's graft and none of the superseded
   facts' grafts; `grm ask --mode grafts` answers from stored grafts.
7. `grm fsck --repair` leaves a store with no orphans and no damage.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import multiprocessing.forkserver
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from grm.cli import main as grm_main
from grm.policy import PolicyConfig, PolicyMemory
from grm.store import Store, StoreConfig
from tests.conftest import ROOT, lorem

TINY = "tiny-random-llama"
THREADS = "1"
GRAFT = "graft"  # grm.grafts.graft.KIND
FACT_ID = re.compile(r"\bf-[0-9a-f]{12}\b")
KILLS = {"normal": 40, "full": 12}  # kills that landed (the child did not finish first), per store
# Rounds of each store's script (three ordinary turns and a correction): a kill acknowledges ~1.4
# lines here, at most ~4 on a fast machine, so the script outlasts the kills; the last run
# finishes the rest unkilled. At most 40 corrections: lexical routing takes its 50 best BM25
# candidates before it drops superseded facts' grafts (grm/route/lexical.py), so with more than
# ~50 superseded locker facts the live one would never be routed.
ROUNDS = {"normal": 40, "full": 24}  # full: 12 rounds ran out after 10 kills on a quiet machine
PRELOAD = ["grm.cli", "grm.cli.chat", "grm.runtime.runtime", "grm.models.tiny",
           "transformers.models.llama.modeling_llama", "tests.runtime.test_kill_chat"]


@pytest.fixture(scope="module", autouse=True)
def _restore_torch_threads():
    """The in-process CLI calls set torch's thread count; give the rest of the session its own back."""
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def code(i: int) -> str:
    return str(1000 + 37 * i)


def make_script(rounds: int) -> tuple[list[str], list[str | None]]:
    """(lines, locker value after each line). No ordinary turn mentions the locker, so facts come
    only from the commands, and a locker question routes only to fact grafts."""
    lines = ["Tell me about the village market.", f"remember permanently: my locker code is {code(0)}"]
    for i in range(1, rounds + 1):
        lines += [f"What did the market record in winter {i}?", f"Which stalls opened first in week {i}?",
                  f"Tell me about the harvest of year {i}.", f"correct memory: locker code {code(i - 1)} => {code(i)}"]
    values: list[str | None] = []
    value = None
    for line in lines:
        if "locker code" in line:
            value = line.split()[-1]
        values.append(value)
    return lines, values


def cli(*args: str) -> tuple[int, list[dict]]:
    """`grm ARGS` in this process: (exit status, the JSON objects it printed, one a line)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = grm_main(list(args))
    return rc, [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def die_inside_write(nth: int) -> None:
    """In a forked child: SIGKILL this process right after its `nth` new payload file is renamed
    into place, before `write` returns to the transaction that would log it (invariant 5: the
    file comes first), so the file is left as an orphan. Writes of a file already there (same
    bytes stored before) do not count: they create nothing."""
    from grm.store.payloads import PayloadFiles, digest_of

    write = PayloadFiles.write
    created = 0

    def write_then_die(self, tenant, kind, key, data, **kw):
        nonlocal created
        path = self.layout.payload(tenant, self.codec.name(tenant, kind, key, digest_of(data)))
        existed = self.fs.exists(path)
        result = write(self, tenant, kind, key, data, **kw)
        if not existed and self.fs.exists(path):
            created += 1
            if created == nth:
                os.kill(os.getpid(), signal.SIGKILL)
        return result

    PayloadFiles.write = write_then_die


def run_cli_forked(argvs: list[list[str]], out: str, die_at_write: int | None = None) -> None:
    """The forked child: `grm ARGV` for each argv in turn, stdout appended to `out` (chat flushes
    each turn's JSON line as soon as `send` returns); with `die_at_write`, see `die_inside_write`."""
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())  # not tqdm's default multiprocessing lock: a kill would leak its semaphore
    if die_at_write is not None:
        die_inside_write(die_at_write)
    with open(out, "a", encoding="utf-8") as f, contextlib.redirect_stdout(f):
        for argv in argvs:
            if grm_main(argv) != 0:
                raise SystemExit(3)


@dataclass
class Chat:
    """One store under test and what the test knows about it."""

    store: Path
    docs: Path
    durability: str
    lines: list[str]
    values: list[str | None]  # locker value once lines[:i + 1] committed
    acked: int = 0  # script lines whose JSON line was printed
    grafts: set[str] = field(default_factory=set)  # acknowledged turns' grafts
    facts: set[str] = field(default_factory=set)  # facts acknowledged commands named
    seen: set[tuple[str, str]] = field(default_factory=set)  # (kind, key) after the last check
    runs: int = 0
    orphans: set[str] = field(default_factory=set)  # orphan payload files fsck reported at the last check
    orphaned: int = 0  # kills after which fsck found a new orphan (the kill cut a write short)
    inside: int = 0  # children that killed themselves inside a write (`die_inside_write`)
    in_flight: int = 0  # kills after which the unacknowledged correction in flight had committed

    def common(self) -> list[str]:
        return ["--store", str(self.store), "--model", TINY, "--threads", THREADS, "--json",
                "--durability", self.durability]

    def argvs(self, script: Path) -> list[list[str]]:
        return [["ingest", str(self.docs), *self.common(), "--layout", "sections", "--block-tokens", "64",
                 "--section-tokens", "64"],
                ["chat", "--script", str(script), *self.common(), "--clear-context", "--max-new-tokens", "2"]]

    def value_after(self, n: int) -> str | None:
        """The locker value once the first n lines committed."""
        return self.values[n - 1] if n else None

    def allowed(self) -> set[str | None]:
        return {self.value_after(self.acked), self.value_after(min(self.acked + 1, len(self.lines)))}


def chat_lines(out: Path) -> list[dict]:
    """The complete chat JSON lines the child printed (a line cut by the kill is not acknowledged)."""
    text = out.read_text("utf-8") if out.exists() else ""
    done = text[: text.rfind("\n") + 1]
    return [obj for obj in map(json.loads, filter(None, done.splitlines())) if "turn" in obj]


def files_written(store: Path) -> int:
    """Payload files on disk, temporaries included: a new one means a write has begun."""
    return sum(len(names) for _, _, names in os.walk(store / "payloads"))


def wait_and_kill(chat: Chat, out: Path, alive, kill, rng: random.Random, real: bool) -> None:
    """SIGKILL the child at a random moment, one of (forked children only for `start`: a real one
    is still importing then):
    `start` (1 in 5): up to 0.5 s after it started (store opening, ingest, the first turns);
    `turn` (2 in 5): after 0-2 new JSON lines, then up to 25 ms (a turn takes ~20 ms);
    `write` (2 in 5): after 0-2 new JSON lines, once the next payload file (a block or a graft) appears,
    then up to 3 ms (inside the write, or between it and the commit or the JSON line)."""
    how = rng.choices(["start", "turn", "write"], [0 if real else 1, 2, 2])[0]
    deadline = time.monotonic() + 120
    if how == "start":
        time.sleep(rng.uniform(0.0, 0.5))
    else:
        target = rng.randint(0, min(2, len(chat.lines) - chat.acked - 1))
        while alive() and len(chat_lines(out)) < target and time.monotonic() < deadline:
            time.sleep(0.002)
        if how == "turn":
            time.sleep(rng.uniform(0.0, 0.025))
        else:
            files = files_written(chat.store) if chat.store.exists() else 0
            while alive() and files_written(chat.store) <= files and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(rng.uniform(0.0, 0.003))
    if alive():
        with contextlib.suppress(ProcessLookupError):
            kill()


def run_child(chat: Chat, ctx, rng: random.Random | None, real: bool = False) -> int:
    """Run ingest + chat of the unacknowledged lines in a child (a real `python -m grm` pair, or
    forked from the preloaded server); with `rng`, SIGKILL it at a random moment, or (every fifth
    run, forked) let it kill itself inside its first to third new payload write. Returns the exit
    status; records what the child acknowledged."""
    chat.runs += 1
    die_at = rng.randint(1, 3) if rng is not None and not real and chat.runs % 5 == 0 else None
    script = chat.store.parent / f"script-{chat.runs}.txt"
    script.write_text("\n".join(chat.lines[chat.acked:]) + "\n", encoding="utf-8")
    out = chat.store.parent / f"out-{chat.runs}.jsonl"
    argvs = chat.argvs(script)
    if real:
        ingest, chat_cmd = (shlex.join([sys.executable, "-m", "grm", *a]) for a in argvs)
        with open(out, "a", encoding="utf-8") as f:
            proc = subprocess.Popen(["sh", "-c", f"{ingest} && exec {chat_cmd}"], cwd=ROOT, stdout=f,
                                    start_new_session=True, env={**os.environ, "OMP_NUM_THREADS": THREADS})
        alive, kill = (lambda: proc.poll() is None), (lambda: os.killpg(proc.pid, signal.SIGKILL))
    else:
        proc = ctx.Process(target=run_cli_forked, args=(argvs, str(out), die_at))
        proc.start()
        alive, kill = proc.is_alive, proc.kill
    if rng is not None and die_at is None:
        wait_and_kill(chat, out, alive, kill, rng, real)
    if real:
        rc = proc.wait(timeout=120)
    else:
        proc.join(timeout=120)
        rc = proc.exitcode
    assert rc in (0, -signal.SIGKILL), f"child exited with {rc}"
    chat.inside += die_at is not None and rc == -signal.SIGKILL
    for n, obj in enumerate(chat_lines(out)):
        assert "error" not in obj and obj["user"] == chat.lines[chat.acked + n], obj
        if obj["harvested"]:
            chat.grafts.add(obj["harvested"])
        if obj["command"]:  # only a line that may have committed before the last kill changes nothing
            assert obj["changed"] or n == 0, obj
            chat.facts.update(FACT_ID.findall(obj["answer"]))
    chat.acked += len(chat_lines(out))
    return rc


def check(chat: Chat) -> None:
    """Expectations 1-4 of the module docstring."""
    if not (chat.store / "GRM-STORE").exists():  # killed before it created the store
        assert chat.acked == 0 and not chat.seen
        return
    rc, [fsck] = cli("fsck", *chat.common())
    assert rc == 0 and fsck["damaged"] == [], fsck  # 1.
    with Store.open(StoreConfig(root=chat.store, durability=chat.durability)) as store:
        recs = {(r.kind, r.key): r for r in store.records("default")}
        assert chat.seen <= recs.keys(), sorted(chat.seen - recs.keys())[:5]  # 2. nothing lost
        bad = [k for k, r in recs.items() if r.payload is not None and store.read_payload(r) is None]
        assert bad == []  # 2. every payload verifies
        assert {(GRAFT, g) for g in chat.grafts} <= recs.keys()  # 3.
        mem = PolicyMemory(store, PolicyConfig(tenant="default"))
        for fid in chat.facts:
            fact = mem.fact(fid)
            assert fact is not None and fact.graft and (GRAFT, fact.graft) in recs, fid  # 3.
        live = [f for f in mem.ledger.active() if "locker" in f.statement.casefold()]
        assert len(live) <= 1, [f.statement for f in live]  # 4. never two
        assert (live[0].value if live else None) in chat.allowed(), (chat.acked, [f.statement for f in live])
        for f in mem.ledger.nodes():
            assert f.state == "active" or mem.ledger.edge(f.id) is not None, f.id  # 4. lineage
        chat.seen = set(recs)
        # What the kill interrupted: a write (its payload file left an orphan), or a line after
        # its commit and before its JSON line (the locker already has the line in flight's value).
        # (A set, not a count: a restarted child that writes the same bytes again adopts an orphan.)
        chat.orphaned += bool(set(fsck["orphans"]) - chat.orphans)
        chat.orphans = set(fsck["orphans"])
        unacked = chat.value_after(chat.acked + 1) if chat.acked < len(chat.lines) else None
        chat.in_flight += bool(live) and live[0].value == unacked != chat.value_after(chat.acked)


def kill_and_finish(chat: Chat, ctx, kills: int, seed: int) -> int:
    """Kill the child `kills` times (checking after each), then let it finish; expectations 5-7.
    Returns the number of kills that landed."""
    rng = random.Random(seed)
    landed = 0
    while landed < kills and chat.acked < len(chat.lines):
        inside, orphaned = chat.inside, chat.orphaned
        rc = run_child(chat, ctx, rng, real=landed == 0)
        landed += rc == -signal.SIGKILL
        check(chat)
        if chat.inside > inside:  # a kill between a payload file and its log record
            assert chat.orphaned == orphaned + 1, "a write cut short left no orphan"
    assert run_child(chat, ctx, None) == 0 and chat.acked == len(chat.lines)
    check(chat)

    final = chat.values[-1]
    rc, [listing] = cli("memory", "list", *chat.common())
    assert rc == 0
    assert [f["value"] for f in listing["facts"] if "locker" in f["statement"]] == [final]  # 5.
    rc, [shown] = cli("memory", "show memory about: locker", *chat.common())
    live = [f for f in listing["facts"] if "locker" in f["statement"]][0]
    assert rc == 0 and shown["facts"] == [live["id"]] and final in shown["text"], shown  # 5.

    probe = chat.store.parent / "probe.txt"
    probe.write_text("What is my locker code?\n", encoding="utf-8")
    rc, [reply] = cli("chat", "--script", str(probe), *chat.common(), "--clear-context", "--max-new-tokens", "2")
    with Store.open(StoreConfig(root=chat.store, durability=chat.durability)) as store:
        nodes = list(PolicyMemory(store, PolicyConfig(tenant="default")).ledger.nodes())
    stale = {f.graft for f in nodes if f.state != "active"}
    mounted = {m["id"] for m in reply["mounted"]}
    assert rc == 0 and live["graft"] in mounted and not mounted & stale, reply["mounted"]  # 6.
    rc, [ans] = cli("ask", "What did the market record in winter?", *chat.common(), "--mode", "grafts",
                    "--max-new-tokens", "2")
    assert rc == 0 and ans["mode"] == "grafts" and ans["mounted"] and ans["tokens_from_memory"] > 0  # 6.

    rc, _ = cli("fsck", *chat.common(), "--repair")
    rc2, [fsck] = cli("fsck", *chat.common())
    assert rc == rc2 == 0 and fsck["damaged"] == [] and fsck["orphans"] == []  # 7.
    return landed


@pytest.fixture(scope="module")
def forkserver():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    # Start the server now, not at the first forked child: its imports (~5 s) then run while the
    # first child of the test, a real process that needs no server, imports its own.
    multiprocessing.forkserver.ensure_running()
    return ctx


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    for i in range(3):
        (folder / f"doc{i}.txt").write_text(lorem(3, seed=300 + i), encoding="utf-8")
    return folder


def test_chat_killed_fifty_times_keeps_every_acknowledged_turn_and_one_locker_fact(tmp_path, docs, forkserver):
    landed = cut_short = 0
    for n, (durability, kills) in enumerate(KILLS.items()):
        lines, values = make_script(ROUNDS[durability])
        (tmp_path / durability).mkdir()
        chat = Chat(tmp_path / durability / "store", docs, durability, lines, values)
        got = kill_and_finish(chat, forkserver, kills, seed=40 + n)
        assert got == kills, (durability, got, chat.acked, len(lines))  # the script outlasted the kills
        landed += got
        cut_short += chat.inside
        print(f"{durability}: {got} kills ({chat.inside} inside a write, {chat.orphaned} left a new orphan, "
              f"{chat.in_flight} after an unacknowledged correction committed) over {len(lines)} lines")
    assert landed >= 50
    assert cut_short >= 2, "fewer kills inside a write than scheduled"
