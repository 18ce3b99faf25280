# Compiled layout of the source and sink (see streamproc/_native.py): C-level fields instead of
# slot lookups; the Python source is unchanged and runs as is without a compiler.
from .base cimport Processor

cdef class SourceProcessor(Processor):
    cdef public object _kd, _vd, _where, internal, key_serde, topics, value_serde

cdef class SinkProcessor(Processor):
    cdef public object _append, _ks, _resolved, _vs, _where, drop_null_keys, dropped_null_key, internal
    cdef public object key_serde, topic, value_serde
