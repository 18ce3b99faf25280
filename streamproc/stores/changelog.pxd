# Compiled layout of the change-logging wrappers (see streamproc/_native.py): C-level fields and
# calls on the per-record path; the Python source is unchanged and runs as is without a compiler.
cimport cython

from .session cimport SessionStore


cdef class _ChangeLogging:
    cdef public object inner, name, changelog_topic, key_serde, value_serde, _where, _record_ts
    cdef public object _int_bytes, _str_key_bytes
    cdef public dict _pending
    cdef dict __dict__
    @cython.locals(memo=dict)
    cpdef _key_bytes(self, key)
    @cython.locals(memo=dict)
    cpdef _value_bytes(self, value)


cdef class ChangeLoggingSessionStore(_ChangeLogging):
    cdef public object find_sessions, fetch_session, fetch, fetch_keys, all, find_mergeable, session_entries
    cdef public set _fresh

    # inner: the wrapped store is a SessionStore (change_logged picks this wrapper by its kind)
    @cython.locals(inner=SessionStore, pending=dict, fresh=set, tombstones=list, entry=list, absorbed=bint)
    cpdef replace_sessions(self, key, removed, start, end, agg)
