"""The OpenAI Agents SDK's session protocol over any tether ``Store``.

``TetherSession`` is a drop-in for the SDK's ``SQLiteSession``: ``Runner.run(agent, input,
session=TetherSession(session_id, store, owner=user))`` keeps the session's items as tether
messages in the store, owner-scoped and encrypted when the store is. Items convert through
``tether.convert`` (``from_openai_agents`` / ``to_openai_agents``); what a conversion cannot carry
is logged on ``tether.integrations.openai_agents``. ``pop_item`` and ``clear_session`` append a
marker to the append-only log instead of rewriting it (docs/adr/0019-openai-agents-session.md).

Needs the ``openai-agents`` extra: importing this package without it raises ``MissingExtra``.
"""

from __future__ import annotations

from tether.integrations.openai_agents._items import MARKER_PROVIDER, is_marker
from tether.integrations.openai_agents._session import LOGGER_NAME, TetherSession

__all__ = ["LOGGER_NAME", "MARKER_PROVIDER", "TetherSession", "is_marker"]
