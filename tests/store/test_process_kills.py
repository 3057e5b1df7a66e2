"""Process kills: a child process writing to a store on the local disk is SIGKILLed at random
moments, 50 times over one store; after each kill the store opens, every write the child had
acknowledged is there with a verified payload, and fsck finds no damaged record."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.store.helpers import open_store

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import sys
from pathlib import Path
from grm.store import Store, StoreConfig
root, mode, start = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
with Store.open(StoreConfig(root, durability=mode, checkpoint_every=40, lock_timeout=5)) as s:
    print("ready", flush=True)
    for i in range(start, start + 10_000):
        with s.transaction() as txn:  # a chat turn: the turn and a fact, the old fact superseded
            txn.put("u", "turn", f"t{i}", payload=(b"%d " % i) * (50 + i % 700), text=f"turn {i}")
            txn.put("u", "fact", f"f{i}", text=f"fact {i}", parent=f"t{i}")
            if i > start:
                txn.set_state("u", "fact", f"f{i - 1}", "superseded")
        print(i, flush=True)
"""


def test_fifty_kills_never_lose_an_acknowledged_write_or_damage_a_record(root: Path) -> None:
    rng = random.Random(7)
    acked: list[int] = []
    start = 0
    for kill in range(50):
        mode = ("normal", "async", "strict")[kill % 3]
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), mode, str(start)], cwd=REPO,
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.08))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        acked += [int(line) for line in out.split()]
        with open_store(root, lock_timeout=5) as s:
            for i in acked[-20:] + acked[:3]:
                rec = s.get("u", "turn", f"t{i}")
                assert rec is not None, (kill, i)
                assert s.read_payload(rec) == (b"%d " % i) * (50 + i % 700)
            rep = s.fsck()
            assert rep.damaged == [] and rep.catalog_ok
            start = max((int(r.key[1:]) for r in s.records("u", "turn")), default=-1) + 1
    assert len(acked) > 50
