# Compiled layout of the partitioner (see streamproc/_native.py): murmur2's locals are C integers
# (64-bit, masked to 32 bits as in the Python source) and the key is read as bytes in place; the
# Python source is unchanged and runs as is without a compiler.
cimport cython

cdef unsigned long long _SEED, _MASK32


@cython.locals(length=Py_ssize_t, end=Py_ssize_t, i=Py_ssize_t, extra=Py_ssize_t, h=cython.ulonglong,
               k=cython.ulonglong, buf="const unsigned char *")
cpdef unsigned long long murmur2(data) except? 0
