# Compiled layout of SessionStore (see streamproc/_native.py): C-level fields and calls on the
# per-record path; the Python source is unchanged and runs as is without a compiler.
from .base cimport StoreBase

cdef class SessionStore(StoreBase):
    cdef public object _by_key, _count, _created, _expiry, _expiry_q, _max_length, _seq, retention
    cpdef _store(self, key, start, end, agg)
    cpdef _new_entry(self, key, start, end, agg)
    cpdef _expire(self, cutoff)
    cpdef _find(self, key, earliest_session_end, latest_session_start)
    cpdef _replace(self, key, removed, start, end, agg)
