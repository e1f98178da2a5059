"""Salience decays on read: the stored value is the salience at one instant, never rewritten.

A note stores ``salience`` as it was at ``since = max(salience_ts, last access, creation)``
(``salience_ts`` is set when an access boosts it). Its salience now is

    salience * 0.5 ** ((now - since) / H)        (H: the half-life; pinned notes never decay)

so no background pass rewrites notes as time goes by (a rewrite moves every point of an
indexed segment into the unindexed one: a decay pass over 100k notes cost every search its
HNSW index until the next optimization).

``min_salience`` stays an exact store filter through a time-invariant key stored with the
note: ``s * 2 ** (-(now - since) / H) >= m``  <=>  ``since + H * log2(s) >= now + H * log2(m)``.
``salience_key`` is the left side (seconds, indexed as a float); a search asks for keys of at
least :func:`key_floor`. Keys depend on H, so the store records the H its keys were computed
with (``salience_half_life_days`` in the store meta) and the ``decay`` worker re-keys the
notes when the setting changes (or for a store from before keys existed).
"""

from __future__ import annotations

import math
from typing import Any

DAY = 86_400.0
# A pinned note's key: later than any "now", so it passes every min_salience.
PINNED_KEY = 1e15
# log2 of a salience of 0 is -inf: keys use at least this salience (2**-40 of the scale).
MIN_KEYED = 2.0**-40
# Keys closer than this (seconds) are the same key: a re-key pass leaves them alone.
KEY_TOLERANCE_S = 1.0


def last_touch_ts(payload: dict[str, Any]) -> float:
    """When the note was last accessed, or created if it never was (epoch seconds)."""
    last = float(payload.get("last_accessed_ts") or 0.0)
    return last if last > 0 else float(payload.get("created_ts") or 0.0)


def since_ts(payload: dict[str, Any]) -> float:
    """When the stored salience was the note's salience: the later of its ``salience_ts``,
    its last access and its creation (epoch seconds)."""
    return max(float(payload.get("salience_ts") or 0.0), last_touch_ts(payload))


def salience_now(payload: dict[str, Any], now_ts: float, half_life_s: float) -> float:
    """The note's salience at ``now_ts``: the stored one halved every ``half_life_s`` since
    :func:`since_ts`; a pinned note keeps its own."""
    stored = float(payload.get("salience", 0.5))
    if payload.get("pinned"):
        return stored
    elapsed = now_ts - since_ts(payload)
    return stored if elapsed <= 0 else stored * 0.5 ** (elapsed / half_life_s)


def salience_key(payload: dict[str, Any], half_life_s: float) -> float:
    """The note's time-invariant filter key (see the module doc)."""
    if payload.get("pinned"):
        return PINNED_KEY
    stored = max(float(payload.get("salience", 0.5)), MIN_KEYED)
    return since_ts(payload) + half_life_s * math.log2(stored)


def key_floor(min_salience: float, now_ts: float, half_life_s: float) -> float:
    """The least key of a note whose salience at ``now_ts`` is at least ``min_salience``
    (which is > 0)."""
    return now_ts + half_life_s * math.log2(min_salience)


def needs_key(payload: dict[str, Any], half_life_s: float) -> bool:
    """Whether the stored key is missing or was computed with another half-life."""
    key = payload.get("salience_key")
    if not isinstance(key, (int, float)) or isinstance(key, bool):
        return True
    return abs(float(key) - salience_key(payload, half_life_s)) > KEY_TOLERANCE_S
