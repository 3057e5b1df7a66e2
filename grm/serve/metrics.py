"""Prometheus metrics (prometheus_client, a registry of the server's own), per tenant.

Names follow vLLM's prefix-cache counters, counted in tokens:
    grm:prefix_cache_queries_total{tenant}   prompt tokens of answered requests
    grm:prefix_cache_hits_total{tenant}      of those, tokens served from stored K/V
    grm:requests_total{tenant,endpoint,memory}
    grm:requests_rejected_total{tenant}      429s and 503s (the key's queue or byte quota, a full server)
    grm:time_to_first_token_seconds{tenant,memory}   histogram
    grm:request_duration_seconds{tenant,memory}      histogram
    grm:queue_wait_seconds{tenant}                   histogram
    grm:model_tokens_read_total{tenant}      tokens the model read for generation requests besides
                                             decoding: the prompt's text after memory (a chat's
                                             history not stored yet, its latest message once),
                                             stored blocks re-read, the routing key, the exchange
                                             read as evidence, a model-written lead
    grm:model_forward_calls_total{tenant}    the forward calls that read them
    grm:model_decode_steps_total{tenant}     decoding forward calls each request took part in (a
                                             batched step counts once for each request in it)
    grm:model_tokens_read_per_request{tenant}        histogram of the first, per request
    grm:model_forward_calls_per_request{tenant}      histogram: forward calls + decode steps
    grm:page_ins_total{tenant,plane} / grm:page_outs_total{tenant}   graft K/V paging
    grm:store_bytes{tenant,tier}             payload bytes by tier (exact | archived)
    grm:host_tier_hits_total{tenant} / grm:host_tier_misses_total{tenant}   exact blocks mounted
                                             from host RAM / looked up there and read from the store
    grm:host_tier_bytes{tenant}              bytes of verified exact blocks held in host RAM
    grm:host_tier_bytes_served_total{tenant} bytes mounted from there (no store read, no SHA-256)
    grm:host_tier_evictions_total{tenant}    blocks let go to keep the budget (--host-budget)
    grm:queue_depth                          requests waiting for the model worker (no tenant)
    grm:decode_batch_rows                    histogram: requests in each batched decoding step (no
                                             tenant: a step serves several)
A client sees only the samples labelled with its own tenant (and the unlabelled queue depth).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
COUNT_BUCKETS = (0, 1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)  # tokens or calls per request
ARCHIVED_KINDS = ("archive", "codebook")
# the host tier's figures per tenant (grm/exact/tier.py HostTier.stats): name -> (type, help)
HOST_TIER = {"hits": ("counter", "Exact blocks mounted from the host tier (RAM)"),
             "misses": ("counter", "Exact blocks looked up in the host tier and read from the store"),
             "bytes": ("gauge", "Bytes of verified exact blocks held in the host tier"),
             "bytes_served": ("counter", "Bytes mounted from the host tier"),
             "evictions": ("counter", "Blocks the host tier let go to keep its budget")}
disable_created_metrics()  # no *_created series: scrapers here do not use them


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.queries = Counter("grm:prefix_cache_queries", "Prompt tokens of answered requests", ["tenant"],
                               registry=r)
        self.hits = Counter("grm:prefix_cache_hits", "Prompt tokens served from stored K/V", ["tenant"], registry=r)
        self.requests = Counter("grm:requests", "Answered generation requests", ["tenant", "endpoint", "memory"],
                                registry=r)
        self.rejects = Counter("grm:requests_rejected", "Requests refused with 429 or 503 (queue or byte quota, full server)", ["tenant"],
                               registry=r)
        self.ttft = Histogram("grm:time_to_first_token_seconds", "Time to first token", ["tenant", "memory"],
                              buckets=BUCKETS, registry=r)
        self.duration = Histogram("grm:request_duration_seconds", "Generation request duration",
                                  ["tenant", "memory"], buckets=BUCKETS, registry=r)
        self.wait = Histogram("grm:queue_wait_seconds", "Time a request waited for the model worker", ["tenant"],
                              buckets=BUCKETS, registry=r)
        self.depth = Gauge("grm:queue_depth", "Requests waiting for the model worker", registry=r)
        self.tokens_read = Counter("grm:model_tokens_read", "Tokens the model read for requests, decoding aside",
                                   ["tenant"], registry=r)
        self.forward_calls = Counter("grm:model_forward_calls", "Forward calls that read them", ["tenant"],
                                     registry=r)
        self.decode_steps = Counter("grm:model_decode_steps", "Decoding forward calls each request took part in",
                                    ["tenant"], registry=r)
        self.tokens_read_each = Histogram("grm:model_tokens_read_per_request",
                                          "Tokens the model read per request, decoding aside", ["tenant"],
                                          buckets=COUNT_BUCKETS, registry=r)
        self.calls_each = Histogram("grm:model_forward_calls_per_request",
                                    "Forward calls per request, decode steps included", ["tenant"],
                                    buckets=COUNT_BUCKETS, registry=r)
        self.batch_rows = Histogram("grm:decode_batch_rows", "Requests in each batched decoding step",
                                    buckets=(1, 2, 4, 8, 16, 32, 64), registry=r)
        self._engine: Any = None
        self._tokens: dict[str, list[float]] = {}  # tenant -> [hit tokens, query tokens], for the inspector
        r.register(_StoreCollector(self))

    def bind_engine(self, engine: Any) -> None:
        self._engine = engine
        self.depth.set_function(lambda: engine.queue_depth)

    def observe_answer(self, tenant: str, endpoint: str, ans: Any, memory: bool) -> None:
        m = "on" if memory else "off"
        self.queries.labels(tenant).inc(ans.prompt_tokens)
        self.hits.labels(tenant).inc(ans.tokens_from_memory)
        t = self._tokens.setdefault(tenant, [0.0, 0.0])
        t[0] += ans.tokens_from_memory
        t[1] += ans.prompt_tokens
        self.requests.labels(tenant, endpoint, m).inc()
        self.ttft.labels(tenant, m).observe(ans.ttft_s)
        self.duration.labels(tenant, m).observe(ans.total_s)

    def observe_reads(self, tenant: str, tokens: int, calls: int, decode_steps: int) -> None:
        """What one request made the model read (grm/serve/generation.py ReadTally)."""
        self.tokens_read.labels(tenant).inc(tokens)
        self.forward_calls.labels(tenant).inc(calls)
        self.decode_steps.labels(tenant).inc(decode_steps)
        self.tokens_read_each.labels(tenant).observe(tokens)
        self.calls_each.labels(tenant).observe(calls + decode_steps)

    def decode_step(self, rows: int) -> None:
        self.batch_rows.observe(rows)

    def queue_wait(self, tenant: str, seconds: float) -> None:
        self.wait.labels(tenant).observe(seconds)

    def rejected(self, tenant: str) -> None:
        self.rejects.labels(tenant).inc()

    def hit_rate(self, tenant: str) -> tuple[float, float]:
        """(hit tokens, query tokens) of `tenant` so far."""
        hits, queries = self._tokens.get(tenant, (0.0, 0.0))
        return hits, queries

    def render(self, tenant: str) -> bytes:
        """The text exposition with only `tenant`'s samples (and unlabelled ones)."""
        return generate_latest(_TenantView(self.registry, tenant))


class _StoreCollector:
    """Page-ins/outs and store bytes, read at scrape time from the engine's tenants."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def collect(self):
        engine = self.metrics._engine
        ins = CounterMetricFamily("grm:page_ins", "Graft K/V payloads paged in", labels=["tenant", "plane"])
        outs = CounterMetricFamily("grm:page_outs", "Graft K/V payloads paged out of the device plane",
                                   labels=["tenant"])
        size = GaugeMetricFamily("grm:store_bytes", "Payload bytes stored, by tier", labels=["tenant", "tier"])
        host = {name: (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(
                    f"grm:host_tier_{name}", doc, labels=["tenant"]) for name, (kind, doc) in HOST_TIER.items()}
        if engine is not None:
            for tenant, view in list(engine._views.items()):
                c = view.residency.counters
                ins.add_metric([tenant, "device"], c.get("device_page_ins", 0))
                ins.add_metric([tenant, "host"], c.get("host_page_ins", 0))
                outs.add_metric([tenant], c.get("page_outs", c.get("device_page_outs", 0)))
                if view.tier is not None:
                    held = view.tier.stats(tenant)
                    for name, family in host.items():
                        family.add_metric([tenant], held[name])
            try:
                tenants = engine.rt.store.stats()["tenants"]
            except Exception:  # a closed store during shutdown: no figures
                tenants = {}
            for tenant, kinds in tenants.items():
                tiers = {"exact": 0, "archived": 0}
                for kind, s in kinds.items():
                    tiers["archived" if kind.startswith(ARCHIVED_KINDS) else "exact"] += s["payload_bytes"]
                for tier, n in tiers.items():
                    size.add_metric([tenant, tier], n)
        yield from (ins, outs, size, *host.values())


class _TenantView:
    def __init__(self, registry: CollectorRegistry, tenant: str) -> None:
        self.registry, self.tenant = registry, tenant

    def collect(self):
        for metric in self.registry.collect():
            out = Metric(metric.name, metric.documentation, metric.type, metric.unit)
            out.samples = [s for s in metric.samples if s.labels.get("tenant", self.tenant) == self.tenant]
            yield out
