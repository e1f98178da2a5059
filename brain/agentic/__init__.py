"""Agentic memory: background LLM enrichment, typed links, evolution, deep search,
consolidation and the Obsidian mirror, as one service (:class:`AgenticService`, service.py).

The parts: queue.py (the durable job queue), enrichment.py (note construction, links,
evolution), hype.py (hypothetical questions), handoff.py (session handoff refinement),
deep_search.py, consolidation.py and obsidian.py.
"""

from brain.agentic.service import AgenticConfig, AgenticService, OfflineRouter, note_loader

__all__ = ["AgenticConfig", "AgenticService", "OfflineRouter", "note_loader"]
