"""The public import path of the agentskills-core provider (`skillindex.agentskills`)."""

from __future__ import annotations

from skillindex.serve.agentskills import ContentTooLargeError, IndexProvider, IntegrityRefusedError

__all__ = ["ContentTooLargeError", "IndexProvider", "IntegrityRefusedError"]
