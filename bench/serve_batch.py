"""`grm serve` under concurrent chat clients: one answer at a time (--batch 1) vs a batch (--batch 8).

For each torch thread count (1 and 2), two real `grm serve` processes run side by side on
127.0.0.1, each with its own store: `--batch 1` (the one-at-a-time worker) and `--batch 8`
(continuous batching: each request read alone, then decoded with the others, one forward call a
token). For 1, 4 and 8 concurrent clients, alternating between the two servers, each client sends
K chat completions (memory on, as a chat client would: each request's prompt stored, its
exchange kept as evidence), each asking for up to M new tokens, every prompt its own question (so
no request is served whole from another's memory). Reported per row: generated tokens/s and
requests/s over the row's wall time, request latency p50 / p95 (client side, queueing included),
time per request (wall / requests: what one request costs the server), mean requests per decoding
step (grm:decode_batch_rows) and the model's reads per request from /metrics
(grm:model_tokens_read_total and grm:model_forward_calls_total / grm:model_decode_steps_total
over the row's requests), and how many requests had memory mounted before their message.
Bounded: K * clients requests per row, each with a timeout.

`--recall`: each server's tenant first stores a fact per topic (a memory command, nothing
generated), and each request asks where one is ("Where is my rivers notebook?"), so memory is
routed for the message and mounted before it (grm/runtime/answer.py `plan_recall`); without it the
requests' own questions route nothing that grounds them, and each is read as an exact prompt.

`python bench/serve_batch.py [--model M] [--requests K] [--new-tokens M] [--clients 1,4,8]
[--threads-list 1,2] [--name serve-batch] [--sequential] [--recall]`; `--quick` runs the tiny model.
`--step-costs [--models A,B]`: decoding steps timed in process, batched vs alone (no server).

`--join [--streams S] [--rounds R] [--join-chars C] [--prefill-chunk N]`: chunked prefill. Two
`grm serve --batch 8` processes side by side, `--prefill-chunk N` (default 512) and
`--prefill-chunk 0` (each joining prompt read whole). Per round, alternating between them: S
clients stream completions (memory off, up to M new tokens); once each has received a few pieces,
one client sends a long prompt (the first C characters of the news corpus, ~1,500 SmolLM2 tokens,
memory off, so every round reads it whole) and streams its answer. Reported per server: the running
streams' gaps between two streamed pieces while the long prompt joins (a gap that overlaps the
window from the long request's send to its first piece), p50 / p95 / max, beside their gaps before
it (steady decoding), and the joiner's time to its first piece (what chunking costs it). Written to
bench/results/serve-batch-join.{json,md}.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, write_results  # noqa: E402
from serve import Server, pct  # noqa: E402

TOPICS = ("rivers", "harbors", "trains", "winter", "orchards", "bridges", "lighthouses", "markets", "forests",
          "deserts", "islands", "mountains", "libraries", "bakeries", "gardens", "canals")
BATCHES = (1, 8)


def metrics(srv: Server, tenant: str) -> dict[str, float]:
    """The tenant's model-read counters and the batch histogram, as /metrics shows them now."""
    import httpx2 as httpx

    text = httpx.get(srv.url + "/metrics", headers={"Authorization": f"Bearer {srv.keys[tenant]}"}).text
    names = {f'grm:model_tokens_read_total{{tenant="{tenant}"}}': "tokens_read",
             f'grm:model_forward_calls_total{{tenant="{tenant}"}}': "forward_calls",
             f'grm:model_decode_steps_total{{tenant="{tenant}"}}': "decode_steps",
             f'grm:model_tokens_read_per_request_count{{tenant="{tenant}"}}': "requests",
             "grm:decode_batch_rows_count": "batch_steps", "grm:decode_batch_rows_sum": "batch_rows"}
    out = dict.fromkeys(names.values(), 0.0)
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name in names:
            out[names[name]] = float(value)
    return out


def question(topic: str, tag: str, recall: bool) -> str:
    """A request's message: its own question, or (`recall`) where the fact `seed` stored for the topic is."""
    return f"Where is my {topic} notebook?" if recall else f"Request {tag}: write a few sentences about {topic}."


def seed(srv: Server, tenant: str, model: str) -> None:
    """`--recall`: a fact per topic, stored by a memory command (answered without generating)."""
    import httpx2 as httpx

    for i, topic in enumerate(TOPICS):
        body = {"model": model, "max_tokens": 8, "messages": [
            {"role": "user", "content": f"remember permanently: my {topic} notebook is in drawer {i + 2}"}]}
        r = httpx.post(srv.url + "/v1/chat/completions", json=body, timeout=600,
                       headers={"Authorization": f"Bearer {srv.keys[tenant]}"})
        r.raise_for_status()


def row(srv: Server, tenant: str, model: str, clients: int, per_client: int, new_tokens: int, tag: int,
        recall: bool = False) -> dict:
    """`clients` clients at once, `per_client` chat completions each; the row's figures."""
    import httpx2 as httpx

    before = metrics(srv, tenant)
    results: list[dict] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {srv.keys[tenant]}"}, timeout=1800) as http:
            for k in range(per_client):
                topic = TOPICS[(tag + c * per_client + k) % len(TOPICS)]
                body = {"model": model, "max_tokens": new_tokens, "temperature": 0, "messages": [
                    {"role": "user", "content": question(topic, f"{tag}-{c}-{k}", recall)}]}
                t0 = time.perf_counter()
                r = http.post(srv.url + "/v1/chat/completions", json=body)
                took = time.perf_counter() - t0
                res = {"latency_s": took}
                if r.status_code == 200:
                    res["completion_tokens"] = r.json()["usage"]["completion_tokens"]
                    # memory mounted before the message: a routed graft (history blocks have no kind)
                    res["memory_mounted"] = any(m.get("kind") for m in r.json()["grm"]["mounted"])
                else:
                    res["error"] = f"HTTP {r.status_code}: {r.text[:200]}"
                with lock:
                    results.append(res)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    after = metrics(srv, tenant)
    d = {k: after[k] - before[k] for k in after}
    ok = [r for r in results if "error" not in r]
    n = max(1.0, d["requests"])
    lat = [r["latency_s"] for r in ok]
    generated = sum(r["completion_tokens"] for r in ok)
    return {"clients": clients, "requests": len(results), "errors": len(results) - len(ok),
            "error_samples": [r["error"] for r in results if "error" in r][:3], "wall_s": wall,
            "memory_mounted": sum(r["memory_mounted"] for r in ok),
            "generated_tokens": generated, "tokens_per_s": generated / wall, "requests_per_s": len(ok) / wall,
            "latency_p50_s": pct(lat, 0.5), "latency_p95_s": pct(lat, 0.95),
            "time_per_request_s": wall / max(1, len(ok)),
            "rows_per_step": d["batch_rows"] / d["batch_steps"] if d["batch_steps"] else 1.0,
            "model_tokens_read_per_request": d["tokens_read"] / n,
            "forward_calls_per_request": d["forward_calls"] / n, "decode_steps_per_request": d["decode_steps"] / n}


def main(args: argparse.Namespace) -> int:
    quick = args.quick
    model = "tiny-random-llama" if quick else (args.model or "smollm2-135m")
    clients_list = [int(c) for c in args.clients.split(",")]
    threads_list = [int(t) for t in args.threads_list.split(",")]
    per_client = {c: max(1, args.requests // c) if args.requests_total else args.requests for c in clients_list}
    rows: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="grm-bench-serve-batch-"))
    for threads in threads_list:
        # side by side: both servers up, the rows alternating between them; --sequential (a model
        # too large for two copies in RAM): one server after the other
        groups = [BATCHES] if not args.sequential else [(b,) for b in BATCHES]
        for group in groups:
            servers = {}
            for b in group:
                (work / f"t{threads}-b{b}").mkdir()
                servers[b] = Server(work / f"t{threads}-b{b}" / "store", model, threads, ("bench",),
                                    ("--batch", str(b)))
            try:
                if args.recall:
                    for srv in servers.values():
                        seed(srv, "bench", model)
                for clients in clients_list:
                    for b, srv in servers.items():  # the same requests on each
                        r = row(srv, "bench", model, clients, per_client[clients], args.new_tokens, clients * 100,
                                args.recall)
                        rows.append({"threads": threads, "batch": b, **r})
                        print(rows[-1], flush=True)
            finally:
                for srv in servers.values():
                    srv.stop()
    rows.sort(key=lambda r: (r["threads"], r["clients"], r["batch"]))
    table = ["| threads | clients | batch | requests | errors | memory mounted | generated tok/s | req/s | "
             "latency p50 / p95 | time per request | requests per step | model tokens read per request | "
             "forward calls + decode steps per request |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['threads']} | {r['clients']} | {r['batch']} | {r['requests']} | {r['errors']} | "
                     f"{r['memory_mounted']} | "
                     f"{r['tokens_per_s']:.1f} | {r['requests_per_s']:.3f} | "
                     f"{r['latency_p50_s']:.2f} / {r['latency_p95_s']:.2f} s | {r['time_per_request_s']:.2f} s | "
                     f"{r['rows_per_step']:.2f} | {r['model_tokens_read_per_request']:.0f} | "
                     f"{r['forward_calls_per_request']:.1f} + {r['decode_steps_per_request']:.1f} |")
    ratios = []
    for threads in threads_list:
        for clients in clients_list:
            by = {r["batch"]: r for r in rows if (r["threads"], r["clients"]) == (threads, clients)}
            ratio = by[8]["tokens_per_s"] / by[1]["tokens_per_s"]
            ratios.append(f"{threads} thread(s), {clients} client(s): {ratio:.2f}x")
    how = "one server after the other" if args.sequential else "side by side"
    per = "K/clients" if args.requests_total else args.requests
    asks = ("each asking where a fact stored first says a topic's notebook is: --recall, memory routed and "
            "mounted before the message" if args.recall else "each prompt its own question")
    table += ["", f"Generated tokens/s, --batch 8 over --batch 1 (same requests, {how}): " + "; ".join(ratios),
              "", f"Each client sends {per} chat completions of up to {args.new_tokens} new tokens (memory on, "
              f"{asks}), one after the other; memory mounted = requests with a routed graft mounted before "
              "their message; latency is the client's (queueing included); "
              "time per request = wall / requests. Model tokens read = what the model read per request besides "
              "decoding (its prompt, the question's routing key, the exchange kept as evidence), from /metrics; "
              "decode steps = decoding forward calls it took part in (a batched step counts once per request in "
              "it). Requests per step: mean rows of a decoding step (grm:decode_batch_rows; 1 for --batch 1, "
              "which makes no batched step)."]
    cmd = (f"python bench/serve_batch.py --model {model} --requests {args.requests} --new-tokens {args.new_tokens} "
           f"--clients {args.clients} --threads-list {args.threads_list}"
           + (" --requests-total" if args.requests_total else "") + (" --sequential" if args.sequential else "")
           + (" --recall" if args.recall else "")
           + (f" --name {args.name}" if args.name != "serve-batch" else ""))
    write_results(args.name, {"model": model, "new_tokens": args.new_tokens, "rows": rows}, table, cmd, quick=quick)
    print("\n".join(table))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


def step_costs(args: argparse.Namespace) -> int:
    """`--step-costs`: in process, no server: the time of one decoding step of 1, 4 and 8 rows
    (grm/kv/batch.py PaddedBatch) against a lone step (grm/kv/forward.py step), per model and
    thread count: how much a batched step saves per request on this machine, apart from the
    server's reading of prompts. Written to bench/results/serve-batch-steps.{json,md}."""
    import torch

    from grm.kv import new_cache
    from grm.kv.batch import PaddedBatch
    from grm.kv.forward import prefill, step
    from grm.models import load_model
    from grm.runtime.locations import default_cache_dir

    torch.set_grad_enabled(False)
    rows_out = []
    for name in args.models.split(","):
        lm = load_model(name, default_cache_dir())
        model, ids = lm.model, lm.tokenizer.encode("Write a few sentences about rivers and the sea, in plain words.")
        for threads in (int(t) for t in args.threads_list.split(",")):
            torch.set_num_threads(threads)
            lone = new_cache()
            prefill(model, lone, ids, 0)
            seat = len(ids)
            step(model, lone, 100, seat)  # warm
            t0 = time.perf_counter()
            for i in range(args.repeats):
                step(model, lone, 100, seat + 1 + i)
            alone_s = (time.perf_counter() - t0) / args.repeats
            for rows in (1, 4, 8):
                batch = PaddedBatch()
                for r in range(rows):  # rows of different lengths: padded, masked
                    cache = new_cache()
                    prefill(model, cache, ids[: len(ids) - r], 0)
                    batch.add(cache)
                seats = [len(ids) - r for r in range(rows)]
                batch.step(model, [100] * rows, seats)  # warm
                t0 = time.perf_counter()
                for i in range(args.repeats):
                    batch.step(model, [100] * rows, [s + 1 + i for s in seats])
                step_s = (time.perf_counter() - t0) / args.repeats
                rows_out.append({"model": name, "threads": threads, "rows": rows, "step_s": step_s,
                                 "lone_step_s": alone_s, "per_row_gain": alone_s * rows / step_s})
                print(rows_out[-1], flush=True)
        del lm, model
    table = ["| model | threads | rows | batched step | lone step | lone steps / batched step (per-row gain) |",
             "|---|---|---|---|---|---|"]
    table += [f"| {r['model']} | {r['threads']} | {r['rows']} | {r['step_s'] * 1000:.0f} ms | "
              f"{r['lone_step_s'] * 1000:.0f} ms | {r['per_row_gain']:.2f}x |" for r in rows_out]
    table += ["", f"Mean of {args.repeats} steps after one warm step; rows of a batch differ in length by one token "
              "each (padded and masked; one row: no mask). A gain near 1x means a decoding step costs as much per "
              "row batched as alone on this machine (compute-bound), so batching cannot raise throughput there."]
    write_results("serve-batch-steps", {"rows": rows_out, "repeats": args.repeats}, table,
                  f"python bench/serve_batch.py --step-costs --models {args.models} --threads-list {args.threads_list}")
    print("\n".join(table))
    return 0


def join_round(srv: Server, tenant: str, model: str, streams: int, new_tokens: int, prompt: str, tag: int) -> dict:
    """One round of `--join`: `streams` completions streaming, then the long `prompt` sent; the
    arrival times of every stream's pieces, the long request's send and first-piece times."""
    import json

    import httpx2 as httpx

    headers = {"Authorization": f"Bearer {srv.keys[tenant]}"}
    arrivals: list[list[float]] = [[] for _ in range(streams)]
    errors: list[str] = []

    def pieces(http: httpx.Client, body: dict, out: list[float]) -> dict:
        """Stream `body`, each piece's arrival appended to `out`; the last chunk's `grm` object."""
        last: dict = {}
        with http.stream("POST", srv.url + "/v1/completions", json=body) as r:
            if r.status_code != 200:
                errors.append(f"HTTP {r.status_code}: {r.read()[:200]!r}")
                return last
            for line in r.iter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if any(c.get("text") for c in chunk.get("choices", [])):
                    out.append(time.perf_counter())
                last = chunk.get("grm", last)
        return last

    def stream(c: int) -> None:
        topic = TOPICS[(tag + c) % len(TOPICS)]
        body = {"model": model, "max_tokens": new_tokens, "temperature": 0, "stream": True, "grm": {"memory": False},
                "prompt": f"Story {tag}-{c}. A long, quiet story about {topic}, told slowly:"}
        with httpx.Client(headers=headers, timeout=1800) as http:
            pieces(http, body, arrivals[c])

    threads = [threading.Thread(target=stream, args=(c,)) for c in range(streams)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 600
    while min(len(a) for a in arrivals) < 4 and time.monotonic() < deadline and not errors:
        time.sleep(0.01)  # every stream decoding in the batch
    body = {"model": model, "max_tokens": 8, "temperature": 0, "stream": True, "grm": {"memory": False},
            "prompt": prompt + "\n\nQuestion: What is the first story about?\nAnswer:"}
    joined: list[float] = []
    sent = time.perf_counter()
    with httpx.Client(headers=headers, timeout=1800) as http:
        g = pieces(http, body, joined)
    for t in threads:
        t.join()
    first = joined[0] if joined else time.perf_counter()
    during: list[list[float]] = [[] for _ in arrivals]  # per stream
    before = []
    for c, times in enumerate(arrivals):
        for a, b in zip(times, times[1:]):
            if b > sent and a < first:
                during[c].append(b - a)
            elif b <= sent:
                before.append(b - a)
    return {"during": during, "before": before, "joiner_first_s": first - sent, "errors": errors,
            "joiner_prompt_tokens": g.get("tokens_computed", 0) + g.get("tokens_from_memory", 0),
            "stream_pieces": [len(a) for a in arrivals],
            "streams_running_at_first": sum(1 for a in arrivals if a and a[-1] > first)}


def join(args: argparse.Namespace) -> int:
    """`--join`: running streams' inter-piece gaps while one long prompt joins, chunked prefill on
    (--prefill-chunk N) vs off (0), two servers side by side, rounds alternating."""
    from _common import news_corpus

    quick = args.quick
    model = "tiny-random-llama" if quick else (args.model or "smollm2-135m")
    text = "\n\n".join(news_corpus()[5:40])[: args.join_chars]
    prompt = text[: text.rfind(". ") + 1]
    chunks = (args.prefill_chunk, 0)
    rows: list[dict] = []
    work = Path(tempfile.mkdtemp(prefix="grm-bench-serve-join-"))
    for threads in (int(t) for t in args.threads_list.split(",")):
        servers = {}
        try:
            for chunk in chunks:
                (work / f"t{threads}-c{chunk}").mkdir()
                servers[chunk] = Server(work / f"t{threads}-c{chunk}" / "store", model, threads, ("bench",),
                                        ("--batch", "8", "--prefill-chunk", str(chunk)))
            rounds: dict[int, list[dict]] = {c: [] for c in chunks}
            for r in range(args.rounds):
                for chunk in chunks if r % 2 == 0 else chunks[::-1]:  # alternating which goes first
                    rounds[chunk].append(join_round(servers[chunk], "bench", model, args.streams, args.new_tokens,
                                                    prompt, r * 10))
                    print(chunk, {k: v for k, v in rounds[chunk][-1].items() if k not in ("during", "before")},
                          flush=True)
        finally:
            for srv in servers.values():
                srv.stop()
        for chunk in chunks:
            got = rounds[chunk]
            during = [g for r in got for gaps in r["during"] for g in gaps]
            before = [g for r in got for g in r["before"]]
            firsts = [r["joiner_first_s"] for r in got]
            # a round's stall: the median over its streams of each one's longest gap (one stream's
            # held-back piece does not set it)
            stalls = [statistics.median(max(gaps) for gaps in r["during"] if gaps) for r in got]
            rows.append({"threads": threads, "prefill_chunk": chunk, "rounds": len(got), "streams": args.streams,
                         "joiner_prompt_tokens": statistics.median(r["joiner_prompt_tokens"] for r in got),
                         "gaps_during_join": len(during), "gap_p50_s": pct(during, 0.5),
                         "gap_p95_s": pct(during, 0.95), "gap_max_s": max(during, default=float("nan")),
                         "steady_gap_p50_s": pct(before, 0.5), "joiner_first_piece_p50_s": pct(firsts, 0.5),
                         "stall_p50_s": pct(stalls, 0.5), "stall_max_s": max(stalls), "stalls_s": stalls,
                         "streams_running_at_first_min": min(r["streams_running_at_first"] for r in got),
                         "errors": sum(len(r["errors"]) for r in got),
                         "error_samples": [e for r in got for e in r["errors"]][:3],
                         "gaps_during_s": [r["during"] for r in got], "joiner_first_piece_s": firsts})
    table = ["| threads | prefill chunk | rounds | running streams | joiner prompt tokens | gaps during the join | "
             "gap p50 / p95 / max | stall per round p50 / max | steady gap p50 | joiner first piece p50 | "
             "streams still running then | errors |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = f"{r['prefill_chunk']} tokens" if r["prefill_chunk"] else "0 (whole)"
        table.append(f"| {r['threads']} | {name} | {r['rounds']} | {r['streams']} | {r['joiner_prompt_tokens']:.0f} | "
                     f"{r['gaps_during_join']} | {r['gap_p50_s']:.2f} / {r['gap_p95_s']:.2f} / {r['gap_max_s']:.2f} s | "
                     f"{r['stall_p50_s']:.2f} / {r['stall_max_s']:.2f} s | "
                     f"{r['steady_gap_p50_s']:.2f} s | {r['joiner_first_piece_p50_s']:.2f} s | "
                     f"{r['streams_running_at_first_min']} of {r['streams']} | {r['errors']} |")
    ratios = []
    for threads in (int(t) for t in args.threads_list.split(",")):
        on, off = (next(r for r in rows if (r["threads"], r["prefill_chunk"]) == (threads, c)) for c in chunks)
        ratios.append(f"{threads} thread(s), chunks of {args.prefill_chunk} over whole: gap p95 "
                      f"{on['gap_p95_s'] / off['gap_p95_s']:.2f}x, stall per round p50 "
                      f"{on['stall_p50_s'] / off['stall_p50_s']:.2f}x, the joiner's first piece "
                      f"{on['joiner_first_piece_p50_s'] / off['joiner_first_piece_p50_s']:.2f}x")
    table += ["", "Same requests, side by side, rounds alternating: " + "; ".join(ratios), "",
              f"Per round, {args.streams} clients stream completions (memory off, up to {args.new_tokens} new tokens); "
              "once each has received 4 pieces, one long completion (memory off: read whole every round) is sent and "
              "streamed. A gap is the time between two streamed pieces of a running stream (a piece is what the "
              "server sends at once: usually one token; a newline is held back until the token after it, so that "
              "piece's gap can span two chunks); gaps during the join overlap the window from the long request's "
              "send to its first piece. Stall per round: the median over a round's streams of each one's longest "
              "gap during the join, p50 and max over rounds. Steady gap: the same streams' gaps before it. Joiner "
              "first piece: client-side, from its send. Streams still running then: in every round, how many "
              "streams had pieces left after the joiner's first one (fewer: a stream ended inside the window and "
              "its gaps stop there)."]
    cmd = (f"python bench/serve_batch.py --join --model {model} --threads-list {args.threads_list} "
           f"--streams {args.streams} --rounds {args.rounds} --join-chars {args.join_chars} "
           f"--prefill-chunk {args.prefill_chunk} --new-tokens {args.new_tokens}")
    write_results("serve-batch-join", {"model": model, "new_tokens": args.new_tokens, "rows": rows}, table, cmd,
                  quick=quick)
    print("\n".join(table))
    return 0 if all(r["errors"] == 0 for r in rows) else 1


def flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int, default=2, help="chat completions per client (K)")
    p.add_argument("--requests-total", action="store_true", help="--requests is per row, split over the clients")
    p.add_argument("--new-tokens", type=int, default=32, help="max_tokens of each request (M)")
    p.add_argument("--clients", default="1,4,8")
    p.add_argument("--threads-list", default="1,2")
    p.add_argument("--name", default="serve-batch")
    p.add_argument("--sequential", action="store_true", help="one server at a time (a model too large for two)")
    p.add_argument("--recall", action="store_true",
                   help="store a fact per topic first and ask where each is (memory mounted before the message)")
    p.add_argument("--step-costs", action="store_true", help="only time decoding steps in process (no server)")
    p.add_argument("--models", default="smollm2-135m,qwen2.5-coder-1.5b", help="models for --step-costs")
    p.add_argument("--repeats", type=int, default=5, help="steps timed per row count (--step-costs)")
    p.add_argument("--join", action="store_true", help="running streams' gaps while a long prompt joins (chunked "
                   "prefill on vs off)")
    p.add_argument("--streams", type=int, default=3, help="running streams (--join)")
    p.add_argument("--rounds", type=int, default=3, help="long prompts sent to each server (--join)")
    p.add_argument("--join-chars", type=int, default=6900, help="characters of news text in the long prompt (--join)")
    p.add_argument("--prefill-chunk", type=int, default=512, help="the chunked server's --prefill-chunk (--join)")


if __name__ == "__main__":
    run_cli(lambda args: step_costs(args) if args.step_costs else join(args) if args.join else main(args), flags)
