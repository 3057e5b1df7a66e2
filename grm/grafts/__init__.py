"""Grafts: position-free K/V spans routed by content and re-seated into a live arena."""

from grm.grafts.arena import Arena, Mount, build
from grm.grafts.graft import GRAFT_KINDS, KIND, Graft
from grm.grafts.memory import GraftMemory, RouteConfig, Routed
from grm.grafts.paging import PagingConfig, Residency

__all__ = ["Arena", "GRAFT_KINDS", "Graft", "GraftMemory", "KIND", "Mount", "PagingConfig", "Residency",
           "RouteConfig", "Routed", "build"]
