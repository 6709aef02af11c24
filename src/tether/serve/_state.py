"""``ServeState``: what a request handler reaches (filled by the application's lifespan)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tether.stores import Store
from tether.stores.events import EventLog

from ._auth import Authenticator
from ._config import ServeConfig
from ._runs import RunManager
from ._sse import StreamSlots

__all__ = ["ServeState"]


@dataclass
class ServeState:
    """What handlers reach through ``Call.state`` (filled by the lifespan)."""

    config: ServeConfig
    store: Store = field(init=False)
    events: EventLog = field(init=False)
    auth: Authenticator = field(init=False)
    manager: RunManager = field(init=False)
    streams: StreamSlots = field(init=False)

    def __post_init__(self) -> None:
        self.streams = StreamSlots(self.config.max_open_streams)
