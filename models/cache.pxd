# Static types for compiling models/cache.py with Cython (setup.py). The .py file
# stays plain Python and is the fallback when no C compiler is available; this
# file only declares C types for its hot classes, so both give the same numbers.
import cython
from warmcore.models.coherence cimport Directory


cdef class _Entry:
    cdef public double stamp, fp
    cdef public object version


cdef class CacheState:
    cdef public Py_ssize_t lines, ways, sets, max_owners
    cdef public double inv_sets, clock
    cdef public dict owners
    cdef public str name
    cdef double[::1] _icpt, _slope
    cdef Py_ssize_t _tn, _sweep_at
    cdef double _scale, _k_dead

    @cython.locals(fp=double, k=double, x=double, i=Py_ssize_t, w=double, s=double,
                   c='double[::1]', b='double[::1]')
    cpdef double _surv(self, _Entry e)

    @cython.locals(e=_Entry, surv=double, fp=double)
    cpdef double warm(self, key, double lines, version=*)

    @cython.locals(e=_Entry, miss=double, fp=double, surv=double, f=double, clock=double)
    cpdef double access(self, key, double lines, double cap=*, version=*, store=*,
                        double extra_fills=*)

    @cython.locals(horizon=double, live=dict, e=_Entry, keep=Py_ssize_t)
    cpdef _sweep(self)

    cpdef flush(self)


cdef class Hierarchy:
    cdef public list l1d, l1i, l2, llc
    cdef public bint has_l2, coherence
    cdef public Directory directory
    cdef public object topology
    cdef public double c2c_lines, l2_hits, llc_hits, dram_lines, c2c_ns, data_lines
    cdef public double l1_misses, llc_loads, llc_misses, llc_stores, llc_store_misses
    cdef public double walk_dram_lines
    cdef dict _ids, _kind_code
    cdef Py_ssize_t _task_code, _thread_code, _code_code
    cdef list _names

    cpdef object owner_id(self, kind, key)

    @cython.locals(ik=Py_ssize_t)
    cdef object _owner_of(self, Py_ssize_t code, kind, key)

    # a C call from owner_id, not a Python method call (issue 33: a tenth of
    # ``touch``'s instructions went to calling it through its Python wrapper)
    @cython.locals(ids=dict)
    cdef object _table_id(self, kind, key)

    @cython.locals(l1=CacheState, l1i=CacheState, l2=CacheState, llc=CacheState,
                   directory=Directory, entries=dict, d=list, lines=double, x=double, cross=double, lat=double,
                   m1=double, m2=double, m3=double, l2_hits=double, llc_hits=double,
                   dram=double, c2c_ns=double, touched=double, l1m=double, llcl=double,
                   llcm=double, llcs=double, llcsm=double, miss=double, st=double,
                   fresh=double, walked=double, coh=bint, has_l2=bint, is_code=bint, walk=bint,
                   kind_code=dict, code=Py_ssize_t, task=Py_ssize_t, thread=Py_ssize_t,
                   code_kind=Py_ssize_t)
    cpdef touch(self, Py_ssize_t core, Py_ssize_t my_llc, footprint, thread_key)

    cpdef flush_core(self, Py_ssize_t core)

    @cython.locals(held=double, h=double, x=double, wllc=Py_ssize_t)
    cdef tuple _from_writer(self, list d, Py_ssize_t core, Py_ssize_t my_llc, okey,
                            double lines)
