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
