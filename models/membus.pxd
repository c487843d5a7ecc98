# Static types for compiling models/membus.py with Cython (setup.py); the .py
# stays plain Python and is the fallback. See models/cache.pxd.
import cython


cpdef double md1_wait(double rho, double service)


cdef class MemoryBus:
    cdef public double dram_ns, service_ns, s_per_line, inv_mlp, tau_s, inv_tau, rho_cap
    cdef public list util, t_last, free_at, lines_total

    @cython.locals(dt=double, u=double)
    cpdef double rho(self, Py_ssize_t socket, double now)

    @cython.locals(rho=double, busy=double, start=double, mem_s=double, bw_wait=double,
                   md1=double, dt=double, u=double)
    cpdef double access(self, Py_ssize_t socket, double lines, double now)


cdef class FluidBus:
    cdef public double dram_ns, service_ns, s_per_line, cap, inv_mlp, tau_s, rho_cap
    cdef public object env, on_change
    cdef public list flows, heap, saturated
    cdef public Py_ssize_t seq
    cdef public double[::1] lam_sum, util, rate, t_util, timer_at, lines_total

    @cython.locals(dt=double, r=double)
    cpdef _decay(self, Py_ssize_t s, double t)

    @cython.locals(h=list, flows=dict, f=list, end=double)
    cpdef advance(self, Py_ssize_t s, double now)

    cpdef _push(self, Py_ssize_t s, Py_ssize_t cpu, double end)

    cpdef _left(self, Py_ssize_t s, list f, double t, Py_ssize_t cpu)

    @cython.locals(rho=double, wait=double, flows=dict, f=list, dd=double, lam=double)
    cpdef double start(self, Py_ssize_t s, Py_ssize_t cpu, double lines, double d, double now,
                       double overlap=*)

    @cython.locals(f=list, lam=double)
    cpdef pace(self, Py_ssize_t s, Py_ssize_t cpu, double d, double now)

    @cython.locals(f=list)
    cpdef double duration(self, Py_ssize_t s, Py_ssize_t cpu, double d)
