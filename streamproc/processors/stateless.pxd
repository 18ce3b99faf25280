# Compiled layout of the most used stateless operators (see streamproc/_native.py): C-level fields
# instead of slot lookups; the Python source is unchanged and runs as is without a compiler.
from .base cimport Processor

cdef class FilterProcessor(Processor):
    cdef public object negate, predicate

cdef class MapProcessor(Processor):
    cdef public object mapper

cdef class MapValuesProcessor(Processor):
    cdef public object mapper, with_key
