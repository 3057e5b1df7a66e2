"""A resident runtime: `grm ask` and `grm ingest` wall time in a new process, cold (no server:
the process loads the model) vs warm (a `grm serve` holds the store: the CLI sends the request
there, grm/cli/remote.py).

Two stores, one document (bench/resident.py's own text, ~400 tokens), the same commands:
- cold: `grm ingest DOC --store C`, then `grm ask Q --store C` ROUNDS times;
- warm: `grm serve --store W --no-auth` started first (its start-up timed to the endpoint file),
  then `grm ingest DOC --store W` and `grm ask Q --store W` ROUNDS times.
Asks alternate cold, warm, cold, warm... so both see the same machine load; each is a new
`python -m grm` process timed from spawn to exit. The first ask and the median of the later ones
are reported, with the answer time the runtime itself measured (`total_s`) beside the wall time,
and the answers are checked equal (same mode, same text). `--threads N` is given to every command
and to the server. `--quick`: the tiny random model.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import run_cli, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = 3
QUESTION = "When does the ferry to Sandvik leave?"
DOC = """Harbour notes for the island of Vessøy

The island has one harbour, on its east side, sheltered by a breakwater built in 1962. Fishing
boats use the inner basin; visiting yachts tie up along the outer quay, where water and power
are available from May to September.

The ferry to Sandvik leaves at nine in the morning from the outer quay and returns at six in the
evening. In winter it runs only on Tuesdays, Thursdays and Saturdays. Tickets are sold on board.

The harbour master, Ingrid Solberg, keeps the office above the chandlery. She asks every visiting
boat to report its length and expected stay on arrival, and she posts the weather forecast on the
office door each morning at eight.

A footpath leads from the harbour to the lighthouse on the northern point, about forty minutes on
foot. The lighthouse has been automatic since 1989; the keeper's house is now a small museum that
opens on weekends in summer.
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", "PYTHONPATH": str(ROOT)}


def grm(*argv: str) -> tuple[float, dict, str]:
    """(wall seconds, the JSON printed, stderr) of one `python -m grm ... --json` process."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "grm", *argv, "--json"], cwd=ROOT, env=_env(), capture_output=True,
                       text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"grm {' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return wall, json.loads(r.stdout), r.stderr


def main(args) -> int:
    quick = getattr(args, "quick", False)
    model = "tiny-random-llama" if quick else (getattr(args, "model", None) or "smollm2-135m")
    threads = str(getattr(args, "threads", None) or 2)
    common = ["--model", model, "--threads", threads]
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="grm-resident-") as tmp:
        doc = Path(tmp) / "harbour.txt"
        doc.write_text(DOC)
        cold, warm = Path(tmp) / "cold", Path(tmp) / "warm"
        port = _free_port()
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "grm", "serve", "--no-auth", "--port", str(port),
                                 "--store", str(warm), *common], cwd=ROOT, env=_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            while not (warm / "SERVE.json").exists():
                if proc.poll() is not None:
                    raise SystemExit(f"grm serve failed: {proc.stderr.read()}")
                time.sleep(0.05)
            server_start = time.perf_counter() - t0
            rows: dict[str, dict] = {}
            for name, store in (("cold", cold), ("warm", warm)):
                wall, out, err = grm("ingest", str(doc), "--store", str(store), *common)
                assert ("served by the running grm serve" in err) == (name == "warm"), err
                rows[name] = {"ingest_wall_s": wall, "ingest": out, "asks": []}
            for _ in range(ROUNDS):
                for name, store in (("cold", cold), ("warm", warm)):
                    wall, out, err = grm("ask", QUESTION, "--store", str(store), *common)
                    assert ("served by the running grm serve" in err) == (name == "warm"), err
                    rows[name]["asks"].append({"wall_s": wall, "total_s": out["total_s"], "mode": out["mode"],
                                               "answer": out["answer"], "prompt_tokens": out["prompt_tokens"],
                                               "tokens_from_memory": out["tokens_from_memory"]})
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)
        left = (warm / "SERVE.json").exists()
    same = all((c["answer"], c["mode"]) == (w["answer"], w["mode"])
               for c, w in zip(rows["cold"]["asks"], rows["warm"]["asks"]))
    for r in rows.values():
        walls = [a["wall_s"] for a in r["asks"]]
        r["first_ask_wall_s"], r["later_ask_wall_s"] = walls[0], statistics.median(walls[1:])
        r["first_ask_total_s"] = r["asks"][0]["total_s"]
        r["later_ask_total_s"] = statistics.median(a["total_s"] for a in r["asks"][1:])
    c, w = rows["cold"], rows["warm"]
    ratios = {"first_ask": c["first_ask_wall_s"] / w["first_ask_wall_s"],
              "later_ask": c["later_ask_wall_s"] / w["later_ask_wall_s"],
              "ingest": c["ingest_wall_s"] / w["ingest_wall_s"]}
    load_after = os.getloadavg()[0]
    ask = c["asks"][0]
    table = ["| `grm ...` (a new process each) | cold: no server | warm: `grm serve` running | cold / warm |",
             "|---|---|---|---|",
             f"| ingest ({c['ingest']['tokens']} tokens) | {c['ingest_wall_s']:.2f} s | {w['ingest_wall_s']:.2f} s | "
             f"{ratios['ingest']:.1f}x |",
             f"| first ask | {c['first_ask_wall_s']:.2f} s (answer {c['first_ask_total_s']:.2f} s) | "
             f"{w['first_ask_wall_s']:.2f} s (answer {w['first_ask_total_s']:.2f} s) | {ratios['first_ask']:.1f}x |",
             f"| later ask (median of {ROUNDS - 1}) | {c['later_ask_wall_s']:.2f} s (answer {c['later_ask_total_s']:.2f} s) | "
             f"{w['later_ask_wall_s']:.2f} s (answer {w['later_ask_total_s']:.2f} s) | {ratios['later_ask']:.1f}x |",
             "",
             f"Model {model}, --threads {threads}; `grm serve` took {server_start:.1f} s from spawn to its endpoint file "
             f"(once per server, not counted above). Ask: \"{QUESTION}\" in {ask['mode']} mode, "
             f"{ask['tokens_from_memory']}/{ask['prompt_tokens']} prompt tokens from memory. Cold and warm asks "
             f"alternate; same answers cold and warm: {same}; endpoint file removed on SIGTERM: {not left}. "
             f"Wall = spawn to exit of `python -m grm`; answer = the runtime's own total_s. 1-minute load average "
             f"{load_before:.1f} before, {load_after:.1f} after (other jobs on the machine)."]
    write_results("resident", {"model": model, "threads": int(threads), "rounds": ROUNDS, "question": QUESTION,
                               "server_start_s": server_start, "cold": c, "warm": w, "ratios_cold_over_warm": ratios,
                               "same_answers": same, "endpoint_removed": not left,
                               "load_average_1min": [load_before, load_after]},
                  table, f"python bench/resident.py --threads {threads}" + (f" --model {model}" if not quick and
                                                                             model != "smollm2-135m" else ""),
                  quick=quick)
    print("\n".join(table))
    return 0 if same and not left else 1


if __name__ == "__main__":
    run_cli(main)
