"""State stores: key-value, window (KIP-428), session (KIP-94), versioned (KIP-889), change-logging.

The in-memory stores hold Python objects and know nothing of Kafka; :func:`change_logged` wraps any
of them so its writes become changelog records (see ``changelog.py``). Rules: docs/semantics.md, "Stores" and "Changelogs and restoration".
"""

from __future__ import annotations

from .changelog import (
    ChangeLoggingKeyValueStore,
    ChangeLoggingSessionStore,
    ChangeLoggingStore,
    ChangeLoggingVersionedStore,
    ChangeLoggingWindowStore,
    change_logged,
)
from .changelog_format import ADDITIONAL_RETENTION_MS, ChangelogRecord, changelog_topic_config
from .factory import Stores
from .iterators import StoreIterator
from .key_value import KeyValueStore
from .session import SessionStore
from .versioned import (
    NOT_PUT,
    VALID_TO_UNDEFINED,
    VersionedKeyValueStore,
    VersionedRecord,
    default_segment_interval,
)
from .window import WindowStore

__all__ = [
    "ADDITIONAL_RETENTION_MS",
    "NOT_PUT",
    "VALID_TO_UNDEFINED",
    "ChangeLoggingKeyValueStore",
    "ChangeLoggingSessionStore",
    "ChangeLoggingStore",
    "ChangeLoggingVersionedStore",
    "ChangeLoggingWindowStore",
    "ChangelogRecord",
    "KeyValueStore",
    "SessionStore",
    "StoreIterator",
    "Stores",
    "VersionedKeyValueStore",
    "VersionedRecord",
    "WindowStore",
    "change_logged",
    "changelog_topic_config",
    "default_segment_interval",
]
