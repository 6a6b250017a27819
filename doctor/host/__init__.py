"""The Host layer: the only code that touches the machine (docs/architecture.md)."""

from dldoctor.host.base import (
    DEFAULT_MAX_BYTES,
    STATUSES,
    Answer,
    AnswerStatus,
    CommandResult,
    Host,
    Op,
    ProbeFailed,
)
from dldoctor.host.live import LiveHost
from dldoctor.host.recording import RecordingHost

__all__ = [
    "DEFAULT_MAX_BYTES",
    "STATUSES",
    "Answer",
    "AnswerStatus",
    "CommandResult",
    "Host",
    "LiveHost",
    "Op",
    "ProbeFailed",
    "RecordingHost",
]
