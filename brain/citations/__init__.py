"""Citations: notes that know the code they speak of, and say when it has changed since.

What the package offers (see docs/citations.md for the user's view):

- model.py: what a citation is (``path``, ``path:A-B``, ``path::symbol``), its states
  (fresh / changed / gone), the compact summary a note shows, the ranking penalty;
- spans.py: where a cited span is in a file (Python via ``ast``, a named set of patterns
  for other languages) and its hash;
- detect.py: the citations written in a note's text;
- anchor.py: one citation anchored, or checked, against the file as it is now;
- git.py: commit, renames and "changed since" through the ``git`` command;
- turns.py: the files the hooks saw the agent read or edit in the current turn;
- service.py: :class:`~brain.citations.service.CitationService`, wired in brain/app.py.

The store is the single source of truth: citations live in the note payload (``cites``),
with ``cite_keys`` (payload-indexed: the path -> notes index) and ``cite_state``.
"""

from brain.citation import CHANGED, FRESH, GONE, RANK_PENALTY, STATES, summary

__all__ = ["CHANGED", "FRESH", "GONE", "RANK_PENALTY", "STATES", "summary"]
