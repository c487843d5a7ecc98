# Static types for compiling models/hardware.py with Cython (setup.py); the .py
# stays plain Python and is the fallback. See models/cache.pxd.
import cython
from warmcore.models.cache cimport Hierarchy
from warmcore.models.membus cimport FluidBus, MemoryBus


cdef class HardwareMachine:
    cdef public object preset, effects, topology, clock, meter, lines, directory, env
    cdef public MemoryBus membus
    cdef public object governor, cpu_core, cpu_llc, cpu_socket, l1d, l1i, l2, llc
    cdef public Hierarchy hierarchy
    cdef public Py_ssize_t n_cpus, freq_changes
    cdef public double nominal_ips, max_ghz, c2c_ns, dram_lines
    cdef public bint dvfs_available, fluid
    cdef public object rate_hook, syscalls
    cdef public double wake_lines
    cdef public bint ddio
    cdef dict _wake_xfer
    cdef tuple _wake_part_lines
    cdef public FluidBus bus
    cdef double[::1] _parts
    cdef bint _dyn_clock
    cdef list _siblings
    cdef double _fixed_ghz, _nominal_ghz, _stream_ahead, _stream_trigger, _inv_page_lines, _ipc, _l2_cyc, _llc_cyc, _inv_mlp, _dram_ns, _lpi, _ns_llc
    cdef double _ctx_s, _futex_s, _wake_busy_s, _wake_idle_s, _wake_shallow_s, _deep_after_s
    cdef bint _fgmt
    cdef double[::1] _share
    cdef list _capacity
    cdef bint _dvfs, _smt, _kernel_smt, _caches, _coh, _has_l2, _membus_on, _contention, _walks_only
    cdef list _speed, _busy, _core_busy
    cdef list _ghz_now, _due_at
    cdef object _mark
    cdef public object cpuidle, idle_governor
    cdef list _deep_after
    cdef bint _flush_on_idle
    cdef list _flush_at, _woke_at
    cdef public Py_ssize_t core_flushes

    @cython.locals(due=list)
    cpdef double clock_ghz(self, Py_ssize_t cpu, double now)

    @cython.locals(ghz=double, s_per_cyc=double, ins=double, cyc=double, k=Py_ssize_t,
                   compute_s=double, reload_s=double, coher_s=double, contend_s=double,
                   l1l=double, l1m=double, llcl=double, llcm=double, llcs=double,
                   llcsm=double, l2_hits=double,
                   llc_hits=double, dram=double, c2c_ns=double, touched=double,
                   inv_mlp=double, n_ops=double, h=Hierarchy, spacing=double, stall=double,
                   transfers=double, t_ns=double, dur=double, cycles=double, wait=double,
                   lines=double, d0=double, d1=double, sock=Py_ssize_t, b=Py_ssize_t,
                   pa="double[::1]", bus=FluidBus, dram_s=double, overlap=double,
                   hit_s=double, demand=double, streamed=double, ahead_s=double,
                   core_s=double, walked=double, trigger=double)
    cpdef tuple execute(self, Py_ssize_t cpu, seg, thread_key, double now)

    @cython.locals(cyc0=double, rcyc=double, dram_s=double, coher_s=double, stall=double,
                   wait=double, lines=double, ghz=double, s_per_cyc=double, cyc=double,
                   k=Py_ssize_t, compute_s=double, reload_s=double, contend_s=double,
                   d1=double, dur=double, cycles=double, sock=Py_ssize_t, b=Py_ssize_t,
                   ins=double, l1l=double, l1m=double, llcl=double, llcm=double,
                   llcs=double, llcsm=double, pa="double[::1]", bus=FluidBus)
    cpdef tuple cost_now(self, Py_ssize_t cpu, double now)
