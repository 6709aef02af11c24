"""``Agent.compact``: compact a conversation now, without a model turn (``tether chat``'s
``/compact``), through the same recorder and compactor a run uses."""

from __future__ import annotations

from collections.abc import Sequence

from tether.errors import UserError
from tether.history import normalize_history
from tether.messages import Message, new_id

from .._config import RunConfig
from .._prepare import donor_conversation_id
from .._recorder import RunRecorder
from ._compactor import Prepared
from ._run import RunCompaction

__all__ = ["compact_now"]


async def compact_now(
    cfg: RunConfig, *, history: Sequence[Message], recorder: RunRecorder | None, force: bool
) -> Prepared:
    """Compact ``history`` (or the recorder's conversation from its latest record); with a
    recorder the new records are kept (when positions match the stored seqs)."""
    assert cfg.compaction is not None
    compaction = RunCompaction(cfg.compaction, cfg.model, cfg.settings)
    if recorder is not None:
        opened = await recorder.open_compacted(repair=False)
        messages, changes = normalize_history(opened.history)
        compaction.start(
            opened.conversation_id,
            record=opened.record,
            offset=opened.offset,
            exact=opened.exact and not changes.changed,
            stored=True,
        )
    else:
        messages, _ = normalize_history(history)
        cid = donor_conversation_id(history) or new_id()
        compaction.start(cid, record=None, offset=0, exact=False, stored=False)
    if not messages:
        raise UserError("there is nothing to compact: the conversation has no messages")
    compaction.measure(cfg.instructions, cfg.definitions)
    compactor = compaction.compactor
    assert compactor is not None
    try:
        prepared = await compactor.prepare(
            messages, window=compaction.window, overhead=compaction.overhead, force=force
        )
    finally:
        await compactor.aclose()
    if recorder is not None and compaction.keep:
        for record in prepared.records:
            await recorder.record_compaction(record)
    return prepared
