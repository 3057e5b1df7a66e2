"""Encryption at rest on the Redis backend (grm/store/redis_rows.py), against a real redis-server on
a loopback port (skipped, with the reason, when redis-server or the redis package is missing).

Expectations:
1. A namespace opened with a master key round-trips every field, payload bytes, children and
   ranked search, from this process and from a fresh open.
2. Nothing derived from user content is in Redis in clear: key names, hash fields, set members,
   values and the log stream hold no key, parent, path, word of text or meta, or payload byte.
3. Tampering fails closed: an edited sealed row, an edited clear field (state, payload name,
   size), an edited payload, a row or payload swapped between two records, a row replayed under
   another key or tenant: never served (get -> None, payload -> None, search skips it), counted,
   listed as damaged, and the next write of the record replaces it.
4. A wrong key, a missing key, or a key for a plain namespace is a clear StoreError before any
   row is read; the CLI says it in one line and exits 2.
5. Two processes share one encrypted namespace: rows written by one are read by the other; two
   creators racing on an empty namespace agree on one salt; a plain writer that opened before the
   namespace became encrypted cannot write into it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from grm.errors import StoreError
from grm.store.opener import open_backend
from grm.store.redis_rows import PLAIN_MARKER
from grm.store.state import SEALED_KEY
from tests.cli.conftest import _restore_torch_threads, grm  # noqa: F401  (`grm` in-process)
from tests.conftest import ROOT

redis = pytest.importorskip("redis", reason="the redis package is not installed (pip install redis==8.1.0)")

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))


@pytest.fixture
def url(redis_url: str) -> str:
    return redis_url.rsplit("/", 1)[0] + f"/enc{uuid.uuid4().hex[:10]}"


def _raw(url: str):
    return redis.Redis.from_url(url.rsplit("/", 1)[0] + "/0")


def _ns(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _dump(url: str) -> bytes:
    """Every key name, hash field, set member, value and stream entry of the namespace."""
    r, parts = _raw(url), []
    for k in r.scan_iter(f"{_ns(url)}:*"):
        parts.append(k)
        t = r.type(k)
        if t == b"string":
            parts.append(r.get(k))
        elif t == b"hash":
            for f, v in r.hgetall(k).items():
                parts += [f, v]
        elif t == b"set":
            parts += list(r.smembers(k))
        elif t == b"stream":
            for _, entry in r.xrange(k):
                for f, v in entry.items():
                    parts += [f, v]
    r.close()
    return b"\n".join(parts)


def _fill(s) -> None:
    with s.transaction() as txn:
        txn.put("alice", "document", "/home/alice/vexmoor-diary.txt", meta={"path": "/home/alice/vexmoor-diary.txt"},
                text="Zanthor harbor ledger")
        txn.put("alice", "block", "blk-quillfeather-1", parent="/home/alice/vexmoor-diary.txt",
                payload=b"KVBYTES-Glimmerwick" * 50, text="the locker code is 7733 Brindlecombe",
                meta={"ids": [101, 202, 303], "statement": "locker code 7733"})
        txn.put("alice", "block", "blk-quillfeather-2", parent="/home/alice/vexmoor-diary.txt",
                payload=b"second block bytes", text="winter harbor seal")


def test_round_trip_children_and_ranked_search(url: str) -> None:
    with open_backend(url, master_key=KEY) as s:
        _fill(s)
        assert s.stats()["encrypted"] is True
    with open_backend(url, master_key=KEY) as s:
        b1 = s.get("alice", "block", "blk-quillfeather-1")
        assert (b1.parent, b1.text, b1.meta["ids"], b1.state) == (
            "/home/alice/vexmoor-diary.txt", "the locker code is 7733 Brindlecombe", [101, 202, 303], "active")
        assert s.read_payload(b1) == b"KVBYTES-Glimmerwick" * 50
        assert [r.key for r in s.children("alice", "block", "/home/alice/vexmoor-diary.txt")] == [
            "blk-quillfeather-1", "blk-quillfeather-2"]
        assert [r.key for r, _ in s.search_text("alice", "harbor")][:2] == ["/home/alice/vexmoor-diary.txt",
                                                                            "blk-quillfeather-2"]
        assert [r.key for r, _ in s.search_text("alice", "locker 7733")] == ["blk-quillfeather-1"]
        assert s.search_text("bob", "harbor") == []
        s.set_state("alice", "block", "blk-quillfeather-2", "superseded")
        assert "blk-quillfeather-2" not in [r.key for r, _ in s.search_text("alice", "harbor")]
        assert s.delete("alice", "block", "blk-quillfeather-1") and s.get("alice", "block", "blk-quillfeather-1") is None
        assert s.fsck().damaged == [] and s.counters["text_unauthenticated"] == 0


def test_nothing_from_user_content_is_in_redis_in_clear(url: str) -> None:
    with open_backend(url, master_key=KEY) as s:
        _fill(s)
        s.set_state("alice", "block", "blk-quillfeather-2", "superseded")
    dump = _dump(url)
    assert b"alice" in dump and b"sealed" in dump  # the scan sees the namespace (tenant names stay in clear)
    # (no bare digit runs: "7733" turns up by chance in the hex of keyed ids and ciphertext)
    for word in (b"vexmoor", b"Zanthor", b"quillfeather", b"code 7733", b"Brindlecombe", b"Glimmerwick", b"KVBYTES",
                 b"harbor", b"second block", b"101, 202", b"[101,202"):
        assert word.lower() not in dump.lower(), word


@pytest.mark.parametrize("edit", ["sealed byte", "state", "payload name", "size", "kind"])
def test_an_edited_row_fails_closed_and_the_next_write_replaces_it(url: str, edit: str) -> None:
    with open_backend(url, master_key=KEY) as s:
        s.put("alice", "doc", "d1", text="Zanthor harbor ledger", payload=b"doc bytes", meta={"n": 1})
        s.put("alice", "doc", "d2", text="harbor harbor")
        rec = s.get("alice", "doc", "d1")
        r, h, field = _raw(url), f"{_ns(url)}:rows:alice", s.rows.field("alice", "doc", "d1")
        doc = json.loads(r.hget(h, field))
        if edit == "sealed byte":
            sealed = doc["sealed"]
            doc["sealed"] = sealed[:20] + ("A" if sealed[20] != "A" else "B") + sealed[21:]
        elif edit == "state":
            doc["state"] = "superseded"
        elif edit == "payload name":
            doc["payload"] = "0" * 64
        elif edit == "size":
            doc["size"] += 1
        else:
            doc["kind"] = "block"
        r.hset(h, field, json.dumps(doc))
        r.close()
        assert s.get("alice", "doc", "d1") is None  # a miss: the caller recomputes
        assert s.read_payload(rec) == b"doc bytes" or edit != "sealed byte"
        listed = {r.key: r for r in s.records("alice")}
        assert "d1" not in listed and [k for k in listed if k.startswith(SEALED_KEY)]
        assert all(v.state == "damaged" for k, v in listed.items() if k.startswith(SEALED_KEY))
        assert [r.key for r, _ in s.search_text("alice", "harbor Zanthor")] == ["d2"]
        assert s.stats()["counters"]["text_unauthenticated"] == 1  # one bad version, counted once
        assert len(s.fsck().already_damaged) == 1
        healed = s.put("alice", "doc", "d1", text="Zanthor harbor ledger", payload=b"doc bytes")
        assert s.get("alice", "doc", "d1") == healed and s.read_payload(healed) == b"doc bytes"
        assert s.fsck().already_damaged == [] and len(list(s.records("alice"))) == 2


def test_swapped_or_replayed_rows_and_payloads_are_never_served(url: str) -> None:
    with open_backend(url, master_key=KEY) as s:
        a = s.put("alice", "block", "a", payload=b"bytes of a", text="alpha")
        b = s.put("alice", "block", "b", payload=b"bytes of b", text="beta")
        s.put("bob", "block", "a", payload=b"bytes of bob", text="bravo")
        r, ns = _raw(url), _ns(url)
        # payload values swapped between two records of one tenant
        pa, pb = (f"{ns}:pay:{_tenant_dir('alice')}:{x.payload}" for x in (a, b))
        va, vb = r.get(pa), r.get(pb)
        r.set(pa, vb)
        r.set(pb, va)
        assert s.read_payload(a) is None and s.read_payload(b) is None
        assert s.counters["payload_corrupt"] == 2
        r.set(pa, va)
        r.set(pb, vb)
        assert s.read_payload(a) == b"bytes of a"
        # row values swapped between two records, and a row replayed into another tenant's hash
        h = f"{ns}:rows:alice"
        (fa, ra), (fb, rb) = sorted(r.hgetall(h).items())
        r.hset(h, fa, rb)
        r.hset(h, fb, ra)
        assert s.get("alice", "block", "a") is None and s.get("alice", "block", "b") is None
        fbob, rbob = next(iter(r.hgetall(f"{ns}:rows:bob").items()))
        r.hset(f"{ns}:rows:bob", fbob, ra if fa != fbob else rb)
        assert s.get("bob", "block", "a") is None
        assert s.search_text("alice", "alpha beta") == [] and s.search_text("bob", "alpha beta bravo") == []
        r.close()


def _tenant_dir(tenant: str) -> str:
    from grm.store.layout import tenant_dir_name

    return tenant_dir_name(tenant)


def test_wrong_missing_or_unexpected_keys_are_clear_errors(url: str, redis_url: str) -> None:
    with open_backend(url, master_key=KEY) as s:
        s.put("alice", "doc", "d", text="secret words")
    with pytest.raises(StoreError, match="wrong master key"):
        open_backend(url, master_key=OTHER)
    with pytest.raises(StoreError, match="is encrypted: give its master key"):
        open_backend(url)
    plain = redis_url.rsplit("/", 1)[0] + f"/plain{uuid.uuid4().hex[:8]}"
    with open_backend(plain) as s:
        s.put("alice", "doc", "d", text="plain words")
    with pytest.raises(StoreError, match="created without encryption"):
        open_backend(plain, master_key=KEY)
    r = _raw(url)
    r.set(f"{_ns(url)}:marker", PLAIN_MARKER)  # marked plain over sealed rows: nothing is served
    with open_backend(url) as s, pytest.raises(StoreError, match="holds encrypted rows"):
        s.search_text("alice", "secret")
    r.set(f"{_ns(url)}:marker", b"not json")
    r.close()
    with pytest.raises(StoreError, match="unreadable marker"):
        open_backend(url, master_key=KEY)


def test_cli_without_the_key_is_one_line_and_exit_2(url: str, tmp_path, grm, monkeypatch) -> None:
    """Without the key: a process of its own (its whole stderr is the one line). With the key file,
    and with a wrong key in the environment: in this process (the tests/cli grm fixture)."""
    key_file = tmp_path / "key"
    key_file.write_bytes(KEY)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("GRM_MASTER_KEY", None)
    monkeypatch.delenv("GRM_MASTER_KEY", raising=False)
    with open_backend(url, master_key=KEY) as s:
        s.put("alice", "doc", "d", text="secret words")
    done = subprocess.run([sys.executable, "-m", "grm", "stats", "--store", url, "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2 and "is encrypted" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    code, stdout, stderr = grm("stats", "--store", url, "--json", "--key-file", str(key_file))
    assert code == 0 and json.loads(stdout)["encrypted"] is True, stderr
    monkeypatch.setenv("GRM_MASTER_KEY", OTHER.hex())
    code, _out, stderr = grm("stats", "--store", url, "--json")
    assert code == 2 and "wrong master key" in stderr


def _child(url: str, key: bytes, body: str) -> subprocess.Popen:
    code = ("import os, sys, json\n"
            "from grm.store import load_master_key\n"
            "from grm.store.opener import open_backend\n"
            f"s = open_backend({url!r}, master_key=load_master_key(None, os.environ['GRM_MASTER_KEY']))\n" + body)
    return subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT), "GRM_MASTER_KEY": key.hex()})


def test_two_processes_share_one_encrypted_namespace(url: str) -> None:
    """1. two processes create the namespace at once: one salt wins, both write and read it;
    2. what one writes the other reads, payload bytes included; 3. a wrong-key process is refused."""
    body = ("tenant = sys.argv[1] if len(sys.argv) > 1 else None\n"
            "import os\n"
            "me = str(os.getpid())\n"
            "s.put('t' + me, 'doc', 'k', text='Zanthor words from ' + me, payload=me.encode() * 10)\n"
            "print(me, flush=True)\n"
            "s.close()\n")
    kids = [_child(url, KEY, body) for _ in range(3)]
    pids = []
    for k in kids:
        out, err = k.communicate(timeout=60)
        assert k.returncode == 0, err[-2000:]
        pids.append(out.strip())
    with open_backend(url, master_key=KEY) as s:
        for pid in pids:
            rec = s.get(f"t{pid}", "doc", "k")
            assert rec.text == f"Zanthor words from {pid}" and s.read_payload(rec) == pid.encode() * 10
        s.put("shared", "doc", "from-parent", text="parent wrote this", payload=b"parent bytes")
    reader = _child(url, KEY, "r = s.get('shared', 'doc', 'from-parent')\n"
                              "print(json.dumps([r.text, s.read_payload(r).decode(), "
                              "[x.key for x, _ in s.search_text('shared', 'parent')]]))\n")
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err[-2000:]
    assert json.loads(out) == ["parent wrote this", "parent bytes", ["from-parent"]]
    wrong = _child(url, OTHER, "print('opened')\n")
    out, err = wrong.communicate(timeout=60)
    assert wrong.returncode == 1 and "wrong master key" in err and "opened" not in out


def test_a_plain_writer_cannot_write_into_a_namespace_encrypted_after_it_opened(url: str) -> None:
    plain = open_backend(url)  # an empty namespace: nothing marks it yet
    try:
        with open_backend(url, master_key=KEY) as enc:
            enc.put("alice", "doc", "d", text="sealed words")
        with pytest.raises(StoreError, match="encryption changed"):
            plain.put("bob", "doc", "d", text="words in clear")
        assert b"words in clear" not in _dump(url)
    finally:
        plain.close()
    with open_backend(url, master_key=KEY) as enc:
        assert enc.get("alice", "doc", "d").text == "sealed words" and enc.get("bob", "doc", "d") is None


# ------------------------------------------------------------ the runtime on an encrypted namespace

_RUNTIME = """
import json, os, sys
from grm.runtime import Runtime
from grm.store import load_master_key
key = load_master_key(None, os.environ["GRM_MASTER_KEY"])
with Runtime.open(store=sys.argv[1], model="tiny-random-llama", threads=1, max_new_tokens=4, master_key=key) as rt:
    for action, text in json.loads(sys.argv[2]):
        if action == "remember":
            reply = rt.chat(clear_context=True).send(text)
            print(json.dumps({"changed": reply.changed, "grafts": [f.graft for f in rt.policy_glue().policy.facts()]}))
        elif action == "route":
            print(json.dumps({"mounted": [m["id"] for m in rt.ask(text, mode="grafts", max_new_tokens=2).mounted]}))
        else:
            warm = rt.ask(text, mode="exact", max_new_tokens=4)
            cold = rt.ask(text, mode="exact", max_new_tokens=4, memory=False)
            print(json.dumps({"warm": warm.answer, "cold": cold.answer, "from_memory": warm.tokens_from_memory}))
"""


def _runtime(url: str, *actions: tuple[str, str]) -> list[dict]:
    """One process with the runtime API on `url` doing (action, text) in turn: one result each."""
    done = subprocess.run([sys.executable, "-c", _RUNTIME, url, json.dumps(actions)], cwd=ROOT, capture_output=True,
                          text=True, timeout=240, env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
                                                       "GRM_MASTER_KEY": KEY.hex()})
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.strip().splitlines()[-len(actions):]]


def test_ingest_ask_and_facts_across_processes_leave_no_plaintext_in_redis(url: str, tmp_path) -> None:
    """1. the CLI ingests a document into an encrypted namespace; 2. another process (the runtime
    API) answers from its stored K/V bit-identically; 3. a fact written by one process (that one)
    is routed by another; 4. no distinctive word of the document or the fact is anywhere in Redis."""
    from tests.conftest import lorem

    text = lorem(6, seed=3).replace("harbor", "Vexmoor").replace("orchard", "Quillfeather")
    doc = tmp_path / "zanthor-notes.txt"
    doc.write_text(text)
    key_file = tmp_path / "key"
    key_file.write_text(KEY.hex())
    ingest = subprocess.run([sys.executable, "-m", "grm", "ingest", str(doc), "--store", url, "--key-file",
                             str(key_file), "--model", "tiny-random-llama", "--layout", "chain", "--block-tokens",
                             "32", "--json"], cwd=ROOT, capture_output=True, text=True, timeout=240,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)})
    assert ingest.returncode == 0, ingest.stderr[-2000:]
    assert json.loads(ingest.stdout)["blocks"] >= 3
    got, wrote = _runtime(url, ("ask", text + "\nThe Vexmoor"),
                          ("remember", "remember permanently: my locker code is 7733 Brindlecombe"))
    assert got["from_memory"] > 3 * 32 and got["warm"] == got["cold"]
    assert wrote["changed"] and wrote["grafts"]
    [routed] = _runtime(url, ("route", "What is my locker code?"))
    assert wrote["grafts"][0] in routed["mounted"]
    dump = _dump(url).lower()
    assert b"sealed" in dump and len(dump) > 10_000
    for word in (b"vexmoor", b"quillfeather", b"zanthor", b"is 7733", b"brindlecombe", b"locker"):
        assert word not in dump, word
