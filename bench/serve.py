"""`grm serve` under load: memory on vs off, side by side, through HTTP.

A real `grm serve` process (its own store and keys, on 127.0.0.1) answers, for each side:
- 8 concurrent clients, REQUESTS requests in all; each prompt is one shared ~2,000-token document
  (real news text; a byte-level text for the tiny --quick model) followed by its own question,
  streamed (`stream: true`), so the client sees its time to first token;
- side "off": `"grm": {"memory": false}` (nothing loaded, nothing stored);
- side "on, ingested": the document is ingested first (POST /v1/documents), then plain requests
  load its blocks;
- side "on, prompt only": plain requests, nothing ingested: the first request stores its prompt's
  blocks, later ones load those they start with (the last block of that prompt holds the first
  question too, so it never matches another question: up to one block is read again).
Each side is its own tenant (API keys), so no side sees another's memory.
Reported per side: client TTFT p50/p99 (queueing included: 8 clients share one model worker),
server TTFT p50/p99 (from the ask to the first token: the memory effect alone), throughput
(requests/s), hit rate (cached/prompt tokens), errors, and the server's RSS over the first vs last
50 requests. Then 8 conversations of 10 turns (chat completions, history resent every turn):
per turn, the share of the previous turn's prompt (the history the server read) loaded from memory.
Targets (issue 15): server TTFT p50 with memory >= 10x lower than without; 0 errors; RSS flat
(last 50 within 10% of first 50); every turn after the first reuses >= 95% of its history.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import news_corpus, run_cli, write_results  # noqa: E402
from grm.models.registry import DEFAULT_MODEL  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = 8
TURNS = 10
QUESTIONS = ("Who is named first?", "Which place is mentioned?", "What happened?", "When did it happen?",
             "Which number appears?", "Who said it?", "What is the topic?", "Where was it?")


def document(quick: bool) -> str:
    if quick:  # the tiny model reads bytes: ~2,000 bytes are ~2,000 tokens
        words = "harbor station winter river orchard apple robot sensor light team morning water".split()
        return " ".join(words[i % len(words)] for i in range(330)) + "."
    text = ""
    for art in news_corpus()[5:]:
        text += art + "\n\n"
        if len(text) > 8800:
            break
    cut = text[:8800]  # ~1,900 SmolLM2 tokens of news English, ending at a sentence
    return cut[: cut.rfind(". ") + 1]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


class Server:
    """`grm serve` in a child process; `rss()` reads its resident memory."""

    def __init__(self, store: Path, model: str, threads: int, tenants: tuple[str, ...],
                 extra: tuple[str, ...] = ()) -> None:
        from grm.serve.auth import add_key
        from grm.serve.server import free_port

        keys = store.parent / "keys.txt"
        self.keys = {t: add_key(keys, t) for t in tenants}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        self.proc = subprocess.Popen([sys.executable, "-m", "grm", "serve", "--keys", str(keys), "--port", str(self.port),
                                      "--model", model, "--store", str(store), "--threads", str(threads),
                                      "--queue", "64", "--timeout", "3600", *extra], cwd=ROOT, env=env)
        import httpx2 as httpx
        import psutil

        self.ps = psutil.Process(self.proc.pid)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("grm serve exited before it was ready")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        raise RuntimeError("grm serve not ready after 600 s")

    def rss(self) -> int:
        return self.ps.memory_info().rss

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(120)


def stream(client, url: str, body: dict) -> dict:
    """One streamed request: client TTFT (first content piece), the final chunk's `grm` object."""
    t0 = time.perf_counter()
    ttft, last = None, None
    with client.stream("POST", url, json=body, timeout=3600) as r:
        if r.status_code != 200:
            return {"error": f"HTTP {r.status_code}: {r.read()[:200]!r}"}
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                return {"error": chunk["error"].get("message")}
            if ttft is None and chunk.get("choices") and chunk["choices"][0].get("text"):
                ttft = time.perf_counter() - t0
            if "grm" in chunk:
                last = chunk
    total = time.perf_counter() - t0
    g = last["grm"]
    return {"client_ttft_s": ttft if ttft is not None else total, "total_s": total, "server_ttft_s": g["ttft_s"],
            "prompt_tokens": g["tokens_from_memory"] + g["tokens_computed"], "cached_tokens": g["tokens_from_memory"]}


def ingest(srv: Server, tenant: str, doc: str) -> float:
    import httpx2 as httpx

    h = {"Authorization": f"Bearer {srv.keys[tenant]}"}
    t0 = time.perf_counter()
    job = httpx.post(srv.url + "/v1/documents", json={"name": "shared.txt", "text": doc, "layout": "chain"},
                     headers=h).json()
    while job["status"] not in ("done", "failed"):
        time.sleep(0.2)
        job = httpx.get(f"{srv.url}/v1/jobs/{job['id']}", headers=h).json()
    if job["status"] != "done":
        raise RuntimeError(f"ingest failed: {job['error']}")
    return time.perf_counter() - t0


def side(srv: Server, tenant: str, model: str, doc: str, n: int, memory: bool, max_tokens: int) -> dict:
    import httpx2 as httpx

    results: list[dict] = []
    rss: list[tuple[int, int]] = []
    lock = threading.Lock()
    counter = iter(range(n))

    def client_loop() -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {srv.keys[tenant]}"}) as client:
            while True:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                body = {"model": model, "stream": True, "max_tokens": max_tokens,
                        "prompt": f"{doc}\n\nQuestion ({i}): {QUESTIONS[i % len(QUESTIONS)]}\nAnswer:"}
                if not memory:
                    body["grm"] = {"memory": False}
                res = stream(client, srv.url + "/v1/completions", body)
                with lock:
                    results.append(res)
                    rss.append((len(results), srv.rss()))

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client_loop) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if "error" not in r]
    errors = [r["error"] for r in results if "error" in r]
    rss.sort()
    first = [b for _, b in rss[:50]]
    last = [b for _, b in rss[-50:]]
    return {
        "side": tenant, "memory": memory, "requests": n, "errors": len(errors), "error_samples": errors[:3],
        "client_ttft_p50_s": pct([r["client_ttft_s"] for r in ok], 0.5),
        "client_ttft_p99_s": pct([r["client_ttft_s"] for r in ok], 0.99),
        "server_ttft_p50_s": pct([r["server_ttft_s"] for r in ok], 0.5),
        "server_ttft_p99_s": pct([r["server_ttft_s"] for r in ok], 0.99),
        "throughput_rps": len(ok) / wall, "wall_s": wall,
        "hit_rate": sum(r["cached_tokens"] for r in ok) / max(1, sum(r["prompt_tokens"] for r in ok)),
        "prompt_tokens_mean": statistics.mean(r["prompt_tokens"] for r in ok) if ok else 0,
        "rss_first50_mb": statistics.mean(first) / 1e6 if first else 0,
        "rss_last50_mb": statistics.mean(last) / 1e6 if last else 0,
    }


def conversations(srv: Server, tenant: str, model: str, doc: str, turns: int, max_tokens: int) -> list[dict]:
    """CLIENTS conversations at once, `turns` turns each; per turn the share of the previous
    prompt (the history the server read) served from memory, and of the whole prompt."""
    import httpx2 as httpx

    rows: list[dict] = []
    lock = threading.Lock()

    def talk(c: int) -> None:
        messages = [{"role": "system", "content": f"Conversation {c}. Answer from this text.\n\n{doc[:3000]}"}]
        prev = None
        with httpx.Client(headers={"Authorization": f"Bearer {srv.keys[tenant]}"}) as client:
            for turn in range(1, turns + 1):
                messages.append({"role": "user", "content": f"Turn {turn}: {QUESTIONS[(c + turn) % len(QUESTIONS)]}"})
                r = client.post(srv.url + "/v1/chat/completions", timeout=3600,
                                json={"model": model, "messages": messages, "max_tokens": max_tokens})
                if r.status_code != 200:
                    with lock:
                        rows.append({"conversation": c, "turn": turn, "error": r.text[:200]})
                    return
                body = r.json()
                usage = body["usage"]
                cached = usage["prompt_tokens_details"]["cached_tokens"]
                # memory mounted for the latest message counts in prompt and cached tokens; history
                # reuse compares the conversation's own tokens only
                grafts = sum(m["span"][1] - m["span"][0] for m in body.get("grm", {}).get("mounted", [])
                             if m.get("kind"))
                row = {"conversation": c, "turn": turn, "prompt_tokens": usage["prompt_tokens"], "cached_tokens": cached,
                       "mounted_graft_tokens": grafts, "share_of_prompt": cached / usage["prompt_tokens"]}
                if prev is not None:
                    row["history_reuse"] = min(1.0, (cached - grafts) / prev)
                with lock:
                    rows.append(row)
                prev = usage["prompt_tokens"] - grafts
                messages.append({"role": "assistant", "content": body["choices"][0]["message"]["content"]})

    threads = [threading.Thread(target=talk, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return rows


def main(args: argparse.Namespace) -> int:
    quick = getattr(args, "quick", False)
    model = "tiny-random-llama" if quick else (args.model or DEFAULT_MODEL)
    threads = args.threads or 2
    n = getattr(args, "requests", None) or (40 if quick else 200)  # per side
    turns = 3 if quick else TURNS
    max_tokens = 8
    doc = document(quick)
    work = Path(tempfile.mkdtemp(prefix="grm-bench-serve-"))
    srv = Server(work / "store", model, threads, ("off", "ingested", "prompt-only", "chat"))
    try:
        off = side(srv, "off", model, doc, n, memory=False, max_tokens=max_tokens)
        ingest_s = ingest(srv, "ingested", doc)
        on = side(srv, "ingested", model, doc, n, memory=True, max_tokens=max_tokens)
        prompt_only = side(srv, "prompt-only", model, doc, n, memory=True, max_tokens=max_tokens)
        conv = conversations(srv, "chat", model, doc, turns, max_tokens)
    finally:
        code = srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    reuse = [r["history_reuse"] for r in conv if "history_reuse" in r]
    conv_errors = [r for r in conv if "error" in r]
    speedup = off["server_ttft_p50_s"] / on["server_ttft_p50_s"]
    targets = {
        "server_ttft_p50_speedup_ge_10": speedup >= 10,
        "zero_errors": on["errors"] == off["errors"] == prompt_only["errors"] == len(conv_errors) == 0,
        "rss_flat_within_10pct": on["rss_last50_mb"] <= 1.1 * on["rss_first50_mb"],
        "history_reuse_ge_0.95_every_turn": bool(reuse) and min(reuse) >= 0.95,
        "sigterm_exit_0": code == 0,
    }
    sides = [off, on, prompt_only]
    table = ["| side | requests | errors | client TTFT p50 / p99 | server TTFT p50 / p99 | throughput | hit rate | "
             "RSS first 50 -> last 50 |", "|---|---|---|---|---|---|---|---|"]
    for s in sides:
        table.append(f"| {s['side']} | {s['requests']} | {s['errors']} | "
                     f"{s['client_ttft_p50_s']:.3f} / {s['client_ttft_p99_s']:.3f} s | "
                     f"{s['server_ttft_p50_s']:.4f} / {s['server_ttft_p99_s']:.4f} s | "
                     f"{s['throughput_rps']:.2f} req/s | {s['hit_rate']:.1%} | "
                     f"{s['rss_first50_mb']:.0f} -> {s['rss_last50_mb']:.0f} MB |")
    table += ["", f"Server TTFT p50 speed-up with memory (document ingested first, {ingest_s:.1f} s): {speedup:.1f}x; "
              f"prompt only: {off['server_ttft_p50_s'] / prompt_only['server_ttft_p50_s']:.1f}x "
              f"(prompt ~{on['prompt_tokens_mean']:.0f} tokens, {CLIENTS} concurrent clients, {max_tokens} tokens "
              "generated each).", "",
              f"Conversations: {CLIENTS} x {turns} turns; history reused per turn (min over conversations): "
              + reuse_by_turn(conv), "",
              "Targets: " + ", ".join(f"{k}: {v}" for k, v in targets.items()), "",
              "Client TTFT includes waiting for the one model worker (8 clients share it); server TTFT is the "
              "ask's own time to first token. Hit rate = cached / prompt tokens (the sinks count as cached). "
              "History reuse = cached tokens of turn k / prompt tokens of turn k-1 (what the server had read), "
              "both without the tokens of memory mounted for the latest message."]
    write_results("serve", {"model": model, "threads": threads, "clients": CLIENTS, "sides": sides, "ingest_s": ingest_s,
                            "speedup_server_ttft_p50": speedup, "conversations": conv, "targets": targets},
                  table, "grm bench serve --threads 2" if n == 200 else f"python bench/serve.py --threads 2 --requests {n}",
                  quick=quick)
    print("\n".join(table))
    return 0 if all(targets.values()) else 1


def reuse_by_turn(conv: list[dict]) -> str:
    """`turn 2: 97.1%, turn 3: ...`: the least history reuse over the conversations, per turn."""
    by_turn: dict[int, list[float]] = {}
    for r in conv:
        if "history_reuse" in r:
            by_turn.setdefault(r["turn"], []).append(r["history_reuse"])
    return ", ".join(f"turn {t}: {min(v):.1%}" for t, v in sorted(by_turn.items()))


def chat_only(args: argparse.Namespace) -> int:
    """Only the 10-turn conversations (`python bench/serve.py --chat-only`): history reuse per turn,
    written to bench/results/serve-chat.{json,md}."""
    model = args.model or DEFAULT_MODEL
    work = Path(tempfile.mkdtemp(prefix="grm-bench-serve-chat-"))
    srv = Server(work / "store", model, args.threads or 2, ("chat",))
    try:
        conv = conversations(srv, "chat", model, document(False), TURNS, 8)
    finally:
        code = srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    errors = [r for r in conv if "error" in r]
    reuse = [r["history_reuse"] for r in conv if "history_reuse" in r]
    targets = {"history_reuse_ge_0.95_every_turn": bool(reuse) and min(reuse) >= 0.95, "zero_errors": not errors,
               "sigterm_exit_0": code == 0}
    table = [f"Conversations: {CLIENTS} x {TURNS} turns (chat completions, history resent every turn, memory on); "
             "history reused per turn (min over conversations): " + reuse_by_turn(conv), "",
             "Targets: " + ", ".join(f"{k}: {v}" for k, v in targets.items())]
    write_results("serve-chat", {"model": model, "conversations": conv, "targets": targets}, table,
                  "python bench/serve.py --threads 2 --chat-only")
    print("\n".join(table))
    return 0 if all(targets.values()) else 1


if __name__ == "__main__":
    if "--chat-only" in sys.argv:
        sys.argv.remove("--chat-only")
        run_cli(chat_only)
    if "--requests" in sys.argv:  # `python bench/serve.py --requests N`: fewer requests per side
        i = sys.argv.index("--requests")
        REQUESTS = int(sys.argv[i + 1])
        del sys.argv[i : i + 2]
        run_cli(lambda a: main(argparse.Namespace(**vars(a), requests=REQUESTS)))
    run_cli(main)
