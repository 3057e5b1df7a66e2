"""Where plain-words updates are lost: in the reading or in the routing. Two probes on the update
splits (bench/fidelity.py's, bench/data/sealed/updates-*.json), no memory store involved.

- reading: the item's two turns (statement, then update) and the question read as text in one
  user message through the chat template, with the runtime's system message, in three layouts:
  `memory` (what a memory chat mounts when routing brings both turns: "User: <statement>\\n\\nUser:
  <update>\\n\\n<question>"), `list` (numbered, oldest first) and `said` ("Earlier I said: ...
  Later I said: ..."); then, as memory mounts them beside other turns, `memory + 3 others` (the
  next three items' statements around the pair) and `update + 3 others` (the statement left out:
  what a memory that knew the update replaces it would mount). Scored as fidelity.py scores: the answer holds the new value and not the
  old. This is the reading ceiling of a router that finds both turns; fidelity.py's "in context"
  column reads the turns as a conversation with the model's own replies, which differs.
- routing: every statement and update of the splits as candidates (2 per item), every question
  ranked against all of them by (a) BM25 over words (a plain BM25, stop words out: a stand-in for
  the lexical channel, not GRM's router itself) and (b) the model's own embeddings: mean of the
  last layer's hidden states, and the last token's last-layer state after the prompt 'This
  sentence: "<text>" means in one word:"' (PromptEOL, Jiang et al. 2023), centred on the
  candidates' mean, cosine; and (c) GRM's meaning channel (grm/route/meaning.py: the same last
  state after a prompt asking for the text's topic in one word, centred the same way). Reported:
  how many questions rank their statement / their update in the top 1, 3 and 5, how often a
  statement ranks its own update in the top 3 among the updates (what a link from statement to
  update would find), and how often the turn said after the statement that is nearest it is its
  update (GraftMemory.later's link). Then what routers of a few designs would mount (`mounts`):
  each channel's top 4, the top 2 of each, and that union with each mounted statement's
  best-linked update (by either channel), and GRM's meaning channel as the runtime uses it (its
  top 2 above the floor, each with the later turn nearest it above the floor), one pair as
  RouteConfig.pair mounts it (the first of those top 2 with a later turn above the floor) and one
  pair chosen jointly (a turn of the meaning's top 5 and a later turn, the pair whose cosines with
  the question and with each other sum highest), and how often the mounted turns hold the
  statement, the update, both.

`python bench/update_reading.py --model qwen2.5-coder-1.5b --threads 1 --splits fresh20,fresh21 --parts reading,routing`
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, sealed, write_results  # noqa: E402

LAYOUTS = {  # (statement, update, question, three other items' statements) -> the user's message
    "memory": lambda s, u, q, o: f"User: {s}\n\nUser: {u}\n\n{q}",
    "list": lambda s, u, q, o: f"What I told you before, oldest first:\n1. {s}\n2. {u}\n\nMy question now: {q}",
    "said": lambda s, u, q, o: f'Earlier I said: "{s}"\nLater I said: "{u}"\n\n{q}',
    "memory + 3 others": lambda s, u, q, o: f"User: {o[0]}\n\nUser: {s}\n\nUser: {o[1]}\n\nUser: {u}\n\nUser: {o[2]}\n\n{q}",
    "update + 3 others": lambda s, u, q, o: f"User: {o[0]}\n\nUser: {o[1]}\n\nUser: {o[2]}\n\nUser: {u}\n\n{q}",
}
STOP = frozenset("a an the i my me we our you your is are was were be to of in on at for and or it its this that what "
                 "who which where when how do does did have has with now these days there so".split())
EOL = 'This sentence: "{text}" means in one word:"'


def has(answer: str, value: str) -> bool:
    return value.casefold() in answer.casefold()


def reading(rt, items: list[tuple], split: str) -> dict:
    from grm.runtime.chat import TURN_STOPS

    t = rt.lm.tokenizer.template
    rows = []
    for i, (s, u, q, old, new) in enumerate(items):
        row = {"question": q, "old": old, "new": new}
        others = [items[(i + k) % len(items)][0] for k in (1, 2, 3)]  # other items' statements: turns of the same kind
        for name, lay in LAYOUTS.items():
            a = rt.ask(t.head + t.user_turn(lay(s, u, q, others)), memory=False, chat=True, stop=TURN_STOPS).answer.strip()
            row[name] = {"answer": a, "latest": has(a, new) and not has(a, old), "stale": has(a, old)}
        rows.append(row)
        print(f"[reading {split}] {len(rows)}/{len(items)} " + " ".join(
            f"{n}={'ok' if row[n]['latest'] else 'no'}" for n in LAYOUTS), file=sys.stderr, flush=True)
    return {"split": split, "n": len(rows), "rows": rows,
            **{n: {"latest": sum(r[n]["latest"] for r in rows), "stale": sum(r[n]["stale"] for r in rows)}
               for n in LAYOUTS}}


def _words(text: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP]


def bm25_scores(queries: list[str], docs: list[str]) -> list[list[float]]:
    toks = [_words(d) for d in docs]
    df = Counter(w for d in toks for w in set(d))
    n, avg = len(toks), sum(map(len, toks)) / max(1, len(toks))

    def score(q: str, d: list[str]) -> float:
        c = Counter(d)
        return sum(math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5)) * c[w] * 2.2 / (c[w] + 1.2 * (0.25 + 0.75 * len(d) / avg))
                   for w in set(_words(q)) if w in c)

    return [[score(q, d) for d in toks] for q in queries]


def _embed(lm, texts: list[str], how: str):
    """[texts, hidden]: `how` "mean" (the last layer's states, averaged), "eol" (PromptEOL's last
    state) or "meaning" (GRM's meaning vector, grm/route/meaning.py)."""
    import torch

    from grm.route.meaning import meaning_vector

    if how == "meaning":
        return torch.stack([meaning_vector(lm.model, lm.tokenizer, t) for t in texts])
    eol = how == "eol"
    out = []
    with torch.no_grad():
        for text in texts:
            ids = lm.tokenizer.encode(EOL.format(text=text) if eol else text)
            hs = lm.model(input_ids=torch.tensor([ids]), output_hidden_states=True, logits_to_keep=1).hidden_states[-1][0]
            out.append((hs[-1] if eol else hs.mean(0)).float())
    return torch.stack(out)


def _ranks(scores, gold: list[int]) -> list[int]:
    """1-based rank of each query's gold candidate (ties counted against it; a zero score: unranked)."""
    return [1 + sum(x > row[g] for x in row) if row[g] > 0 else 10**6 for row, g in zip(scores, gold)]


def _at(ranks: list[int], k: int) -> int:
    return sum(r <= k for r in ranks)


def routing(rt, items: list[tuple]) -> dict:
    import torch

    statements, updates, questions = [it[0] for it in items], [it[1] for it in items], [it[2] for it in items]
    cands, n = statements + updates, len(items)
    channels = {"bm25": (bm25_scores(questions, cands), bm25_scores(statements, updates))}
    full = {"bm25": bm25_scores(cands, cands)}
    for name, how in (("hidden mean", "mean"), ("hidden PromptEOL", "eol"), ("meaning (GRM)", "meaning")):
        c, q = _embed(rt.lm, cands, how), _embed(rt.lm, questions, how)
        mu = c.mean(0)
        c, q = (torch.nn.functional.normalize(x - mu, dim=-1) for x in (c, q))
        sims = (q @ c.T).tolist()
        link = (c[:n] @ c[n:].T).tolist()  # statement -> updates
        # cosines may be negative: shift so that every candidate is ranked (a zero is "unranked" for bm25 only)
        full[name] = [[x + 2 for x in r] for r in (c @ c.T).tolist()]
        channels[name] = ([[x + 2 for x in r] for r in sims], [[x + 2 for x in r] for r in link])
        print(f"[routing] {name} embedded", file=sys.stderr, flush=True)
    out = {}
    for name, (q_scores, links) in channels.items():
        rs, ru = _ranks(q_scores, list(range(n))), _ranks(q_scores, [n + i for i in range(n)])
        rl = _ranks(links, list(range(n)))
        # the turn said after statement i (the later statements, then every update) nearest it
        first = [max(range(i + 1, 2 * n), key=lambda j: full[name][i][j]) for i in range(n)]
        out[name] = {"statement": {k: _at(rs, k) for k in (1, 3, 5)}, "update": {k: _at(ru, k) for k in (1, 3, 5)},
                     "both_at_5": sum(a <= 5 and b <= 5 for a, b in zip(rs, ru)),
                     "statement_links_update_at_3": _at(rl, 3),
                     "first_later_is_update": sum(f == n + i for i, f in enumerate(first))}
    return {"n": n, "candidates": len(cands), "channels": out, "mounts": mounts(channels, n, full)}


def _top(row: list[float], k: int) -> list[int]:
    """The k best candidates of a score row (a zero score is no match)."""
    return [i for i in sorted(range(len(row)), key=lambda i: -row[i]) if row[i] > 0][:k]


def mounts(channels: dict, n: int, full: dict) -> dict:
    """What a router of each design would mount per question, and whether that holds the item's
    statement, its update, both. Candidates 0..n-1 are statements, n..2n-1 updates (said later);
    a link brings, for each mounted statement, the update its channel ranks first against it.
    GRM's meaning channel as grafts.route and later use it: its top MEANING_PICKS above the floor,
    each bringing the candidate after it nearest it above the floor (`full`: every candidate
    against every other, cosines shifted by 2)."""
    from grm.grafts.memory import RouteConfig
    from grm.runtime.config import MEANING_PICKS

    bm, eol = channels["bm25"], channels["hidden PromptEOL"]
    sims, among = channels["meaning (GRM)"][0], full["meaning (GRM)"]
    floor = RouteConfig().meaning_floor + 2

    def picks(i: int) -> list[int]:  # the meaning's top MEANING_PICKS above the floor
        return [j for j in _top(sims[i], MEANING_PICKS) if sims[i][j] >= floor]

    def later_of(j: int, skip: list[int] = ()) -> int | None:  # the turn said after j nearest it, above the floor
        best = max((k for k in range(j + 1, 2 * n) if k not in skip), key=lambda k: among[j][k], default=None)
        return best if best is not None and among[j][best] >= floor else None

    def meaning(i: int) -> list[int]:
        got = picks(i)
        for j in list(got):
            if (k := later_of(j, got)) is not None:
                got.append(k)
        return got

    def first_pair(i: int) -> list[int]:  # RouteConfig.pair on the meaning picks: the first with a later link
        got = picks(i)
        return next(([j, k] for j in got if (k := later_of(j)) is not None), got)

    def joint_pair(i: int) -> list[int]:  # the pair the question's meaning of both and their link rank first
        top = [j for j in _top(sims[i], 5) if sims[i][j] >= floor]
        pairs = [(sims[i][j] + sims[i][k] + among[j][k], [j, k]) for j in top for k in range(j + 1, 2 * n)
                 if among[j][k] >= floor]
        return max(pairs)[1] if pairs else top[:1]

    def union(i: int, k: int = 2) -> list[int]:
        return list(dict.fromkeys(_top(bm[0][i], k) + _top(eol[0][i], k)))

    def linked(got: list[int], link: list[list[float]]) -> list[int]:
        return list(dict.fromkeys(got + [n + j for c in got if c < n for j in _top(link[c], 1)]))

    designs = {
        "bm25, top 4": lambda i: _top(bm[0][i], 4),
        "PromptEOL, top 4": lambda i: _top(eol[0][i], 4),
        "bm25 top 2 + PromptEOL top 2": union,
        "the same + each statement's update by bm25": lambda i: linked(union(i), bm[1]),
        "the same + each statement's update by PromptEOL": lambda i: linked(union(i), eol[1]),
        "GRM's meaning channel: top 2 + each one's nearest later turn": meaning,
        "one pair: the first of the meaning's top 2 with a later turn, and that turn (RouteConfig.pair)": first_pair,
        "one pair: a turn of the meaning's top 5 and a later one, by question-turn + question-later + turn-later": joint_pair,
    }
    out = {}
    for name, mount in designs.items():
        got = [set(mount(i)) for i in range(n)]
        out[name] = {"statement": sum(i in g for i, g in enumerate(got)),
                     "update": sum(n + i in g for i, g in enumerate(got)),
                     "both": sum(i in g and n + i in g for i, g in enumerate(got)),
                     "mounted_mean": round(sum(map(len, got)) / max(1, n), 2)}
    return out


def main(args: argparse.Namespace) -> int:
    import torch

    from grm.runtime import Runtime

    splits = args.splits.split(",")
    known = sealed("updates")
    missing = [s for s in splits if s not in known]
    if missing:
        print(f"no update split named {', '.join(missing)} in bench/data/sealed", file=sys.stderr)
        return 2
    parts = args.parts.split(",")
    threads = args.threads
    torch.set_num_threads(threads)
    res: dict = {"splits": splits, "parts": parts}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d, Runtime.open(store=Path(d) / "s", model=args.model, threads=threads,
                                                          max_new_tokens=24) as rt:
        res["model"], res["dtype"], res["system"] = rt.lm.name, str(rt.lm.model.dtype).replace("torch.", ""), rt.config.system
        if "reading" in parts:
            res["reading"] = [reading(rt, known[s], s) for s in splits]
        if "routing" in parts:
            res["routing"] = routing(rt, [it for s in splits for it in known[s]])
    res["seconds"] = round(time.perf_counter() - t0, 1)
    table = [f"{res['model']} {res['dtype']}, greedy, {threads} thread(s); splits {', '.join(splits)}. See the module "
             "docstring (bench/update_reading.py) for what each column is.", ""]
    if "reading" in res:
        table += ["## Reading: both turns in context, in one user message", "",
                  "| split | items | " + " | ".join(f"{n}: latest (stale)" for n in LAYOUTS) + " |",
                  "|---|---|" + "---|" * len(LAYOUTS)]
        for r in res["reading"]:
            table.append(f"| {r['split']} | {r['n']} | " + " | ".join(
                f"{r[n]['latest']}/{r['n']} ({r[n]['stale']})" for n in LAYOUTS) + " |")
        table.append("")
    if "routing" in res:
        rr = res["routing"]
        table += [f"## Routing: {rr['n']} questions against {rr['candidates']} turns (every statement and update)", "",
                  "| channel | statement @1 / @3 / @5 | update @1 / @3 / @5 | both in the top 5 | statement finds its update in the top 3 of the updates | the turn after the statement nearest it is its update |",
                  "|---|---|---|---|---|---|"]
        for name, c in rr["channels"].items():
            table.append(f"| {name} | {c['statement'][1]} / {c['statement'][3]} / {c['statement'][5]} | "
                         f"{c['update'][1]} / {c['update'][3]} / {c['update'][5]} | {c['both_at_5']} | "
                         f"{c['statement_links_update_at_3']} | {c['first_later_is_update']} |")
        table += ["", "What a router of each design would mount (turns per question: mean):", "",
                  "| design | statement mounted | update mounted | both | turns mounted |", "|---|---|---|---|---|"]
        for name, m in rr["mounts"].items():
            table.append(f"| {name} | {m['statement']}/{rr['n']} | {m['update']}/{rr['n']} | {m['both']}/{rr['n']} | "
                         f"{m['mounted_mean']} |")
        table.append("")
    table.append(f"{res['seconds']} s.")
    name = f"update-reading-{'-'.join(splits)}" + ("" if parts == ["reading", "routing"] else f"-{'-'.join(parts)}")
    write_results(name, res, table, f"python bench/update_reading.py --model {args.model} --threads {threads} "
                  f"--splits {args.splits} --parts {args.parts}")
    print("\n".join(table))
    return 0


def _flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--splits", default="fresh20,fresh21")
    p.add_argument("--parts", default="reading,routing", help="reading, routing or both (comma-separated)")


if __name__ == "__main__":
    run_cli(main, _flags)
