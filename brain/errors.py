"""Typed errors of the brain, each with a stable code and a message that says how to fix.

Hierarchy::

    BrainError                      base; ``code`` is stable, never match on the message
    ├── InvalidArgument             INVALID_ARGUMENT: a tool argument is out of range / malformed
    ├── ContentTooLarge             CONTENT_TOO_LARGE
    ├── NoteNotFound                NOTE_NOT_FOUND
    ├── FileNotFound                FILE_NOT_FOUND (uploaded brain files)
    ├── FileTooLarge                FILE_TOO_LARGE
    ├── SourceNotFound              SOURCE_NOT_FOUND
    ├── PathOutsideSource           PATH_OUTSIDE_SOURCE
    ├── ConfigError                 CONFIG_INVALID: a bad setting at startup
    ├── UnsupportedEmbeddingDimension  UNSUPPORTED_EMBEDDING_DIMENSION
    ├── EmbeddingCredentialMissing  EMBEDDING_CREDENTIAL_MISSING
    ├── EmbeddingProviderFailed     EMBEDDING_PROVIDER_FAILED: a remote embedding call failed
    │   └── EmbeddingCredentialRejected  EMBEDDING_CREDENTIAL_REJECTED: the endpoint said 401/403
    ├── EmbeddingTokenCapReached    EMBEDDING_TOKEN_CAP_REACHED: today's embedding tokens are spent
    ├── EmbeddingSpendCapReached    EMBEDDING_USD_CAP_REACHED: today's priced embedding spend is spent
    ├── EndpointAddressRefused      ENDPOINT_ADDRESS_CLASS: an embedding endpoint resolved to an
    │                               address outside its class (public / private) or changed class
    ├── ModelUnavailable            MODEL_UNAVAILABLE: a model could not be loaded
    ├── StoreLocked                 STORE_LOCKED: another process owns the data dir
    ├── StoreError                  STORE_ERROR: the vector store failed
    ├── LLMError                    LLM_ERROR: the chat model failed (never raised into a tool call)
    ├── ParseError                  PARSE_FAILED: a document could not be parsed
    ├── Conflict                    CONFLICT: the operation clashes with current state
    │   ├── ChangeConflict          CHANGE_CONFLICT: a change moved on since its preview
    │   ├── EndpointInUse           ENDPOINT_IN_USE: an embedding endpoint a generation uses was
    │   │                           removed, disabled or renamed
    │   ├── BaselineMissing         BASELINE_MISSING: a revert has no saved prior content
    │   └── DestinationOccupied     DESTINATION_OCCUPIED: a revert would overwrite other content
    ├── Forbidden                   FORBIDDEN: the caller may not reach this path or object
    │   └── PathExcluded            PATH_EXCLUDED: a source's filters (or the credential floor)
    │                               keep this path out of reads and writes
    ├── ChangeNotFound              CHANGE_NOT_FOUND: no journalled change of that id for the caller
    ├── DiskFull                    DISK_FULL: not enough free space; the write was refused
    │                               (every ENOSPC from any path: disk_full())
    ├── StoreDamaged                STORE_DAMAGED: the store lost data; restore a snapshot
    ├── ActionInProgress            ACTION_IN_PROGRESS: the same maintenance run is going on
    ├── DataDirUnwritable           DATA_DIR_UNWRITABLE: the data dir is read-only or not ours
    ├── PortInUse                   PORT_IN_USE: the HTTP server found its port taken
    ├── Interrupted                 INTERRUPTED: Ctrl-C stopped a command or the server
    └── NotSupported                NOT_SUPPORTED: the backend cannot do this; the message says
                                    what to use instead
"""

from __future__ import annotations

from typing import Any


class BrainError(Exception):
    code: str = "BRAIN_ERROR"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, **self.details}

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


class InvalidArgument(BrainError):
    code = "INVALID_ARGUMENT"


class ContentTooLarge(InvalidArgument):
    code = "CONTENT_TOO_LARGE"


class NoteNotFound(BrainError):
    code = "NOTE_NOT_FOUND"


class FileNotFound(BrainError):
    code = "FILE_NOT_FOUND"


class FileTooLarge(InvalidArgument):
    code = "FILE_TOO_LARGE"


class SourceNotFound(BrainError):
    code = "SOURCE_NOT_FOUND"


class PathOutsideSource(BrainError):
    code = "PATH_OUTSIDE_SOURCE"


class ConfigError(BrainError):
    code = "CONFIG_INVALID"


class UnsupportedEmbeddingDimension(BrainError):
    code = "UNSUPPORTED_EMBEDDING_DIMENSION"


class EmbeddingCredentialMissing(BrainError):
    code = "EMBEDDING_CREDENTIAL_MISSING"


class EmbeddingProviderFailed(BrainError):
    code = "EMBEDDING_PROVIDER_FAILED"


class EmbeddingCredentialRejected(EmbeddingProviderFailed):
    code = "EMBEDDING_CREDENTIAL_REJECTED"


class EmbeddingTokenCapReached(BrainError):
    code = "EMBEDDING_TOKEN_CAP_REACHED"


class EmbeddingSpendCapReached(BrainError):
    code = "EMBEDDING_USD_CAP_REACHED"


class EndpointAddressRefused(BrainError):
    code = "ENDPOINT_ADDRESS_CLASS"


class ModelUnavailable(BrainError):
    code = "MODEL_UNAVAILABLE"


class StoreLocked(BrainError):
    code = "STORE_LOCKED"


class StoreError(BrainError):
    code = "STORE_ERROR"


class OptimizeAborted(StoreError):
    """An index optimization gave up and left the live store as it was (the store closed
    meanwhile, or too many writes came in to replay): the next run starts over."""

    code = "OPTIMIZE_ABORTED"


class LLMError(BrainError):
    code = "LLM_ERROR"


class ParseError(BrainError):
    code = "PARSE_FAILED"


class Conflict(BrainError):
    code = "CONFLICT"


class EndpointInUse(Conflict):
    code = "ENDPOINT_IN_USE"


class Forbidden(BrainError):
    code = "FORBIDDEN"


class DiskFull(BrainError):
    code = "DISK_FULL"


class StoreDamaged(BrainError):
    code = "STORE_DAMAGED"


class ActionInProgress(Conflict):
    code = "ACTION_IN_PROGRESS"


class NotSupported(BrainError):
    code = "NOT_SUPPORTED"


class PathExcluded(Forbidden):
    code = "PATH_EXCLUDED"


class ChangeNotFound(BrainError):
    code = "CHANGE_NOT_FOUND"


class ChangeConflict(Conflict):
    code = "CHANGE_CONFLICT"


class BaselineMissing(Conflict):
    code = "BASELINE_MISSING"


class DestinationOccupied(Conflict):
    code = "DESTINATION_OCCUPIED"


class DataDirUnwritable(BrainError):
    """The data dir (or a file in it) cannot be written: read-only, or another user's."""

    code = "DATA_DIR_UNWRITABLE"


class PortInUse(BrainError):
    code = "PORT_IN_USE"


class Interrupted(BrainError):
    code = "INTERRUPTED"


NO_SPACE_ERRNOS = (28, 122)  # ENOSPC, EDQUOT (Linux): the disk or the user's quota is full


def is_no_space(exc: BaseException) -> bool:
    """Whether ``exc`` is the OS saying the disk (or the quota) is full."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS


def disk_full(what: str, where: str, needed: int = 0) -> DiskFull:
    """DISK_FULL for an ENOSPC met while doing ``what`` under ``where``: the free and needed
    figures and the fix, in place of an untyped ``[Errno 28]``."""
    import os

    path = where
    while path and not os.path.exists(path):
        path = os.path.dirname(path.rstrip("/")) or "/"
    try:
        st = os.statvfs(path or "/")
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = 0
    need = f"; this needs about {needed / 1e6:.1f} MB more" if needed else ""
    return DiskFull(
        f"cannot {what}: the disk holding {where} is full ({free / 1e6:.1f} MB free{need}). "
        "Free some space (or raise the quota) and retry; what was being written was removed.",
        free_bytes=free, needed_bytes=needed, path=where,
    )
