"""Compaction: when a conversation outgrows the model's window, older turns become a summary.

``Compaction`` configures it (``_config``), ``CompactionReport`` says what one did (``_report``),
``default_compaction`` is the setting tether's own front ends use (``_defaults``). The working
parts build on the agent's tools, results and recorder, which in turn carry the configuration
and the reports, so they are not imported here (that would be a cycle): ``Compactor`` plans and
writes the summary (``_compactor``, ``_summary``), ``recall_tool`` searches what was cut
(``_recall``), ``RunCompaction`` drives it inside a run (``_run``) and ``compact_now`` compacts on
request (``_now``). ``tether.agent`` exports the public ones.
"""

from tether.agent.compaction._config import DEFAULT_SUMMARY_PROMPT, Compaction, CompactionStrategy
from tether.agent.compaction._defaults import default_compaction, model_window
from tether.agent.compaction._report import CompactionReport, CompactionStep

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "Compaction",
    "CompactionReport",
    "CompactionStep",
    "CompactionStrategy",
    "default_compaction",
    "model_window",
]
