"""Byte-exact documents split into sections; CPU section selection."""

from grm.sections.memory import SectionConfig, SectionMemory

__all__ = ["SectionConfig", "SectionMemory"]
