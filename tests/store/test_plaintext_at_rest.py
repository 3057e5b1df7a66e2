"""No plaintext at rest in an encrypted store (issue 14, bug 1).

1. Store level: a record's key, parent, meta and text never appear in any file under the root
   (log, checkpoints, payloads, marker), in log frames nor in checkpoint rows.
2. Runtime level: a sections ingest of a document with distinctive words, plus a chat turn and a
   remembered fact with a distinctive word: no file under the root holds any of those words, the
   document's path, or a JSON array of token ids.
3. The sealed rows round-trip: reopened (from log, then from a checkpoint) the records are as
   written, and a tampered sealed field is a damaged row, never other content.
"""

from __future__ import annotations

import re
from pathlib import Path

from grm.store import Store, StoreConfig
from grm.store.state import SEALED_KEY

KEY = bytes(range(32))
WORDS = [b"Quintarvex", b"Vexmoor", b"Zorblatt", b"Plumquist", b"orchard-keeper"]
IDS_RE = re.compile(rb"\[\s*\d+(?:\s*,\s*\d+){7,}\s*\]")  # a JSON array of 8+ integers (token ids)


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _hits(root: Path, needles: list[bytes]) -> list[str]:
    out = []
    for p in _files(root):
        data = p.read_bytes()
        low = data.lower()
        out += [f"{p.relative_to(root)}: {n!r}" for n in needles if n.lower() in low]
        out += [f"{p.relative_to(root)}: token ids {m.group()[:40]!r}" for m in IDS_RE.finditer(data)]
    return out


def _write(s: Store) -> None:
    s.put("alice", "fact", "f-Quintarvex", parent="node-Vexmoor", text="my locker code is 7733",
          meta={"subject": "Zorblatt", "ids": list(range(100, 140)), "path": "/home/Plumquist/notes.txt"})
    with s.transaction() as txn:
        txn.put("alice", "block", "fp-orchard-keeper", payload=b"\x00" * 64, meta={"value": "Vexmoor"})
        txn.set_state("alice", "fact", "f-Quintarvex", "superseded")
    s.put("alice", "doc", "gone-Zorblatt", text="Zorblatt")
    s.delete("alice", "doc", "gone-Zorblatt")


def test_store_rows_leave_no_plaintext_in_log_or_checkpoint(root: Path) -> None:
    with Store.open(StoreConfig(root, master_key=KEY)) as s:
        _write(s)
    assert _hits(root, WORDS) == []
    with Store.open(StoreConfig(root, master_key=KEY)) as s:  # from the log
        rec = s.get("alice", "fact", "f-Quintarvex")
        assert rec is not None and rec.parent == "node-Vexmoor" and rec.state == "superseded"
        assert rec.meta["subject"] == "Zorblatt" and rec.text == "my locker code is 7733"
        assert s.get("alice", "doc", "gone-Zorblatt") is None
        assert s.get("alice", "block", "fp-orchard-keeper").meta == {"value": "Vexmoor"}
        assert [r.key for r in s.children("alice", "fact", "node-Vexmoor")] == []  # superseded
        assert [r.key for r, _ in s.search_text("alice", "locker", kind="fact")] == []
        s.checkpoint()
    assert any((root / "checkpoints").iterdir())
    assert _hits(root, WORDS) == []
    with Store.open(StoreConfig(root, master_key=KEY)) as s:  # from the checkpoint
        rec = s.get("alice", "fact", "f-Quintarvex")
        assert rec is not None and rec.text == "my locker code is 7733" and rec.meta["ids"][0] == 100
        assert s.counters["text_unauthenticated"] == 0


def test_tampered_sealed_row_is_damaged_never_other_content(root: Path) -> None:
    with Store.open(StoreConfig(root, master_key=KEY)) as s:
        s.put("alice", "fact", "a", text="first", meta={"v": 1})
        s.put("alice", "fact", "b", text="second", meta={"v": 2})
    seg = sorted((root / "log").glob("*.seg"))[-1]
    data = seg.read_bytes()
    # Swap the sealed fields of the two frames (CRC recomputed, as an attacker with write access
    # would): the associated data binds each to its record and LSN, so neither opens.
    import json

    from grm.store.log import FRAME, HEADER_SIZE, encode_frame, read_header

    header = read_header(str(seg), data)
    frames, off = [], HEADER_SIZE
    while off < len(data):
        n, _crc, lsn = FRAME.unpack_from(data, off)
        frames.append((lsn, json.loads(data[off + 16:off + 16 + n])))
        off += 16 + n
    puts = [b for _, b in frames if b["op"] == "put"]
    puts[0]["sealed"], puts[1]["sealed"] = puts[1]["sealed"], puts[0]["sealed"]
    out = data[:HEADER_SIZE] + b"".join(
        encode_frame(header.salt, lsn, json.dumps(b, sort_keys=True, separators=(",", ":")).encode())
        for lsn, b in frames)
    seg.write_bytes(out)
    with Store.open(StoreConfig(root, master_key=KEY)) as s:
        rows = list(s.records("alice"))
        assert s.counters["text_unauthenticated"] == 2
        assert sorted(r.state for r in rows) == ["damaged", "damaged"]
        assert all(r.key.startswith(SEALED_KEY) and r.text is None and r.meta == {} for r in rows)
        assert s.get("alice", "fact", "a") is None


def test_ingest_and_chat_leave_no_plaintext_anywhere(make_runtime, tmp_path: Path) -> None:
    from tests.conftest import lorem

    doc = tmp_path / "Plumquist-notes.txt"
    doc.write_text(lorem(6, 1) + "\n\nThe Quintarvex vault is guarded by Zorblatt.\n\n" + lorem(4, 2))
    root = tmp_path / "store"
    rt = make_runtime(store=root, master_key=KEY)
    rt.ingest([doc], layout="sections", progress=False)
    chat = rt.chat()
    chat.send("remember permanently: my locker code is 7733 Vexmoor")
    chat.send("Tell me about the orchard-keeper and the harbor.")
    rt.close()
    assert {p.relative_to(root).parts[0] for p in _files(root)} >= {"log", "payloads"}
    assert _hits(root, WORDS + [str(doc).encode(), doc.name.encode()]) == []
    rt = make_runtime(store=root, master_key=KEY)  # and it all reads back
    assert any("Vexmoor" in (r.text or "") for r in rt.store.records("default", "fact"))
    rt.close()
