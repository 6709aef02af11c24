"""The AG-UI endpoint (``POST /v1/agui``): AG-UI's ``RunAgentInput`` in (``_input``), a run's
events out as AG-UI events (``_events``), the route itself (``_routes``). Decisions: ADR 0013."""

from tether.serve.agui._events import COMPACTION_EVENT, Translator
from tether.serve.agui._routes import INPUT_EVENT, register

__all__ = ["COMPACTION_EVENT", "INPUT_EVENT", "Translator", "register"]
