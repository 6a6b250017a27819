"""The Host layer: the only code that touches the machine (docs/architecture.md)."""

from dldoctor.host.base import (
    DEFAULT_MAX_BYTES,
    ERROR,
    MISSING,
    NOT_INSTALLED,
    OK,
    PERMISSION_DENIED,
    STATUSES,
    TIMEOUT,
    Answer,
    CommandResult,
    Host,
    ProbeFailed,
)
from dldoctor.host.live import LiveHost
from dldoctor.host.recording import RecordingHost

__all__ = [
    "DEFAULT_MAX_BYTES",
    "ERROR",
    "MISSING",
    "NOT_INSTALLED",
    "OK",
    "PERMISSION_DENIED",
    "STATUSES",
    "TIMEOUT",
    "Answer",
    "CommandResult",
    "Host",
    "LiveHost",
    "ProbeFailed",
    "RecordingHost",
]
