"""Where a graft's K/V lives between turns: the device plane under a byte budget, the host plane
behind it, the store (disk) behind that.

Lifecycle, per turn: the chat (or ask) calls `get(id)` for every graft it mounts (each call makes
the graft the most recently mounted), builds the arena from what comes back, answers, then calls
`end_turn()`. `end_turn` pages least recently mounted payloads out of the device plane until it
fits `device_budget` bytes; a turn may mount more than the budget (the peak is reported), but
nothing over budget stays resident after the turn. Paged-out payloads stay in the host plane
(RAM, up to `host_budget` bytes, least recently used dropped first) and come back from there on
demand; a payload in neither plane is read from the store and verified again.

With an accelerator the device plane is VRAM (`device_budget`) and the host plane is pinned
(page-locked) RAM with its own budget (`host_budget`): a payload read from the store is copied
once into pinned buffers, so every later page-in is an asynchronous host->device copy. On a
CPU-only machine both planes are RAM, nothing is pinned: the device plane then holds the tensors
exactly as the model consumes them and the host plane the verified payloads behind them; the
accounting is the same as with an accelerator.

Counters say where each `get` was served from: `device_hits` (already on the device plane),
`host_hits` (the host plane), `store_reads` (a verified read from the store; `host_page_ins`
counts the same reads under its older name), `misses`; plus page-ins to and page-outs from the
device plane, host drops, and the bytes each plane handed over (`host_bytes_in`,
`store_bytes_in`).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

import torch

from grm.kv import KV
from grm.kv.device import pinned

log = logging.getLogger("grm.grafts")


@dataclass(frozen=True)
class PagingConfig:
    device_budget: int = 64 << 20  # bytes of graft K/V resident on the device plane between turns (VRAM)
    host_budget: int = 512 << 20  # bytes kept in the host plane behind it (pinned RAM with an accelerator)

    def __post_init__(self) -> None:
        if self.device_budget < 0 or self.host_budget < 0:
            raise ValueError("device_budget and host_budget must be >= 0 bytes")


class Residency:
    def __init__(self, config: PagingConfig, load: Callable[[str], KV | None], device: torch.device | str = "cpu") -> None:
        self.config, self._load, self.device = config, load, torch.device(device)
        self._device: OrderedDict[str, KV] = OrderedDict()  # least recently mounted first
        self._host: OrderedDict[str, KV] = OrderedDict()
        self.counters = {"device_page_ins": 0, "device_page_outs": 0, "host_page_ins": 0, "host_drops": 0,
                         "device_hits": 0, "host_hits": 0, "store_reads": 0, "misses": 0,
                         "host_bytes_in": 0, "store_bytes_in": 0}
        self.peak_device_bytes = 0
        self._turn_peak = 0
        self._said_over_budget = False

    @property
    def device_bytes(self) -> int:
        return sum(kv.nbytes for kv in self._device.values())

    @property
    def host_bytes(self) -> int:
        return sum(kv.nbytes for kv in self._host.values())

    def resident(self) -> list[str]:
        return list(self._device)

    def get(self, graft_id: str) -> KV | None:
        """The graft's K/V on the device plane (paged in if needed), or None if the store has no
        payload that verifies (a miss: the caller reads the text instead)."""
        kv = self._device.get(graft_id)
        if kv is not None:
            self._device.move_to_end(graft_id)
            self.counters["device_hits"] += 1
            return kv
        kv = self._host.get(graft_id)
        if kv is None:
            kv = self._load(graft_id)  # verified read from the store
            if kv is None:
                self.counters["misses"] += 1
                return None
            self.counters["host_page_ins"] += 1
            self.counters["store_reads"] += 1
            self.counters["store_bytes_in"] += kv.nbytes
            if self.device.type == "cuda":
                kv = pinned(kv)  # once, here: every later page-in from the host plane is asynchronous
            self._host[graft_id] = kv
            self._fit_host()
        else:
            self._host.move_to_end(graft_id)
            self.counters["host_hits"] += 1
            self.counters["host_bytes_in"] += kv.nbytes
        # From pinned memory the copy is queued on the current stream, ahead of the model's work.
        asynchronous = self.device.type == "cuda"
        device_kv = KV(kv.keys.to(self.device, non_blocking=asynchronous),
                       kv.values.to(self.device, non_blocking=asynchronous))
        self._device[graft_id] = device_kv
        self.counters["device_page_ins"] += 1
        now = self.device_bytes
        self._turn_peak = max(self._turn_peak, now)
        self.peak_device_bytes = max(self.peak_device_bytes, now)
        return device_kv

    def end_turn(self) -> dict:
        """Page out least recently mounted payloads until the device plane fits its budget.
        Returns this turn's figures: peak and resident device bytes, page-outs."""
        outs = 0
        while self._device and self.device_bytes > self.config.device_budget:
            graft_id, kv = self._device.popitem(last=False)
            outs += 1
            if kv.nbytes > self.config.device_budget:
                level = logging.INFO if self._said_over_budget else logging.WARNING
                self._said_over_budget = True  # said once as a warning, then at info level
                log.log(level, "graft %s (%d bytes) is larger than the device budget (%d bytes): mounted for "
                        "the turn, paged out after it", graft_id[:12], kv.nbytes, self.config.device_budget)
        self.counters["device_page_outs"] += outs
        report = {"peak_device_bytes": self._turn_peak, "device_bytes": self.device_bytes, "page_outs": outs}
        self._turn_peak = self.device_bytes
        return report

    def drop(self, graft_id: str) -> None:
        """Forget a graft in both planes (it was retired, superseded or re-written)."""
        self._device.pop(graft_id, None)
        self._host.pop(graft_id, None)

    def _fit_host(self) -> None:
        while len(self._host) > 1 and self.host_bytes > self.config.host_budget:
            self._host.popitem(last=False)
            self.counters["host_drops"] += 1
