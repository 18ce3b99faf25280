# Compiled layout of SessionStore (see streamproc/_native.py): C-level fields and calls on the
# per-record path; the Python source is unchanged and runs as is without a compiler. The typed
# locals are lists and dicts the code only ever binds to lists, dicts (or None).
cimport cython

from .base cimport StoreBase


cdef class SessionStore(StoreBase):
    cdef public object _count, _expiry_q, _max_length, _seq, last_write_created, retention
    cdef public dict _by_key
    cdef public list _expiry

    cpdef unpack_session(self, session, arg=*)

    @cython.locals(lst=list, entry=list)
    cpdef _store(self, key, start, end, agg)

    cpdef _advance(self, new_observed)

    cpdef _queue_expiry(self, end, entry)

    @cython.locals(entry=list)
    cpdef _new_entry(self, key, start, end, agg)

    @cython.locals(heap=list, by_key=dict, entry=list, lst=list)
    cpdef _expire(self, cutoff)

    cpdef find_mergeable(self, key, timestamp, gap)

    @cython.locals(lst=list, e=list, out=list)
    cpdef _find(self, key, earliest_session_end, latest_session_start)

    @cython.locals(old=list, lst=list)
    cpdef replace_sessions(self, key, removed, start, end, agg)
