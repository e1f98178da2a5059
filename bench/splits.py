"""Dev / test halves of the recall sets, fixed in the repo (``bench/splits.json``).

Weights and levers are chosen on ``dev`` only; ``test`` is the headline; ``full`` (both)
is kept for continuity with earlier reports.

- LoCoMo is split by conversation (``sample_id``): the ids sorted, alternating dev, test.
  A conversation's turns and questions never straddle the halves.
- CoSQA is split by query (``idx`` of a label-1 item): the ids sorted by their number,
  alternating dev, test. The corpus (every distinct code) is the same for both halves:
  only the questions are divided.
- The coding-notes set (bench/data/coding_notes.json, committed) is split by topic (a
  changelog entry, a module, a release, an off-topic subject; ``t0001`` ...): the topic ids
  sorted by their number, alternating dev, test, so a mistake's query and its fix's query
  never straddle the halves. The stored notes are the same for both halves.

``python -m bench.splits`` writes the file from the data again (it must not change: a test
checks the file against this rule).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

SPLITS_PATH = Path(__file__).with_name("splits.json")
SPLITS = ("dev", "test", "full")
CODING_NOTES_PATH = Path(__file__).with_name("data") / "coding_notes.json"


def _number(name: str) -> tuple[int, str]:
    m = re.search(r"(\d+)$", name)
    return (int(m.group(1)) if m else -1, name)


def alternate(ids: list[str]) -> dict[str, list[str]]:
    """Sorted ids (by trailing number, then name), alternating dev, test."""
    ordered = sorted(set(ids), key=_number)
    return {"dev": ordered[0::2], "test": ordered[1::2]}


def compute(data: Path) -> dict[str, Any]:
    locomo = json.loads((data / "locomo10.json").read_text(encoding="utf-8"))
    cosqa = json.loads((data / "cosqa-dev.json").read_text(encoding="utf-8"))
    return {
        "rule": "ids sorted by trailing number, alternating dev/test (bench/splits.py)",
        "locomo": alternate([str(s["sample_id"]) for s in locomo]),
        "cosqa": alternate([str(it["idx"]) for it in cosqa if int(it["label"]) == 1]),
        "coding_notes": coding_notes(),
    }


def coding_notes(path: Path = CODING_NOTES_PATH) -> dict[str, list[str]]:
    """The coding-notes set's halves, by topic (it ships with the repo, not in --data)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return alternate([str(q["topic"]) for q in data["queries"]])


def load(path: Path = SPLITS_PATH) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def ids(dataset: str, split: str, splits: dict[str, Any] | None = None) -> set[str] | None:
    """The ids of ``dataset`` in ``split``; None for ``full`` (everything)."""
    if split == "full":
        return None
    if split not in ("dev", "test"):
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    return set((splits or load())[dataset][split])


def split_of(dataset: str, splits: dict[str, Any] | None = None) -> dict[str, str]:
    """id -> "dev" / "test" for ``dataset``; an id in neither (other data) is in neither."""
    s = splits or load()
    return {i: name for name in ("dev", "test") for i in s[dataset][name]}


def main(argv: list[str] | None = None) -> int:
    from bench import data_dir

    args = sys.argv[1:] if argv is None else argv
    out = compute(data_dir(args[0] if args else None))
    SPLITS_PATH.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {SPLITS_PATH}: locomo {len(out['locomo']['dev'])}/{len(out['locomo']['test'])}"
          f", cosqa {len(out['cosqa']['dev'])}/{len(out['cosqa']['test'])}"
          f", coding_notes {len(out['coding_notes']['dev'])}/{len(out['coding_notes']['test'])}"
          " topics")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
