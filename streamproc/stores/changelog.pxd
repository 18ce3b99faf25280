# Compiled layout of the change-logging wrappers (see streamproc/_native.py): C-level fields and
# calls on the per-record path; the Python source is unchanged and runs as is without a compiler.
cdef class _ChangeLogging:
    cdef public object inner, name, changelog_topic, key_serde, value_serde, _where, _pending, _record_ts
    cdef public object _int_bytes, _str_key_bytes
    cdef dict __dict__
    cpdef _key_bytes(self, key)
    cpdef _value_bytes(self, value)

cdef class ChangeLoggingSessionStore(_ChangeLogging):
    cdef public object _fresh, find_sessions, fetch_session, fetch, fetch_keys, all
    cpdef _replace(self, key, removed, start, end, agg)
