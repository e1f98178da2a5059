"""The memory service: writing, finding, linking and the lifecycle of notes.

Everything here is plain, blocking Python; the MCP layer runs it in worker threads. The
service is the shared core (core.py) with the functions of its three parts as methods:
the write path (write.py), the reads (read.py, filters.py, explore.py) and the lifecycle
(lifecycle.py). The functions take the core as their first argument, so a part never reaches another
part's state except through the core.
"""

from __future__ import annotations

from brain.memory import explore, filters, lifecycle, read, supersede, write
from brain.memory.core import NoteCore


class MemoryService(NoteCore):
    # write path
    prepare_content = write.prepare_content
    new_payload = write.new_payload
    add = write.add
    link = write.link
    update = write.update
    apply_fields = write.apply_fields
    distill = write.distill
    set_tags = write.set_tags
    begin_session = write.begin_session
    # filters and reads
    build_filter = filters.build_filter
    search = read.search
    get = read.get
    recall = read.recall
    empty_project = read.empty_project
    related = read.related
    notes = read.notes
    # the web explorer's reads
    hub_notes = explore.hub_notes
    links_among = explore.links_among
    latest = explore.latest
    # supersession
    history = supersede.history
    # lifecycle
    set_state = lifecycle.set_state
    pin = lifecycle.pin
    forget = lifecycle.forget
    restore = lifecycle.restore
    archive = lifecycle.archive
    stats = lifecycle.stats
