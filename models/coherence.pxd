# Static types for compiling models/coherence.py with Cython (setup.py); the .py
# stays plain Python and is the fallback. See models/cache.pxd.
import cython


cdef class Directory:
    cdef public dict entries
    cdef public Py_ssize_t max_entries
    cdef Py_ssize_t _version

    @cython.locals(v=Py_ssize_t, e=list)
    cpdef Py_ssize_t write(self, key, Py_ssize_t core)
