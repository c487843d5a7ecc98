# Static types for compiling simcore/recorder.py with Cython (setup.py); the .py
# stays plain Python and is the fallback. See models/cache.pxd. Issue 33: the
# recorder's per-request calls (arrive, complete) are the engine's hottest code on
# the ideal machine (M/M/c); typed, their counters and sums are C fields.
import cython


cdef class Recorder:
    cdef public object env, hist, service, should_stop, catch_up
    cdef public list lat_buf, srv_buf
    cdef public object outcomes_at_measure, measure_requests, measure_s, warmup_s
    cdef public object stop, stop_reason, makespan_s
    cdef public list on_measure_start
    cdef public double sum_dispatch, sum_compute, sum_reload, sum_coherence
    cdef public double sum_contention, sum_io
    cdef public double wait_sum, deadline, area, t_last, t_measure, area_at_measure
    cdef public double last_done, next_due
    cdef public Py_ssize_t arrived, answered, timed_out, rejected, abandoned
    cdef public Py_ssize_t refused_unheard, completed_warmup, measured, in_system
    cdef public Py_ssize_t warmup_requests, max_in_flight, arrived_at_measure
    cdef public Py_ssize_t in_system_at_measure
    cdef public bint stopped, partial, overflowed, measuring, source_exhausted

    @cython.locals(now=double, n=Py_ssize_t)
    cpdef arrive(self, req)

    @cython.locals(now=double, n=Py_ssize_t, t_arrive=double, t_start=double, bd=list,
                   buf=list)
    cpdef complete(self, req, thread=*)
