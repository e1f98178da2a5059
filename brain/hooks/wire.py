"""JSON for the hook process, on the json module's own C parser and encoder (``_json``).

``import json`` costs a hook ~8 ms of its start: json.decoder and json.encoder compile
regular expressions at import, which pulls in re, enum and functools. The C scanner and
encoder they wrap are the same parser and serializer, without that import; ``loads`` and
``dumps`` here accept and produce what ``json.loads`` / ``json.dumps(..., separators=(",",
":"))`` do (tests/hooks/test_hooks.py checks both ways). Where ``_json`` is missing (another Python
implementation) the json module is used as is.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None  # type: ignore[assignment]

_WS = " \t\n\r"


def _constant(name: str) -> float:
    return {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}[name]


class _Context:
    """What the C scanner reads off json.JSONDecoder (strict, hooks and number parsers)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = staticmethod(_constant)
    memo: dict[str, str] = {}


def _default(obj: Any) -> Any:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


if _json is not None:
    _scan = _json.make_scanner(_Context())  # type: ignore[arg-type]  # reads the attributes
    _encode = _json.make_encoder(
        None, _default, _json.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    _encode_sorted = _json.make_encoder(
        None, _default, _json.encode_basestring_ascii, None, ":", ",", True, False, True
    )

    def loads(data: str | bytes | bytearray) -> Any:
        """Parse one JSON document; ValueError on anything else (as json.loads)."""
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        if text.startswith("\ufeff"):
            raise ValueError("JSON input starts with a byte order mark")
        start = len(text) - len(text.lstrip(_WS))
        try:
            obj, end = _scan(text, start)
        except StopIteration as exc:
            raise ValueError(f"Expecting value at char {exc.value}") from None
        if text[end:].strip(_WS):
            raise ValueError(f"Extra data at char {end}")
        return obj

    def dumps(obj: Any, sort_keys: bool = False) -> str:
        """Compact JSON, ASCII-escaped (as json.dumps with separators=(",", ":"))."""
        if isinstance(obj, str):  # the C encoder takes containers and scalars alike but
            return _json.encode_basestring_ascii(obj)  # is simplest to trust on containers
        return "".join((_encode_sorted if sort_keys else _encode)(obj, 0))

else:  # pragma: no cover
    import json

    def loads(data: str | bytes | bytearray) -> Any:
        return json.loads(data)

    def dumps(obj: Any, sort_keys: bool = False) -> str:
        return json.dumps(obj, separators=(",", ":"), sort_keys=sort_keys)
