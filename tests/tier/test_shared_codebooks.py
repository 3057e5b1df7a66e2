"""Server tiering trains its codebooks on every tenant's text (issue 31, hole 7).

Under API keys the server's runtime tenant ("default") holds nothing; its tiering used to train
codebooks from that tenant alone, so it archived nothing and dropped every cold span to text.
Codebooks are one shared set per model (grm/archive/policy.py says what that shares):
1. two tenants, each holding less text than training needs alone, together train codebooks;
2. both tenants' spans are archived with them, and every archived span mounts;
3. each tenant gives its share of the training text, neither all of it;
4. the run pauses after each move and training window (the server's worker serves others there).
"""

from __future__ import annotations

from grm.archive.codebook_store import codebook_versions
from grm.archive.policy import PolicyConfig, TieringPolicy
from grm.serve.config import ServeConfig
from grm.serve.engine import Engine
from grm.store.tiering import TierConfig, inventory
from tests.conftest import lorem

TEXT = {"alice": lorem(5, seed=3), "bob": lorem(5, seed=4)}


def test_a_tiered_server_trains_on_every_tenant_and_archives_both(make_runtime, tmp_path):
    rt = make_runtime(section_tokens=48, block_tokens=48)
    for tenant, text in TEXT.items():
        rt.for_tenant(tenant).ingest_text(text, f"{tenant}.txt", layout="sections")
    need = max(len(rt.lm.tokenizer.encode(t)) for t in TEXT.values()) + 1  # more than either tenant holds
    inv = inventory(rt.store)
    floor = inv.kept_bytes + inv.log_bytes + inv.row_bytes
    engine = Engine(rt, ServeConfig(port=0, no_auth=True, store_budget=floor + sum(s.bytes for s in inv.spans) // 2))
    policy = engine.tiering()
    policy.config = PolicyConfig(min_train_tokens=need, train_tokens=4 * need, max_train=2000, k=64, iters=4)
    assert policy.due()
    pauses: list[int] = []
    report = policy.run(pause=lambda: pauses.append(1))  # the server runs it a slice at a time
    assert len(pauses) > len(report.moves) > 0  # after each move and each training window
    assert report.trained is not None and codebook_versions(rt.store, rt.lm.identity) == [report.trained]
    demoted = {m["tenant"] for m in report.moves if m["action"] == "demote"}
    assert demoted == {"alice", "bob"}, report.to_json()["tiers"]  # every tenant's spans archived
    archived = [s for s in inventory(rt.store).spans if s.tier == "archive"]
    assert archived and all(rt.archive.load(s.tenant, s.key) is not None for s in archived)


def test_each_tenant_gives_its_share_of_the_training_text(make_runtime):
    rt = make_runtime()
    rt.for_tenant("alice").ingest_text("alpha " * 1000, "a.txt", layout="chain")
    rt.for_tenant("bob").ingest_text("bravo " * 100, "b.txt", layout="chain")
    policy = TieringPolicy(rt.store, rt.lm, rt.dialect, TierConfig(1),
                           PolicyConfig(min_train_tokens=64, train_tokens=2048))
    text, tokens = policy._training_text()  # bob holds less than his half: all of it, alice the rest
    assert tokens == 2048 and text.count("bravo") >= 99 and text.count("alpha") >= 235
