"""Can the meaning channel tell an update from a turn that is only alike? Its link's cosines, side
by side, on turns that have an update and on turns that have none.

The meaning channel (grm/route/meaning.py) links a routed turn to the later turn nearest it in
meaning (`GraftMemory.later`); `RouteConfig.replace` would leave the earlier turn out where such a
link exists. That is safe only if a link from a statement to its update scores above the links
from turns that were never updated. Two kinds of chat, each as the benchmark's own chat says its
turns (the questions, which only ask, are not candidates; vectors centred on the chat's turns, as
the runtime centres on a tenant's):
- updates: a split of bench/fidelity.py's (every statement, small talk, every update, small
  talk); per statement, the later turn nearest it: is it its update, and at what cosine;
- needles: bench/chat_ceiling.py's 51-turn scripts (16 facts, none ever changed, and small talk);
  per needle, the later turn nearest it and its cosine (every such link is a false one).
Reported: the cosines' quartiles per kind, and at several floors how many true links, wrong links
from updated statements, and links from needles would pass.

`python bench/meaning_links.py --model qwen2.5-coder-1.5b --threads 1 --splits fresh22,fresh23,fresh24`
(seen splits only: a sealed split's first run is a fidelity run).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import SEALED, run_cli, write_results  # noqa: E402

FLOORS = (0.2, 0.3, 0.4, 0.5, 0.6)
DEFAULT_SPLITS = "fresh22,fresh23,fresh24"  # seen


def centred_units(lm, texts: list[str]):
    """The texts' meaning vectors, centred on their mean, unit length (MeaningIndex's scoring)."""
    import numpy as np

    from grm.route.meaning import meaning_vector

    mat = np.stack([meaning_vector(lm.model, lm.tokenizer, t).numpy() for t in texts])
    mat = mat - mat.mean(0)
    return mat / np.linalg.norm(mat, axis=1, keepdims=True)


def nearest_later(units, i: int, turns: list[str]) -> tuple[int, float, dict[int, float]]:
    """The turn after `i` nearest it (not one that only asks): (index, cosine, every later cosine)."""
    from grm.grafts.floor import only_asks

    cos = {j: float(units[i] @ units[j]) for j in range(i + 1, len(turns)) if not only_asks(f"User: {turns[j]}")}
    best = max(cos, key=cos.get)
    return best, cos[best], cos


def update_links(lm, items: list) -> list[dict]:
    from fidelity import SMALL_TALK

    n = len(items)
    turns = [s for s, *_ in items] + [SMALL_TALK[0]] + [u for _, u, *_ in items] + [SMALL_TALK[1]]
    units = centred_units(lm, turns)
    rows = []
    for i in range(n):
        best, cos, every = nearest_later(units, i, turns)
        rows.append({"statement": turns[i], "nearest": turns[best], "nearest_is_update": best == n + 1 + i,
                     "nearest_cos": cos, "update_cos": every[n + 1 + i]})
    return rows


def needle_links(lm, split: str) -> list[dict]:
    import chat_ceiling

    lines = chat_ceiling.script(split, 51)
    needles = len(chat_ceiling.NEEDLES[split])
    turns = lines[:-needles]  # the probes only ask
    units = centred_units(lm, turns)
    rows = []
    for i in range(needles):
        best, cos, _ = nearest_later(units, i, turns)
        rows.append({"needle": turns[i], "nearest": turns[best], "nearest_cos": cos})
    return rows


def _quartiles(xs: list[float]) -> str:
    import numpy as np

    return " / ".join(f"{v:.2f}" for v in np.percentile(xs, [25, 50, 75])) if xs else "-"


def main(args: argparse.Namespace) -> int:
    import torch

    from grm.runtime import Runtime

    torch.set_num_threads(args.threads)
    splits = getattr(args, "splits", DEFAULT_SPLITS).split(",")  # `grm bench meaning_links` passes the common flags only
    t0 = time.perf_counter()
    res: dict = {"updates": {}, "needles": {}}
    with tempfile.TemporaryDirectory() as d, \
            Runtime.open(store=Path(d) / "s", model=args.model, threads=args.threads) as rt:
        for name in splits:
            items = json.loads((SEALED / f"updates-{name}.json").read_text())["items"]
            res["updates"][name] = update_links(rt.lm, items)
        for split in ("tune", "held-out"):
            res["needles"][split] = needle_links(rt.lm, split)
    true = [r["nearest_cos"] for rows in res["updates"].values() for r in rows if r["nearest_is_update"]]
    wrong = [r["nearest_cos"] for rows in res["updates"].values() for r in rows if not r["nearest_is_update"]]
    needles = [r["nearest_cos"] for rows in res["needles"].values() for r in rows]
    table = [f"{args.model} ({', '.join(splits)}; chat_ceiling's tune and held-out needles), "
             f"{args.threads} thread(s). See the module docstring (bench/meaning_links.py).", "",
             "| link | links | cosine: 25% / 50% / 75% |", "|---|---|---|",
             f"| a statement's nearest later turn is its update | {len(true)} | {_quartiles(true)} |",
             f"| a statement's nearest later turn is another turn | {len(wrong)} | {_quartiles(wrong)} |",
             f"| a needle's nearest later turn (never updated) | {len(needles)} | {_quartiles(needles)} |", "",
             "| floor | true links kept | wrong links from updated statements kept | needles linked |",
             "|---|---|---|---|"]
    for floor in FLOORS:
        kept = [f"{sum(c >= floor for c in xs)}/{len(xs)}" for xs in (true, wrong, needles)]
        table.append(f"| {floor:g} | " + " | ".join(kept) + " |")
    table += ["", "| needle | its nearest later turn | cosine |", "|---|---|---|"]
    for rows in res["needles"].values():
        table += [f"| {r['needle']} | {r['nearest']} | {r['nearest_cos']:.2f} |" for r in rows]
    table.append(f"\n{time.perf_counter() - t0:.0f} s.")
    from grm.models import DEFAULT_MODEL

    other = "" if args.model in (None, DEFAULT_MODEL) else f"-{args.model}"  # the default's file is the record
    write_results(f"meaning-links-{'-'.join(splits)}{other}", {"model": args.model, "splits": splits, **res}, table,
                  f"python bench/meaning_links.py --model {args.model} --threads {args.threads} --splits {','.join(splits)}")
    print("\n".join(table[:16]))
    return 0


if __name__ == "__main__":
    run_cli(main, lambda p: p.add_argument("--splits", default=DEFAULT_SPLITS,
                                           help="seen update splits, comma-separated (default %(default)s)"))
