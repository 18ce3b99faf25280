# Compiled layout of the session aggregate (see streamproc/_native.py): C-level fields and calls on
# the per-record path; the Python source is unchanged and runs as is without a compiler.
cimport cython

from .base cimport Processor


cdef class SessionAggregateProcessor(Processor):
    cdef public object _counting, _fast, _find, _progress_dirty, _progress_put, _queue, _replace
    cdef public object _seq, aggregator, dropped_late, dropped_null_key, emit_on_close, gap, grace
    cdef public object initializer, last_emitted_close, merger, progress, progress_store_name, store
    cdef public object store_name, stream_time
    cdef public list _heap

    @cython.locals(found=list)
    cpdef process(self, key, value, ts)

    cpdef _push(self, item)

    @cython.locals(heap=list, out=list)
    cpdef _take_closing(self, close_time)

    cpdef _emit_closed(self, closing, close_time)
