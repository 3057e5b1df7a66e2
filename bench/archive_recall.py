"""Archive recall: are facts still answerable once the document's K/V live only in the archive?

The recall benchmark's facts (bench/recall.py: invented names and numbers, asked in paraphrase)
are inserted into the first CORPUS_ARTICLES articles of the gensim Lee news corpus, which is
ingested once in the `sections` layout. Codebooks (int8, K x4 / V x3, k = 256) are trained on
articles CORPUS_ARTICLES.. (disjoint text) with `train_codebooks`, the code `grm archive train`
runs. Each question is asked in `grafts` mode (sections routed and mounted side by side):
- exact: the stored exact K/V;
- archived: every section block demoted with --drop-exact (`ArchiveTier.demote`, the code
  `grm archive demote --all` runs) in a copy of the store opened by a fresh runtime, so every
  mount comes from the archive (dequantized, re-seated) and must say lossy; plain, with a 32-token
  exact tail (--recent 32), and with the salient tokens' K/V rows also kept beside the streams
  (--keep-salient digits | names, grm/archive/salient.py), stored int8 or float16
  (--salient-storage), alone or with 4 tokens of context either side (--salient-context).
Held-out check: the archived rows that matter are asked again on a second fact set (other facts,
seed SEED + 1, ingested the same way, the same codebooks), since the context width was chosen on
the first.
Ablations (which side matters), on the exact store: every mounted section is replaced at load
time by the same codebooks' reconstruction (the function the tier computes,
tests/archive/test_tier.py::test_a_mount_is_exactly_what_the_benchmarked_quantizer_reconstructs)
with keys left exact, or values left exact.
Scoring: the fact's number appears in the answer. Bytes and the share of tokens kept apart:
`grm archive stats` of each copy.

Sizes for a slow model (the defaults are the full run above): `--facts` (40 per set), `--articles`
(150: the facts' corpus) and `--train-articles` (150, taken right after the corpus). Results go to
archive_recall.* for SmolLM2-135M and archive_recall-MODEL.* for any other model; the table states
the sizes used.

`--forms` (issue 13 items 1 and 8): the first fact set asked plain (the question a user types) and
primed (+ "\nAnswer: <hand-written lead>") through Runtime.ask in `grafts` mode with the runtime's
default flags, on the exact store and on a copy archived the default way (digits +-4 tokens kept
int8, --drop-exact), each answer beside its ceiling: the sections mounted, same order, read as text
+ the same question (bench/recall.py `ask_forms`).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import news_corpus, run_cli, write_results  # noqa: E402
from grm.models.registry import DEFAULT_MODEL  # noqa: E402
from recall import SECTION_TOKENS, SEED, ask_forms, build_corpus, forms_table, make_facts  # noqa: E402

CORPUS_ARTICLES = 150  # facts go into articles [0, 150); codebooks train on [150, 300)
TRAIN_ARTICLES = 150  # articles the codebooks train on, right after the corpus
FULL_FACTS = 40  # facts per set (the first and the held-out)
# Archived copies: (label, exact tail per section, salient rule, context tokens, salient storage).
ARCHIVED = (("archived", 0, "none", 0, "int8"), ("archived, exact tail 32", 32, "none", 0, "int8"),
            ("archived, digits kept int8", 0, "digits", 0, "int8"),
            ("archived, digits kept float16", 0, "digits", 0, "float16"),
            ("archived, digits +-4 tokens kept int8 (the --keep-salient digits default)", 0, "digits", 4, "int8"),
            ("archived, digits and names kept int8", 0, "names", 0, "int8"))
# The same rows on a second fact set (other facts, other articles they land in), chosen nothing on:
# the 4-token context was picked on the first set, so this is its held-out check.
HELD_OUT = ("archived", "archived, digits kept int8",
            "archived, digits +-4 tokens kept int8 (the --keep-salient digits default)")
ABLATIONS = ("keys exact, values V x3", "keys K x4, values exact")


def _ablate(rt, books, how: str):
    """A graft loader that returns the codebooks' reconstruction of the exact K/V, per `how`."""
    from grm.archive.harvest import position_free, rotate_per_token
    from grm.archive.rvq import RVQQuantizer
    from grm.kv import KV

    exact_load = rt.grafts.load
    cfg = books.config
    stages = {ABLATIONS[0]: (0, cfg.value_stages), ABLATIONS[1]: (cfg.key_stages, 0)}[how]
    q = RVQQuantizer(books, *stages)

    def load(gid: str):
        kv = exact_load(gid)
        if kv is None:
            return None
        g = rt.grafts.get(gid)
        seats = torch.arange(g.seat, g.seat + kv.tokens)
        free = position_free(kv, rt.dialect, seats)
        keys, values = [], []
        for layer in range(kv.keys.shape[0]):
            k, v = q.roundtrip(layer, free.keys[layer].float(), free.values[layer].float())
            keys.append(rotate_per_token(k, rt.dialect.inv_freq[layer], seats).to(kv.keys.dtype))
            values.append(v.to(kv.values.dtype))
        return KV(torch.stack(keys), torch.stack(values))

    return load


def _ask_all(rt, facts: list[dict], max_new: int) -> list[dict]:
    out = []
    for fact in facts:
        a = rt.ask(fact["question"], mode="grafts", max_new_tokens=max_new).to_json()
        out.append({"answer": a["answer"], "correct": fact["answer"] in a["answer"], "lossy": a["lossy"],
                    "mounted": len(a["mounted"]), "ttft_s": a["ttft_s"]})
    return out


def main_forms(args: argparse.Namespace, threads: int) -> int:
    from grm.archive.codebook_store import save_codebooks
    from grm.archive.tier import ArchiveConfig
    from grm.archive.train import TrainConfig, train_codebooks
    from grm.runtime import Runtime

    quick = args.quick
    n_facts, articles, max_new = (6, 20, 12) if quick else (40, CORPUS_ARTICLES, 12)
    facts = [dict(f, plain=f["question"].split("\nAnswer: ")[0], primed=f["question"])
             for f in make_facts(n_facts, random.Random(SEED))]
    train_text = "\n\n".join(news_corpus()[articles: articles + (20 if quick else 150)])
    work = Path(tempfile.mkdtemp(prefix="grm-bench-archive-forms-"))
    corpus, _ = build_corpus(facts, articles=articles)
    (work / "corpus.txt").write_text(corpus, encoding="utf-8")
    t0 = time.perf_counter()
    log = lambda m: print(f"[archive-forms {time.perf_counter() - t0:7.1f}s] {m}", file=sys.stderr, flush=True)  # noqa: E731
    probes = []
    with Runtime.open(store=work / "store", model=args.model, threads=threads) as rt:
        dtype = str(rt.lm.model.dtype).replace("torch.", "")
        sections = rt.ingest([work / "corpus.txt"], layout="sections", progress=False)[0].blocks
        books = train_codebooks(rt.lm, rt.dialect, train_text, TrainConfig(k=8 if quick else None, iters=3 if quick else 15))
        save_codebooks(rt.store, books)
        log(f"ingested {sections} sections, trained codebooks on {books.train['tokens']} tokens")
        probes += [{"method": "exact", **ask_forms(rt, fact, max_new)} for fact in facts]
    log("exact asked")
    shutil.copytree(work / "store", work / "archived")
    with Runtime.open(store=work / "archived", model=args.model, threads=threads) as rt:
        rt.archive.demote(rt.config.tenant, books, config=ArchiveConfig(
            recent=0, keep_salient="digits", salient_context=4, salient_storage="int8", drop_exact=True))
    with Runtime.open(store=work / "archived", model=args.model, threads=threads) as rt:  # nothing resident
        probes += [{"method": "archived", **ask_forms(rt, fact, max_new)} for fact in facts]
    log("archived asked")
    totals, lines = forms_table(probes, "method", ("exact", "archived"))
    table = [f"{args.model or DEFAULT_MODEL}, {dtype}, greedy; {n_facts} invented facts (recall.py's templates, the "
             f"lead rules' tune set) in the first {articles} news articles ({sections} sections); `grafts` mode "
             "through Runtime.ask with default flags. exact: the stored K/V; archived: a copy with every section "
             "demoted the default way (digits +-4 tokens kept int8, --drop-exact), asked from a fresh runtime. "
             "Ceiling = the sections mounted, same order, read as text + the same question (the original text, "
             "so the archived rows' ceiling measures what the archive loses)."
             + (" QUICK RUN (smoke test, not the result)." if quick else ""), "", *lines]
    cmd = f"python bench/archive_recall.py --forms --threads {threads}" + (f" --model {args.model}" if args.model else "")
    write_results("archive_recall-forms", {"model": args.model or DEFAULT_MODEL, "facts": n_facts, "sections": sections,
                                           "totals": totals, "probes": probes, "seconds": time.perf_counter() - t0},
                  table, cmd, quick)
    print("\n".join(table[:7]))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def main(args: argparse.Namespace) -> int:
    from grm.archive.codebook_store import save_codebooks
    from grm.archive.tier import ArchiveConfig, tier_stats
    from grm.archive.train import TrainConfig, train_codebooks
    from grm.runtime import Runtime

    if getattr(args, "forms", False):  # `grm bench NAME` with no flag of its own: only the common ones
        return main_forms(args, args.threads or 2)
    quick = getattr(args, "quick", False)
    threads = args.threads or 2
    n_facts = 8 if quick else getattr(args, "facts", FULL_FACTS)
    articles = 30 if quick else getattr(args, "articles", CORPUS_ARTICLES)
    train_articles = 20 if quick else getattr(args, "train_articles", TRAIN_ARTICLES)
    full = (n_facts, articles, train_articles) == (FULL_FACTS, CORPUS_ARTICLES, TRAIN_ARTICLES)
    model = args.model or DEFAULT_MODEL
    max_new = 12
    facts = make_facts(n_facts, random.Random(SEED))
    held_facts = make_facts(n_facts, random.Random(SEED + 1))
    train_text = "\n\n".join(news_corpus()[articles : articles + train_articles])
    work = Path(tempfile.mkdtemp(prefix="grm-bench-archive-recall-"))
    t0 = time.perf_counter()
    log = lambda m: print(f"[archive-recall {time.perf_counter() - t0:7.1f}s] {m}", file=sys.stderr, flush=True)  # noqa: E731
    open_rt = lambda store: Runtime.open(store=store, model=args.model, threads=threads,  # noqa: E731
                                         section_tokens=SECTION_TOKENS, graft_k=3)

    def ingest_set(name: str, fact_set: list[dict]):
        corpus, _ = build_corpus(fact_set, articles=articles)
        (work / f"{name}.txt").write_text(corpus, encoding="utf-8")
        rt = open_rt(work / name)
        got = rt.ingest([work / f"{name}.txt"], layout="sections", progress=False)[0]
        log(f"{name}: ingested {got.blocks} sections")
        return rt, got

    def archived(name: str, fact_set: list[dict], rows, results: dict, stats: dict, hits: dict) -> None:
        for n, (label, tail, rule, context, storage) in enumerate(rows):
            copy = work / f"{name}-{n}"
            shutil.copytree(work / name, copy)
            with open_rt(copy) as rt:
                config = ArchiveConfig(recent=tail, keep_salient=rule, salient_context=context,
                                       salient_storage=storage, drop_exact=True)
                report = rt.archive.demote(rt.config.tenant, books, config=config)
                stats[label] = tier_stats(rt.store, rt.config.tenant)
                log(f"{name} {label}: demoted {len(report.demoted)}, skipped {len(report.skipped)}")
            with open_rt(copy) as rt:  # a fresh process view: nothing resident, every mount from the store
                results[label] = _ask_all(rt, fact_set, max_new)
                hits[label] = rt.stats()["archive"]["archive_hits"]
                log(f"{name} {label}: {sum(a['correct'] for a in results[label])}/{n_facts}")
            shutil.rmtree(copy, ignore_errors=True)

    rt, ingest = ingest_set("store", facts)
    with rt:
        cfg = TrainConfig(k=8 if quick else None, iters=3 if quick else 15)
        books = train_codebooks(rt.lm, rt.dialect, train_text, cfg)
        save_codebooks(rt.store, books)
        log(f"trained codebooks {books.version} on {books.train['tokens']} tokens ({books.nbytes / 1e6:.1f} MB)")
        results = {"exact": _ask_all(rt, facts, max_new)}
        log(f"exact: {sum(a['correct'] for a in results['exact'])}/{n_facts}")
        exact_load = rt.grafts.load
        for how in ABLATIONS:
            rt.residency._load = _ablate(rt, books, how)  # what every mount reads through
            answers = []
            for fact in facts:
                rt.residency._device.clear()  # nothing resident: every mount goes through the loader
                rt.residency._host.clear()
                answers += _ask_all(rt, [fact], max_new)
            results[how] = answers
            log(f"{how}: {sum(a['correct'] for a in answers)}/{n_facts}")
        rt.residency._load = exact_load
    stats, hits = {}, {}
    archived("store", facts, ARCHIVED, results, stats, hits)
    held, held_stats, held_hits = {}, {}, {}
    rt, held_ingest = ingest_set("held-out", held_facts)
    with rt:
        save_codebooks(rt.store, books)
        held["exact"] = _ask_all(rt, held_facts, max_new)
        log(f"held-out exact: {sum(a['correct'] for a in held['exact'])}/{n_facts}")
    archived("held-out", held_facts, [r for r in ARCHIVED if r[0] in HELD_OUT], held, held_stats, held_hits)

    def rows_of(results: dict, stats: dict, hits: dict) -> list[dict]:
        rows = []
        for label, answers in results.items():
            st = stats.get(label, {})
            kept = (st["exact_tokens"] + st["pinned_tokens"]) / st["tokens"] if st.get("tokens") else None
            rows.append({"method": f"ablation: {label}" if label in ABLATIONS else label,
                         "kept_exact_share": kept, "correct": sum(a["correct"] for a in answers),
                         "questions": len(answers),
                         "lossy_answers": None if label in ABLATIONS else sum(a["lossy"] for a in answers),
                         "archive_hits": hits.get(label),
                         "archive_only_ratio": st.get("archive_only_ratio"), "payload_ratio": st.get("payload_ratio"),
                         "all_in_ratio": st.get("all_in_ratio"), "archived_records": st.get("records"),
                         "answers": answers})
        return rows

    rows, held_rows = rows_of(results, stats, hits), rows_of(held, held_stats, held_hits)
    sized = "" if full or quick else (
        f" REDUCED RUN (not the full one: {FULL_FACTS} facts per set in {CORPUS_ARTICLES} articles, codebooks "
        f"trained on the next {TRAIN_ARTICLES}): {n_facts} facts per set in {articles} articles, codebooks trained "
        f"on articles [{articles}, {articles + train_articles}).")
    table = [f"{model}; {n_facts} invented facts in the first {articles} news articles ({ingest.blocks} "
             f"sections of <= {SECTION_TOKENS} tokens); questions in paraphrase, `grafts` mode (top-3 sections "
             f"mounted). Codebooks: {books.config.storage_dtype}, k={books.config.k}, K x{books.config.key_stages} "
             f"/ V x{books.config.value_stages}, trained on {books.train['tokens']:,} tokens of other articles. "
             f"Archived = every section demoted with --drop-exact in a copy of the store, asked from a fresh "
             f"runtime." + (" QUICK RUN (smoke test, not the result)." if quick else "") + sized, "",
             "| method | correct | answers marked lossy | archive mounts | archive-only x | payload x | "
             "all-in x (codebooks once) | tokens kept apart |", "|---|---|---|---|---|---|---|---|"]
    fmt = lambda x: "-" if x is None else f"{x:.1f}x"  # noqa: E731
    pct = lambda x: "-" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    head = table[-2:]
    for n, group in enumerate((rows, held_rows)):
        if n:
            table += ["", f"Held-out check: {n_facts} other invented facts (seed {SEED + 1}) in the same "
                      f"{articles} articles ({held_ingest.blocks} sections), the same codebooks; nothing was "
                      "chosen on this set.", "", *head]
        for r in group:
            table.append(f"| {r['method']} | {r['correct']}/{r['questions']} | "
                         f"{'-' if r['lossy_answers'] is None else r['lossy_answers']} | "
                         f"{'-' if r['archive_hits'] is None else r['archive_hits']} | {fmt(r['archive_only_ratio'])} | "
                         f"{fmt(r['payload_ratio'])} | {fmt(r['all_in_ratio'])} | "
                         f"{pct(r['kept_exact_share'])} |")
    table += ["", "Lossy: an answer says lossy when anything mounted came from the archive, or when two or more "
              "sections were mounted side by side (they were read apart, so the answer is not an exact hit); "
              "ablations bypass the tier, so the column does not apply to them.",
              "", "archive-only = fp16 bytes of the quantized tokens / their index streams; payload = fp16 bytes "
              "of every archived token / archive payloads (streams + exact tails + salient rows + headers); "
              "all-in adds the codebooks once (they amortize over what this store holds, not over 32k tokens). "
              "Tokens kept apart: the exact tails (float32, as the payload) and the salient tokens' rows "
              "(int8 with a float16 scale per row, or float16; grm/archive/salient.py), as a share of the "
              "archived tokens; salient tokens are also in the index streams."]
    data = {"model": model, "full": full, "facts": n_facts, "articles": articles,
            "train_articles": f"[{articles}, {articles + train_articles})", "sections": ingest.blocks,
            "codebooks": books.version,
            "train_tokens": books.train["tokens"], "rows": rows, "held_out_sections": held_ingest.blocks,
            "held_out_rows": held_rows, "seconds": time.perf_counter() - t0}
    name = "archive_recall" if model == "smollm2-135m" else f"archive_recall-{model}"
    flags = "" if full or quick else f" --facts {n_facts} --articles {articles} --train-articles {train_articles}"
    command = f"python bench/archive_recall.py --threads {threads}" + (f" --model {args.model}" if args.model else "")
    write_results(name, data, table, command + flags, quick)
    print("\n".join(table))
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--forms", action="store_true", help="plain vs primed questions, memory vs ceiling")
    p.add_argument("--facts", type=int, default=FULL_FACTS, help=f"facts per set (full run: {FULL_FACTS})")
    p.add_argument("--articles", type=int, default=CORPUS_ARTICLES,
                   help=f"news articles the facts go into (full run: {CORPUS_ARTICLES})")
    p.add_argument("--train-articles", type=int, default=TRAIN_ARTICLES,
                   help=f"articles after those the codebooks train on (full run: {TRAIN_ARTICLES})")


if __name__ == "__main__":
    run_cli(main, _flags)
