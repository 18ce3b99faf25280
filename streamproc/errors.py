"""Exceptions raised by streamproc. Every message names what was wrong and the offending value."""

from __future__ import annotations

import importlib
import os

#: The directory of the streamproc package: frames outside it are the user's.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
#: Frames of the import machinery (``importlib`` and its frozen modules) are nobody's.
_IMPORT_MACHINERY = ("<", os.path.dirname(os.path.abspath(importlib.__file__)) + os.sep)


class StreamprocError(Exception):
    """Base class of streamproc's own errors."""


class SerializationError(StreamprocError, ValueError):
    """A serde could not turn a value into bytes or bytes into a value.

    ``reason`` is the message without the record's position, when a source added it.
    """

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = message if reason is None else reason


class TopologyError(StreamprocError, ValueError):
    """The topology is invalid (raised when it is built)."""


class ProcessingError(StreamprocError):
    """A user function raised while a record was processed; carries the record's position.

    ``reason`` is the message without the position (the task appends ``at topic[partition]@offset``
    to the message once it knows it), for reports that name the position themselves.
    """

    def __init__(self, message: str, *, key: object = None, topic: str | None = None,
                 partition: int | None = None, offset: int | None = None,
                 operator: str | None = None) -> None:
        super().__init__(message)
        self.reason = message
        self.key = key
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.operator = operator


class TaskFailedError(StreamprocError):
    """A task cannot go on (delivery timeout, fenced producer, fatal processing error)."""


class TopicSetupError(StreamprocError, ValueError):
    """The topics on the cluster, or the ``topic_config`` setting, do not fit the topology: an
    existing changelog with the wrong ``cleanup.policy``, an internal topic with too few partitions, a
    topic config that would change what a changelog needs. Raised at startup, before any record is
    processed; the message has one line per problem. The CLI exits with status 2 (a usage error)."""


def user_frame(exc: BaseException) -> tuple[str, str, int] | None:
    """``(function, file, line)`` where the user's code raised ``exc``: the first frame outside the
    streamproc package and outside the import machinery (``importlib``) after the last frame
    inside the package, that is the user function (or module) streamproc called; the file relative
    to the current directory when it is below it. None when there is no such frame."""
    found = None
    inside = True
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        path = code.co_filename
        if path.startswith((_PACKAGE_DIR, "streamproc" + os.sep)):
            inside = True
        elif inside and not path.startswith(_IMPORT_MACHINERY):
            inside = False
            shown = os.path.relpath(path) if path.startswith(os.getcwd() + os.sep) else path
            found = (code.co_name, shown, tb.tb_lineno)
        tb = tb.tb_next
    return found
