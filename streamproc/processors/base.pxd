# Compiled layout of Processor (see streamproc/_native.py): C-level fields instead of slot lookups.
cdef class Processor:
    cdef public object _logged, children, forward, late_example, name, task
