"""Reliability sweeps added for issue 14 (used by bench/reliability.py):

- `meta_flip_sweep`: every byte of every record's meta in the log (plain: the `"meta":{...}`
  JSON; encrypted: the sealed fields that now hold it) flipped in turn; each damaged store must
  open at a committed prefix or raise CorruptionError, and `Store.salvage` of it must then serve
  only rows equal to what was written (never a row with other meta).
- `salvage_sweep`: a 1,000-record log damaged at seeded random offsets - one flipped byte, a
  zeroed range, a cut (truncated) file - then opened (or salvaged when it refuses): records
  recovered vs records whose frames were intact, records lost and named, wrong rows served.
- `plaintext_scan`: an encrypted store after a sections ingest and a chat (tiny random model):
  every distinctive word (7+ letters, as written) of the corpus and the chat, the documents'
  paths and JSON token-id arrays searched in every file under the root.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from grm.errors import CorruptionError, GrmError
from grm.store import MemoryFS, Store, StoreConfig
from grm.store.log import FRAME_SIZE, HEADER_SIZE

KEY = bytes(range(32))


@dataclass
class Tally:
    cases: int = 0
    opened: int = 0  # opened as is (a committed prefix)
    corruption: int = 0  # refused with CorruptionError (then salvaged)
    salvaged: int = 0
    intact: int = 0  # records whose frames the damage did not touch (summed over cases)
    recovered: int = 0  # records served afterwards, equal to what was written
    lost_named: int = 0  # records lost that the store named (salvage report, fsck lost)
    lost: int = 0  # records written but not served afterwards
    wrong: int = 0  # rows served that differ from what was written: must stay 0
    violations: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "violations"} | {"violations": len(self.violations)}


def _frames(data: bytes) -> list[tuple[int, int, dict]]:
    """(offset, end, body) of each frame of an undamaged segment."""
    out, off = [], HEADER_SIZE
    while off < len(data):
        n = int.from_bytes(data[off:off + 4], "little")
        out.append((off, off + FRAME_SIZE + n, json.loads(data[off + FRAME_SIZE:off + FRAME_SIZE + n])))
        off += FRAME_SIZE + n
    return out


def _truth_rows(s: Store) -> dict[str, tuple]:
    return {r.ident: (r.parent, json.dumps(r.meta, sort_keys=True), r.payload, r.text, r.state) for r in s.records()}


def _judge(cfg: StoreConfig, truth: dict[str, tuple], tally: Tally, where: str) -> set[str]:
    """Open (salvaging if refused); count served rows right or wrong; return the idents served."""
    try:
        s = Store.open(cfg)
        tally.opened += 1
    except CorruptionError:
        tally.corruption += 1
        try:
            rep = Store.salvage(cfg)
        except GrmError as e:
            tally.violations.append(f"{where}: salvage failed: {e}")
            return set()
        tally.salvaged += 1
        try:
            s = Store.open(cfg)
        except GrmError as e:
            tally.violations.append(f"{where}: salvaged store does not open: {e}")
            return set()
        del rep
    except GrmError as e:
        tally.violations.append(f"{where}: {type(e).__name__}: {e}")
        return set()
    with s:
        served = _truth_rows(s)
        named = set(s.fsck().lost)
        if s._codec.encrypted:  # a record whose sealed frame is unreadable is named by its keyed id
            named |= {i for i in truth for t, k, key in [i.split("/", 2)] if f"{t}/{k}/#{s._codec.kid(t, k, key)}" in named}
        for r in s.records():
            if r.payload is not None and s.read_payload(r) is None and r.state != "damaged":
                tally.violations.append(f"{where}: payload of {r.ident} unreadable")
    for ident, row in served.items():
        if truth.get(ident) != row:
            tally.wrong += 1
            tally.violations.append(f"{where}: {ident} served as {row}, written as {truth.get(ident)}")
    ok = {i for i, row in served.items() if truth.get(i) == row}
    tally.recovered += len(ok)
    gone = set(truth) - set(served)
    tally.lost += len(gone)
    tally.lost_named += len(gone & named)
    return ok


# ---- meta flips ----------------------------------------------------------------------------------

def _meta_store(fs: MemoryFS, root: str, key: bytes | None) -> dict[str, tuple]:
    with Store.open(StoreConfig(root, fs=fs, master_key=key, checkpoint_every=10_000)) as s:
        for i in range(6):
            s.put("t", "fact", f"f{i}", text=f"fact {i}", parent="node",
                  meta={"subject": f"user {i}", "value": f"code {1000 + i}", "ids": list(range(i, i + 12))})
        return _truth_rows(s)


def meta_flip_sweep(encrypted: bool) -> Tally:
    root, fs = "/m", MemoryFS()
    truth = _meta_store(fs, root, KEY if encrypted else None)
    seg = f"{root}/log/" + fs.listdir(f"{root}/log")[0]
    files = {}
    for dirpath in (root, f"{root}/log", f"{root}/checkpoints", f"{root}/payloads"):
        for n in fs.listdir(dirpath):
            p = f"{dirpath}/{n}"
            if not fs.is_dir(p):
                files[p] = bytes(fs.read_bytes(p))
    data = files[seg]
    field_name = b'"sealed":"' if encrypted else b'"meta":{'
    spans = []
    for off, end, body in _frames(data):
        if body.get("op") == "put":
            a = data.index(field_name, off, end) + len(field_name)
            b = data.index(b'"', a) if encrypted else data.index(b'},"', a)
            spans.append((a, b))
    tally = Tally()
    for a, b in spans:
        for i in range(a, b):
            img = MemoryFS()
            for p, d in files.items():
                img.makedirs(os.path.dirname(p))
                h = img.open_write(p)
                h.write(d)
                h.close()
            img.raw(seg)[i] ^= 1 << (i % 8)
            tally.cases += 1
            _judge(StoreConfig(root, fs=img, master_key=KEY if encrypted else None), truth, tally, f"meta@{i}")
    tally.intact = tally.cases * (len(truth) - 1)  # one record's frame is hit per flip
    return tally


# ---- salvage sweep -------------------------------------------------------------------------------

def salvage_sweep(records: int = 1000, trials: int = 12, seed: int = 14) -> dict[str, Tally]:
    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="grm-salvage-sweep-"))
    try:
        base = work / "base"
        with Store.open(StoreConfig(base, checkpoint_every=10 ** 6)) as s:
            for i in range(records):
                with s.transaction() as txn:
                    txn.put(f"t{i % 3}", "block", f"k{i:04d}", payload=f"payload {i}".encode() * 4,
                            text=f"record {i}", meta={"i": i, "tag": f"m{i % 7}"})
            truth = _truth_rows(s)
        [seg_name] = os.listdir(base / "log")
        data = (base / "log" / seg_name).read_bytes()
        frames = _frames(data)
        # each record = its put frame + its commit frame (one transaction each)
        spans = {}
        for (a, _, body), (_, e, _) in zip(frames[0::2], frames[1::2]):
            spans[f"{body['tenant']}/{body['kind']}/{body['key']}"] = (a, e)
        out = {}
        for kind in ("flip", "zero", "truncate"):
            tally = Tally()
            for t in range(trials):
                img = work / f"{kind}{t}"
                shutil.copytree(base, img)
                seg = img / "log" / seg_name
                buf = bytearray(seg.read_bytes())
                off = rng.randrange(HEADER_SIZE, len(buf))
                if kind == "flip":
                    buf[off] ^= 1 << rng.randrange(8)
                    hit = (off, off + 1)
                elif kind == "zero":
                    n = rng.randrange(1, 4097)
                    buf[off:off + n] = bytes(len(buf[off:off + n]))
                    hit = (off, off + n)
                else:
                    del buf[off:]
                    hit = (off, len(data))
                seg.write_bytes(bytes(buf))
                tally.cases += 1
                tally.intact += sum(1 for a, e in spans.values() if e <= hit[0] or a >= hit[1])
                _judge(StoreConfig(img), truth, tally, f"{kind}@{off}")
                shutil.rmtree(img, ignore_errors=True)
            out[kind] = tally
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- plaintext scan ------------------------------------------------------------------------------

_IDS = re.compile(rb"\[\s*\d+(?:\s*,\s*\d+){7,}\s*\]")
CORPUS = {
    "harbor-ledger.txt": "The Quintarvex harbor ledger records that Marisolde Brackenridge paid "
                         "forty-two silver crowns for the lighthouse lantern repairs in Fennimore.\n\n"
                         "Afterwards the Vexmoor cooperative reopened the Thornbury cannery.\n",
    "orchard-notes.txt": "Orchard-keeper Zebulonne Ashcombe grafted Pennywhistle apples onto "
                         "Greywater rootstock.\n\nThe Caldermist frost arrived early that November.\n",
}
CHAT = ["remember permanently: my locker code is 7733 at Ravenscliffe station",
        "Tell me about the Pennywhistle apples and the Caldermist frost."]


def plaintext_scan(model: str = "tiny-random-llama") -> dict:
    from grm.runtime import Runtime

    work = Path(tempfile.mkdtemp(prefix="grm-plaintext-scan-"))
    try:
        docs = []
        for name, text in CORPUS.items():
            (work / name).write_text(text)
            docs.append(work / name)
        root = work / "store"
        rt = Runtime.open(store=root, model=model, master_key=KEY, threads=1)
        try:
            rt.ingest(docs, layout="sections", progress=False)
            chat = rt.chat()
            for line in CHAT:
                chat.send(line)
        finally:
            rt.close()
        words = sorted({w for text in [*CORPUS.values(), *CHAT] for w in re.findall(r"[A-Za-z]{7,}", text)})
        needles = [w.encode() for w in words] + [str(d).encode() for d in docs]
        files = [p for p in root.rglob("*") if p.is_file()]
        hits = []
        for p in files:
            blob = p.read_bytes()
            hits += [f"{p.relative_to(root)}: {n.decode()}" for n in needles if n in blob]
            hits += [f"{p.relative_to(root)}: token ids" for _ in _IDS.finditer(blob)]
        return {"model": model, "files": len(files), "bytes": sum(p.stat().st_size for p in files),
                "needles": len(needles), "hits": len(hits), "examples": hits[:5]}
    finally:
        shutil.rmtree(work, ignore_errors=True)
