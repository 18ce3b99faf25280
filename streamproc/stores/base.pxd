# Compiled layout of StoreBase (see streamproc/_native.py): C-level fields instead of slot lookups.
cdef class StoreBase:
    cdef public object _dropped, _observed, _open, _ref_key, name
    cpdef _check_new_key(self, key)
    cpdef _check_comparable(self, key)
