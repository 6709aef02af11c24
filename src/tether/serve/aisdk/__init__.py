"""The Vercel AI SDK's chat stream: ``tether serve`` as the endpoint of a ``useChat`` page.

``register(api)`` declares ``POST /v1/aisdk/chat`` (UI messages in, a UI message stream out) and
``GET /v1/aisdk/chat/{chat_id}/stream`` (``resume: true``'s reconnect) on the service's route
table. See docs/ai-sdk.md (how to connect, what maps to what) and docs/adr/0018-ai-sdk-chat.md.
"""

from __future__ import annotations

from ._routes import HEADER, register

__all__ = ["HEADER", "register"]
