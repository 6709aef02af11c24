"""Moved to ``tether.agent._demo_tools`` (the service uses the demo tools too); this re-export
keeps ``tether chat`` importing until its import is updated."""

from tether.agent._demo_tools import DEMO_TOOLS

__all__ = ["DEMO_TOOLS"]
