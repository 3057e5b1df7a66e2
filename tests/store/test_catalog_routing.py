"""Lexical search on big catalogs (Catalog._selective): common words are skipped only past
SELECTIVE_MIN_ROWS rows, never all of them, and the rank filter stays exact across tenants."""

from __future__ import annotations

from grm.store import catalog as cat
from grm.store.catalog import Catalog
from grm.store.fs import LocalFS
from grm.store.record import Record


def _catalog(n: int, rare_at: int) -> Catalog:
    c = Catalog(LocalFS(), None)
    rows = (Record("t", "doc", f"k{i:06d}", None, {}, None, 0,
                   f"alpha filler{i % 997} " + ("zebra" if i == rare_at else "words"), "active", i + 1)
            for i in range(n))
    c.rebuild(rows, n)
    return c


def test_small_catalog_scores_every_word() -> None:
    c = _catalog(200, 7)
    hits = c.search("t", ["alpha", "zebra"], "doc", 50)
    assert hits[0][0].key == "k000007" and len(hits) == 50  # rows holding only "alpha" still ranked


def test_big_catalog_skips_a_word_most_rows_hold_when_a_rarer_one_remains() -> None:
    c = _catalog(cat.SELECTIVE_MIN_ROWS + 5_000, 7)
    assert [r.key for r, _ in c.search("t", ["alpha", "zebra"], "doc", 50)] == ["k000007"]


def test_big_catalog_never_drops_every_word_and_scores_the_newest_rows() -> None:
    n = cat.SELECTIVE_MIN_ROWS + 5_000
    c = _catalog(n, 7)
    hits = c.search("t", ["alpha"], "doc", 50)
    assert len(hits) == 50
    reach = int(cat.MAX_POSTINGS / 1.0)  # "alpha" is in every row
    assert all(int(r.key[1:]) >= n - reach for r, _ in hits)


def test_rows_of_another_tenant_do_not_hide_this_tenants_rows() -> None:
    """The FTS-only ranking is filtered afterwards: when the best rows are another tenant's,
    the search falls back to ranking with the filter joined in."""
    c = Catalog(LocalFS(), None)
    rows = [Record("other", "doc", f"o{i}", None, {}, None, 0, "fox fox fox", "active", i + 1) for i in range(300)]
    rows.append(Record("t", "doc", "mine", None, {}, None, 0, "a fox among many words here", "active", 301))
    c.rebuild(rows, 301)
    assert [r.key for r, _ in c.search("t", ["fox"], "doc", 5)] == ["mine"]
