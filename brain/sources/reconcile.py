"""The plan of a run: walk the source (or look at the paths named), find what vanished,
then index, delete and record the snapshot the status tools show.

A full run that finishes marks the sync state complete for the filters it ran with; only
then is the state trusted alone to know which files were indexed (else the store is asked
too). A targeted run that meets a ``.gitignore`` or a folder escalates to a full one.
"""

from __future__ import annotations

from brain.sources.changes import Changes
from brain.sources.points import file_point_id
from brain.sources.run import Run
from brain.sources.walker import FileEntry, entry_for, walk_source
from brain.sources.writer import Writer
from brain.vector_store import Filter, Match, scroll_all


class Reconcile:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.writer = Writer(run)
        self.changes = Changes(run, self.writer)

    def full(self) -> None:
        run, rec, ix = self.run, self.run.rec, self.run.ix
        cfg = run.flt.config_hash()
        trusted = rec.state_complete and rec.config_hash == cfg
        if rec.config_hash and rec.config_hash != cfg and run.mode == "sync":
            # The filters or the redaction changed since the last complete run: read every
            # file again (unchanged content keeps its vectors), so nothing indexed under the
            # old rules stays unredacted.
            run.mode = "rescan"
        ix.registry.patch(rec.id, state_complete=False)
        run.progress.update(phase="walk")
        cap = rec.max_scan_files or ix.max_scan_files
        walk = walk_source(run.root, run.flt, cap, cancel=run.ctl.cancel)
        run.stats.files_walked, run.stats.capped = len(walk.files), walk.capped
        if walk.cancelled:
            return
        entries = [e for e in walk.files if run.in_scope(e.rel)]
        known = set(run.states)
        if not trusted:
            known |= self._store_paths()
        seen = {e.rel for e in entries}
        vanished = {r for r in known - seen if run.in_scope(r)}
        self.changes.index(entries)
        if run.cancelled():
            return
        self.writer.delete(vanished)
        if run.cancelled():
            return
        indexed = ix.registry.count_states(rec.id)
        snapshot = {
            "indexed": indexed,
            "unindexed": max(0, len(walk.files) - indexed),
            "total": len(walk.files),
            "capped": walk.capped,
            "total_display": f"{len(walk.files)}+" if walk.capped else str(len(walk.files)),
        }
        ix.registry.patch(rec.id, state_complete=True, config_hash=cfg, snapshot=snapshot)

    def targeted(self, paths: set[str]) -> None:
        run, rec, ix = self.run, self.run.rec, self.run.ix
        was_complete = rec.state_complete
        ix.registry.patch(rec.id, state_complete=False)
        entries: list[FileEntry] = []
        vanished: set[str] = set()
        for rel in sorted(paths):
            rel = rel.strip("/")
            if not rel:
                continue
            if rel == ".gitignore" or rel.endswith("/.gitignore"):
                return self._escalate()
            got = entry_for(run.root, rel, run.flt)
            if got == "dir":
                return self._escalate()
            if isinstance(got, FileEntry):
                entries.append(got)
                continue
            prefix = rel + "/"
            vanished |= {r for r in run.states if r == rel or r.startswith(prefix)}
            if rel not in run.states and ix.store.retrieve([file_point_id(rec.id, rel)]):
                vanished.add(rel)
        run.stats.files_walked = len(entries)
        self.changes.index(entries)
        if not run.cancelled():
            self.writer.delete(vanished)
        if not run.cancelled():
            snap = dict(rec.snapshot)
            indexed = ix.registry.count_states(rec.id)
            unindexed = int(snap.get("unindexed", 0))
            snap.update(
                indexed=indexed, total=indexed + unindexed, total_display=str(indexed + unindexed)
            )
            ix.registry.patch(rec.id, state_complete=was_complete, snapshot=snap)

    def _escalate(self) -> None:
        self.run.stats.escalated = True
        self.full()

    def _store_paths(self) -> set[str]:
        flt = Filter(must=(Match("kind", "file"), Match("source_id", self.run.rec.id)))
        return {str(p.payload.get("path")) for p in scroll_all(self.run.ix.store, flt)}
