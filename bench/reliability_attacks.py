"""The adversarial review's attacks on the server and the store (issue 31), re-run on loopback.

Each attack is tried as the attacker would (HTTP to a `grm serve` on 127.0.0.1 with API keys, or
the store and CLI directly) with the tiny test model, bounded and self-stopping, and reports:
- held: the defence held now;
- fixed: issue 31 closed it ("yes": it was a hole at b5a41d7; "no": it held before too;
  "measured": an extraction miss left to the model-backed reader, reported, not fixed).
Fairness is measured, not only checked: the wait of bob's short chat completion while alice
ingests a 64 KB document, against the longest slice of that ingest (`--fairness-model` runs the
same measurement with a real model, e.g. smollm2-135m).

The table goes into bench/results/reliability.md as its own section (what bench/reliability.py
writes there is kept, and it keeps this section when it runs) and reliability.json under
"attacks". Needs redis-server for the Redis attacks (reported as skipped without it).

    python bench/reliability_attacks.py [--threads 1] [--fairness-model smollm2-135m]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import RESULTS, machine  # noqa: E402

TINY = "tiny-random-llama"
START, END = "<!-- attacks: python bench/reliability_attacks.py -->", "<!-- /attacks -->"
BASE_WAIT_S = 31.97  # bob's chat behind alice's 64 KB ingest at b5a41d7, tiny model (the same attack run there)


# ----- a server on loopback ----------------------------------------------------------------------
class Server:
    """A `grm serve` in a thread (grm/serve/server.py Background), keys for alice, bob and carol."""

    def __init__(self, work: Path, threads: int, model: str = TINY, store: str | Path | None = None, **serve):
        from grm.runtime.config import RuntimeConfig
        from grm.serve.auth import add_key
        from grm.serve.config import ServeConfig
        from grm.serve.server import Background

        work.mkdir(parents=True, exist_ok=True)
        self.keys = {t: add_key(work / "keys.txt", t) for t in ("alice", "bob", "carol")}
        rc = RuntimeConfig.from_options(store=store or work / "store", model=model, threads=threads, device="cpu")
        self.bg = Background(rc, ServeConfig(port=0, keys=work / "keys.txt", **serve))
        self.model = self.bg.engine.model_name

    def __enter__(self) -> "Server":
        self.bg.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bg.stop()

    def call(self, method: str, path: str, tenant: str = "alice", **kw):
        import httpx2 as httpx

        return httpx.request(method, self.bg.url + path, headers={"Authorization": f"Bearer {self.keys[tenant]}",
                                                                  **kw.pop("headers", {})}, timeout=600, **kw)

    def chat(self, tenant: str, text: str, max_tokens: int = 2):
        return self.call("POST", "/v1/chat/completions", tenant, json={
            "model": self.model, "messages": [{"role": "user", "content": text}], "max_tokens": max_tokens})

    def job(self, job_id: str, tenant: str = "alice") -> dict:
        return self.call("GET", f"/v1/jobs/{job_id}", tenant).json()

    def wait_job(self, job_id: str, done=("done", "failed", "cancelled"), limit: float = 600) -> dict:
        end = time.monotonic() + limit
        body = self.job(job_id)
        while body["status"] not in done and time.monotonic() < end:
            time.sleep(0.05)
            body = self.job(job_id)
        return body

    def metric(self, tenant: str, name: str) -> float:
        for line in self.call("GET", "/metrics", tenant).text.splitlines():
            if line.startswith(f'{name}{{tenant="{tenant}"}} '):
                return float(line.rsplit(" ", 1)[1])
        return float("nan")


def doc_64k() -> str:
    from tests.conftest import lorem

    return (lorem(400, seed=31) * 2)[: 64 << 10]


# ----- the attacks ---------------------------------------------------------------------------------
def attacks_on_one_server(work: Path, threads: int) -> list[dict]:
    from grm.store.kinds import BLOCK, GRAFT

    out = []
    with Server(work / "srv", threads) as s:
        store = s.bg.engine.rt.store
        before = store.durability
        r = s.chat("bob", "set durability: volatile")
        out.append(row("durability: `set durability: volatile` in bob's chat", store.durability == before, "yes",
                       f"store mode {store.durability} after it; the reply: {r.json()['choices'][0]['message']['content'][:70]}"))
        r = s.call("POST", "/v1/memories", "bob", json={"messages": [{"role": "user", "content": "set durability: strict"}]})
        out.append(row("durability: `set durability: strict` to /v1/memories", r.status_code == 403
                       and store.durability == before, "yes", f"{r.status_code} {r.json()['error']['code']}"))
        for path, body in (("/v1/chat/completions", b"[" * 100_000),
                           ("/v1/memories", b'{"memory": "my code is \\ud800"}'),
                           ("/v1/documents", b'{"name": "a", "text": "x \\udfff y"}')):
            r = s.call("POST", path, content=body, headers={"content-type": "application/json"})
            ok = r.status_code == 400 and r.headers.get("content-type", "").startswith("application/json")
            what = "'[' x 100000" if body.startswith(b"[") else "a lone surrogate"
            out.append(row(f"bad body: {what} to {path}", ok, "yes", f"{r.status_code} {r.json()['error']['code'] if ok else r.text[:40]}"))
        r = s.call("POST", "/v1/completions", "carol", json={"model": s.model, "prompt": "Where is it?", "max_tokens": 2,
                                                               "grm": {"mode": "grafts"}})
        msg = r.json()["error"]["message"]
        out.append(row("error text: a question over carol's empty memory (local store)",
                       str(work) not in msg and "<store>" in msg, "yes", msg[:90]))
        # cross-tenant reads (held before)
        fid = s.call("POST", "/v1/memories", json={"memory": "the vault code is 4471"}).json()["results"][0]["id"]
        codes = [s.call(m, f"/v1/memories/{fid}{p}", "bob").status_code for m, p in (("GET", ""), ("GET", "/history"),
                                                                                       ("DELETE", ""))]
        out.append(row("cross-tenant: bob reads, lists and deletes alice's fact by id", codes == [404] * 3 and
                       all("4471" not in m["memory"] for m in s.call("GET", "/v1/memories", "bob").json()["results"]),
                       "no", f"statuses {codes}"))
        ans = s.chat("bob", "What is the vault code?", 8).json()
        mounted = [m.get("id") for m in ans["grm"].get("mounted", [])]
        alice = {g.id for g in s.bg.engine.view("alice").grafts.grafts()}
        out.append(row("cross-tenant: bob's chat routes to alice's grafts", not (set(mounted) & alice), "no",
                       f"{len(mounted)} mounted, none of alice's {len(alice)}"))
        # memory hygiene
        paste = ("Heaps are binary trees for which every parent node has a value less than or equal to any of its "
                 "children. The speed is almost constant. ") * 12
        s.chat("bob", paste)
        facts = [m["memory"] for m in s.call("GET", "/v1/memories", "bob").json()["results"]]
        docs = [d["name"] for d in s.call("GET", "/v1/documents", "bob").json()["results"]]
        out.append(row("hygiene: a 2.6 KB document pasted into a chat", not any("speed" in f for f in facts)
                       and any(n.startswith("pasted in") for n in docs), "yes", f"facts {facts}; documents {docs}"))
        grafts = lambda: [g for g in s.bg.engine.view("carol").grafts.grafts() if g.kind == "evidence"]  # noqa: E731
        for _ in range(3):
            s.chat("carol", "Say hi.")
        small = len(grafts())
        for _ in range(3):
            s.chat("carol", "My locker code is 4471.")
        same = len(grafts())
        out.append(row("hygiene: 3 x 'Say hi.', then 3 x the same statement", small == 0 and same == 1, "yes",
                       f"evidence grafts: {small} after small talk, {same} after the statement"))
        fid = s.call("POST", "/v1/memories", "carol", json={"memory": "My favourite editor is Vim"}).json()["results"][0]["id"]
        r = s.call("POST", f"/v1/memories/{fid}/correct", "carol", json={"memory": "My cat is called Tofu"})
        out.append(row("hygiene: correct 'My favourite editor is Vim' with 'My cat is called Tofu'",
                       r.status_code == 409, "yes", f"{r.status_code}: {r.json().get('message', '')[:70]}"))
        out += measured_misses(s)
        # fairness, cancel, quotas
        out += fairness(s, "tiny")
        job = s.call("POST", "/v1/documents", json={"name": "big.txt", "text": doc_64k()}).json()
        while s.job(job["id"])["progress"]["done"] == 0:
            time.sleep(0.02)
        s.call("POST", f"/v1/jobs/{job['id']}/cancel")
        body = s.wait_job(job["id"])
        left = [r.key for r in store.records("alice", BLOCK) if "big.txt" == r.meta.get("doc")]
        out.append(row("ingest: cancel a running 64 KB ingest", body["status"] == "cancelled" and not left, "yes",
                       body.get("error") or body["status"]))
    with Server(work / "srv-queue", threads, queue=2) as s:
        gate, started = threading.Event(), threading.Event()
        s.bg.engine.run("alice", "hold", lambda m: (started.set(), gate.wait(60)))
        started.wait(30)
        try:
            for _ in range(2):
                s.bg.engine.run("alice", "hold", lambda m: None)
            mine = s.chat("alice", "hello there friend")
            theirs: list = []
            t = threading.Thread(target=lambda: theirs.append(s.chat("bob", "hello there friend")))
            t.start()
            time.sleep(0.3)
        finally:
            gate.set()
        t.join(120)
        out.append(row("quota: alice's burst past her queue", mine.status_code == 429 and theirs[0].status_code == 200,
                       "yes", f"alice {mine.status_code} Retry-After {mine.headers.get('retry-after')}, bob {theirs[0].status_code}"))
    with Server(work / "srv-bytes", threads, tenant_bytes=1 << 20, slice_s=0.05) as s:
        job = s.call("POST", "/v1/documents", json={"name": "big.txt", "text": doc_64k()}).json()
        body = s.wait_job(job["id"])
        codes = []
        for i in range(40):
            r = s.chat("alice", f"My locker number {i} has code {1000 + i}.")
            codes.append(r.status_code)
            if r.status_code != 200:
                break
        bob = s.chat("bob", "My locker code is 1234, remember it.").status_code
        out.append(row("quota: alice past 1 MB stored", body["status"] == "failed" and codes[-1] == 429 and bob == 200,
                       "yes", f"her ingest: {body.get('error')}; her chat #{len(codes)}: {codes[-1]}; bob {bob}"))
    return out


def measured_misses(s: Server) -> list[dict]:
    """The two extraction misses the review found, measured as they are (the rule reader is kept
    as it is: a model-backed reader is to read these)."""
    out = []
    s.call("POST", "/v1/memories", "carol", json={"messages": [{"role": "user", "content": "I parked my car on level 3"}]})
    facts = [m["memory"] for m in s.call("GET", "/v1/memories", "carol", params={"query": "car"}).json()["results"]]
    out.append(row("extraction: 'I parked my car on level 3'", any("level 3" in f for f in facts), "measured", f"facts: {facts}"))
    for text in ("My dentist appointment is Thursday at 4 pm.", "The dentist appointment moved from Thursday to Friday."):
        s.call("POST", "/v1/memories", "carol", json={"messages": [{"role": "user", "content": text}]})
    facts = [m["memory"] for m in s.call("GET", "/v1/memories", "carol", params={"query": "dentist"}).json()["results"]]
    out.append(row("extraction: 'moved from Thursday to Friday' keeps '4 pm'",
                   any("Friday" in f and "4 pm" in f for f in facts), "measured", f"facts: {facts}"))
    return out


def fairness(s: Server, label: str) -> list[dict]:
    """bob's short chat while alice ingests a 64 KB document: his wait against the longest slice."""
    job = s.call("POST", "/v1/documents", json={"name": "fair.txt", "text": doc_64k()}).json()
    while s.job(job["id"])["progress"]["done"] == 0:
        time.sleep(0.02)
    t = time.perf_counter()
    r = s.chat("bob", "Say hi.")
    answered = time.perf_counter() - t
    status = s.job(job["id"])
    waited = s.metric("bob", "grm:queue_wait_seconds_sum")
    slices = s.bg.engine._jobs[job["id"]].handle.sliced.slices
    s.call("POST", f"/v1/jobs/{job['id']}/cancel")
    s.wait_job(job["id"])
    held = r.status_code == 200 and status["status"] == "running" and waited <= max(slices) + 0.1
    return [row(f"fairness ({label}): bob's chat during alice's 64 KB ingest", held, "yes",
                f"bob waited {waited:.3f} s for the worker (answered in {answered:.2f} s); longest slice "
                f"{max(slices):.3f} s of {len(slices)}; alice's ingest {status['progress']['done']}/"
                f"{status['progress']['total']} blocks then", waited=round(waited, 4), answered=round(answered, 3),
                longest_slice=round(max(slices), 4), slices=len(slices))]


def redis_attacks(work: Path, threads: int) -> list[dict]:
    if shutil.which("redis-server") is None:
        return [row("redis: every Redis attack", None, "yes", "skipped: redis-server is not installed")]
    from grm.store import RedisConfig, RedisStore
    from tests.conftest import free_port, start_redis

    port, password = free_port(), "S3cretPW"
    (work / "redis").mkdir()
    proc = start_redis(port, work / "redis", password=password)
    url = f"redis://:{password}@127.0.0.1:{port}"
    out = []
    try:
        with Server(work / "srv-redis", threads, store=f"{url}/pw", store_budget=64 << 20) as s:
            r = s.call("POST", "/v1/memories", json={"memory": "@LSN@"})
            got = s.call("GET", f"/v1/memories/{r.json()['results'][0]['id']}").json()["memory"]
            job = s.call("POST", "/v1/documents", json={"name": "lsn.txt", "text": "@LSN@"}).json()
            body = s.wait_job(job["id"])
            ask = s.call("POST", "/v1/completions", json={"model": s.model, "prompt": "@LSN@", "max_tokens": 2})
            out.append(row("redis: '@LSN@' as a memory and as a 5-byte document", got == "@LSN@" and body["status"] ==
                           "done" and ask.status_code == 200, "yes", f"reads back {got!r}; ingest {body['status']}; ask {ask.status_code}"))
            r = s.call("POST", "/v1/completions", "carol", json={"model": s.model, "prompt": "Where?", "max_tokens": 2,
                                                                   "grm": {"mode": "grafts"}})
            msg = r.json()["error"]["message"]
            out.append(row("error text: carol's empty memory on a Redis store with a password",
                           password not in msg and "redis://" not in msg, "yes", msg[:90]))
            other = RedisStore.open(RedisConfig(f"{url}/0", namespace="pw", lease_ms=30_000))
            try:
                other.put("carol", "note", "held", text="another writer")
                r = s.call("POST", "/v1/memories", "carol", json={"memory": "my locker code is 1234"})
            finally:
                other.close()
            out.append(row("redis: a second writer holds carol's lease", r.status_code == 503 and "retry-after" in r.headers
                           and "StoreError" not in r.text, "yes", f"{r.status_code} Retry-After {r.headers.get('retry-after')}"))
    finally:
        proc.terminate()
        proc.wait(10)
    return out


def store_and_cli_attacks(work: Path) -> list[dict]:
    from grm.store import Store, StoreConfig

    out = []
    root = work / "fsck"
    with Store.open(StoreConfig(root)) as st:
        for i in range(4):
            st.put("t", "doc", f"d{i}", text=f"document {i}")
    seg = sorted((root / "log").glob("*"))[-1]
    with open(seg, "r+b") as f:
        f.truncate(seg.stat().st_size - 37)
    with Store.open(StoreConfig(root, read_only=True)) as st:
        rep = st.fsck()
    out.append(row("fsck: read-only, on a truncated log tail", rep.lost == ["t/doc/d3"], "yes",
                   f"catalog_ok {rep.catalog_ok}, lost {rep.lost}"))
    doc = work / "\u001b[2J\u001b[31mfake: all records damaged.txt"
    doc.write_text("The harbor opened in 1911. " * 8)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    root = Path(__file__).resolve().parents[1]
    def run(*argv: str, store: str = str(work / "term")) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "grm", *argv, "--store", store], cwd=root, env=env,
                              capture_output=True, text=True, timeout=300)

    run("ingest", str(doc), "--model", TINY, "--threads", "1")
    shown = run("stats")
    out.append(row("terminal: `grm stats` of a document named with escape sequences", shown.returncode == 0 and
                   "\x1b" not in shown.stdout + shown.stderr, "yes", "shown as " + next(
                       (ln.strip()[:60] for ln in shown.stdout.splitlines() if "fake" in ln), "?")))
    shown = run("stats", store="redis://:S3cretPW@127.0.0.1:1/x")
    out.append(row("logs: an unreachable Redis store named with a password", "S3cretPW" not in shown.stderr, "yes",
                   shown.stderr.strip()[:90]))
    return out


def tiering_attack(work: Path, threads: int) -> list[dict]:
    """A tiered server: two API tenants' documents past the budget; what the run keeps."""
    from grm.archive.policy import PolicyConfig
    from grm.runtime import Runtime
    from grm.serve.config import ServeConfig
    from grm.serve.engine import Engine
    from grm.store.tiering import inventory
    from tests.conftest import lorem

    rt = Runtime.open(store=work / "tier", model=TINY, threads=threads, device="cpu", section_tokens=48, block_tokens=48)
    try:
        for tenant, seed in (("alice", 3), ("bob", 4)):
            rt.for_tenant(tenant).ingest_text(lorem(5, seed=seed), f"{tenant}.txt", layout="sections")
        inv = inventory(rt.store)
        floor = inv.kept_bytes + inv.log_bytes + inv.row_bytes
        engine = Engine(rt, ServeConfig(port=0, no_auth=True, store_budget=floor + sum(s.bytes for s in inv.spans) // 2))
        policy = engine.tiering()
        policy.config = PolicyConfig(min_train_tokens=1200, train_tokens=8192, max_train=2000, k=64, iters=4)
        rep = policy.run().to_json()
    finally:
        rt.close()
    by = {a: sum(m["action"] == a for m in rep["moves"]) for a in ("demote", "drop", "evict")}
    tenants = sorted({m["tenant"] for m in rep["moves"] if m["action"] == "demote"})
    return [row("tiering: a tiered server under API keys (alice, bob; neither holds enough text alone)",
                rep["trained_codebooks"] is not None and tenants == ["alice", "bob"], "yes",
                f"codebooks trained on both; {by['demote']} spans archived ({', '.join(tenants)}), {by['drop']} dropped "
                f"to text, {by['evict']} evicted; {rep['before_bytes']} -> {rep['after_bytes']} bytes "
                f"(b5a41d7: nothing archived, every span dropped)", moves=by)]


def row(attack: str, held: bool | None, fixed: str, detail: str, **figures) -> dict:
    return {"attack": attack, "held": held, "fixed": fixed, "detail": detail, **figures}


# ----- results ---------------------------------------------------------------------------------------
def section(rows: list[dict], command: str, load: str) -> list[str]:
    held = {True: "yes", False: "**no**", None: "skipped"}
    lines = [START, "", "## Attacks (issue 31): one tenant against another, and memory hygiene", "",
             f"- command: `{command}`", f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             f"- machine: {machine()['processor']}, {machine()['cpus']} CPUs shared with other work (load "
             f"average {load} at the start), loopback servers, model {TINY} unless named", "",
             "| attack | held | fixed | what happened |", "|---|---|---|---|"]
    for r in rows:
        detail = r["detail"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r['attack']} | {held[r['held']]} | {r['fixed']} | {detail} |")
    lines += ["", f"held: the defence held on this run. fixed: yes = a hole at b5a41d7 closed by issue 31; no = it "
              f"held before too; measured = an extraction miss left to a model-backed reader. Fairness at b5a41d7 "
              f"(the same attack, tiny model): bob's chat answered after {BASE_WAIT_S} s, the whole ingest.", "", END]
    return lines


def write(rows: list[dict], command: str, load: str) -> None:
    md, js = RESULTS / "reliability.md", RESULTS / "reliability.json"
    text = md.read_text() if md.exists() else "# reliability\n"
    text = re.sub(re.escape(START) + ".*?" + re.escape(END), "", text, flags=re.S).rstrip() + "\n\n"
    md.write_text(text + "\n".join(section(rows, command, load)) + "\n")
    data = json.loads(js.read_text()) if js.exists() else {}
    data["attacks"] = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                       "load_average": load, "rows": rows}
    js.write_text(json.dumps(data, indent=2) + "\n")


def carried() -> tuple[str, dict | None]:
    """(the attacks section of reliability.md, reliability.json's "attacks"), for bench/reliability.py
    to keep when it rewrites both files."""
    md, js = RESULTS / "reliability.md", RESULTS / "reliability.json"
    m = re.search(re.escape(START) + ".*?" + re.escape(END), md.read_text(), flags=re.S) if md.exists() else None
    data = json.loads(js.read_text()).get("attacks") if js.exists() else None
    return (m.group(0) if m else ""), data


def main(args: argparse.Namespace) -> int:
    """`args`: threads, and fairness_model (None: the tiny model only); `grm bench reliability_attacks`
    passes the common flags, where --model names the fairness model."""
    import logging

    import torch

    threads = getattr(args, "threads", None) or 1
    fairness_model = getattr(args, "fairness_model", None) or getattr(args, "model", None)
    torch.set_num_threads(threads)
    logging.disable(logging.WARNING)
    command = f"python bench/reliability_attacks.py --threads {threads}" + (
        f" --fairness-model {fairness_model}" if fairness_model else "")
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())  # 1, 5, 15 min: how shared the 2 cores were
    work = Path(tempfile.mkdtemp(prefix="grm-attacks-"))
    try:
        rows = attacks_on_one_server(work, threads)
        rows += redis_attacks(work, threads)
        rows += store_and_cli_attacks(work)
        rows += tiering_attack(work, threads)
        if fairness_model:
            with Server(work / "srv-real", threads, model=fairness_model) as s:
                s.chat("carol", "Hello there, warm up please.")  # the first request pays one-off costs
                rows += fairness(s, fairness_model)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write(rows, command, load)
    print("\n".join(section(rows, command, load)))
    return 0 if all(r["held"] is not False or r["fixed"] == "measured" for r in rows) else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--fairness-model", default=None, help="also measure fairness with this model (e.g. smollm2-135m)")
    sys.exit(main(p.parse_args()))
