"""CPU presets: topology, caches, clocks, costs and power of real machines.

Every figure names its source in ``sources`` (or in a comment beside it). The
``ideal`` preset is the machine of queueing theory: no caches, no overheads.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from warmcore.simcore.config import ConfigError, config_error, over_cap

MAX_CPUS = 1024   # beyond this a run would take minutes per thousand requests
# One documented cap for the many numeric knobs of a preset (sizes in KiB/MiB,
# latencies in ns/us/cycles, watts, GHz): past it a cost is not a machine's but an
# overflow; ways, channels and line sizes stay below 4096.
PRESET_CAPS = {float: 1e6, int: 4096}


class PresetExtra(BaseModel):
    """Less common machine knobs, with their defaults and sources (models.hardware)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
    GENERIC_CAPS: ClassVar[dict] = PRESET_CAPS

    private_l2: bool = Field(default=True, description=(
        "False for chips whose L2 is the last level (L1 misses go straight to the LLC)"))
    l1i_ways: int = Field(default=8, gt=0, description="L1i associativity")
    ddio: bool = Field(default=False, description=(
        "Intel Data Direct I/O: a NIC's DMA writes received data into the LLC of the "
        "socket it is attached to instead of DRAM ('introduced with the Intel Xeon "
        "processor E5 family and Intel Xeon processor E7 v2 family', Intel, 'Intel Data "
        "Direct I/O Technology'); client parts (Core i7/i5) and AMD have none. A request "
        "from a client off the machine then finds its bytes in the LLC (docs/model.md "
        "'Where a request's bytes come from')"))
    loads_per_instruction: float = Field(default=0.33, gt=0, le=2, description=(
        "perf L1-dcache-loads per instruction: 16.41e9 / 49.40e9 = 0.332 in "
        "data/measurements/jetty-8.perf.txt"))
    freq_invariance: bool = Field(default=True, description=(
        "the scheduler's PELT utilisation is frequency-invariant (arch_scale_freq_invariant"
        "(): on x86 from APERF/MPERF since Linux 5.7, arch/x86/kernel/smpboot.c, later "
        "cpu/aperfmperf.c), so schedutil's get_next_freq scales util by the maximum "
        "frequency; False: raw util by the current one (older kernels)"))
    cpufreq_policy: Literal["domain", "cpu"] = Field(default="domain", description=(
        "what one cpufreq policy (one governor instance) covers. 'domain': the CPUs of "
        "a frequency domain together, the governor taking the highest load among them "
        "(ACPI _PSD coordination SW_ALL/SW_ANY: acpi-cpufreq copies the domain into "
        "policy->cpus). 'cpu': every CPU its own policy and governor (_PSD HW_ALL, what "
        "Intel client firmware reports: acpi-cpufreq leaves policy->cpus to the CPU alone, "
        "acpi_cpufreq_cpu_init 'Will let policy->cpus know about dependency only when "
        "software coordination is required'); the package then runs the highest P-state "
        "requested among its active cores (models.dvfs 'Per-CPU policies'). Applies to "
        "the sampling governors (ondemand, conservative)"))
    ondemand_rule: Literal["proportional", "load-freq"] = Field(
        default="proportional", description=(
            "the ondemand governor's rule below up_threshold. 'proportional': f = min_f + "
            "load x (max_f - min_f) / 100 (cpufreq_ondemand.c od_update of the later "
            "kernels). 'load-freq': Linux 3.x up to 3.10 (dbs_check_cpu): load x freq_avg "
            "(the CPU's clock while it ran, from APERF/MPERF) against up_threshold x "
            "policy->cur, and below (up_threshold - 3) x cur the lowest P-state at or above "
            "load x freq_avg / (up_threshold - 3), else no change (models.dvfs.Ondemand)"))
    package_c6_power_fraction: float = Field(default=0.4, ge=0, le=1, description=(
        "share of package_static_w the uncore still draws in package C6 (every core of "
        "the socket in C6): an i7-4770K idles at 5 W of package power with C6/C7 "
        "disabled and 2 W with them (Intel XTU; Legit Reviews, 'What enabling C6/C7 "
        "low-power states do on the Core i7-4770K', 2013)"))
    cstate_shallow_exit_us: float = Field(default=2.0, ge=0, description=(
        "intel_idle C1/C1E exit latency, added to wake_latency_busy_us (the hindsight "
        "idle rule; under menu, the C1 of a preset intel_idle does not drive)"))
    cstate_deep_after_us: float = Field(default=600.0, ge=0, description=(
        "intel_idle C6 target residency on Skylake-SP: under the hindsight idle rule, "
        "idle longer and the deep exit applies; under menu, the C6 residency of a "
        "preset intel_idle does not drive (models.cpuidle)"))
    cstate_flushes_core_caches: bool = Field(default=False, description=(
        "a core whose threads are all in C3 or deeper (C6 under the hindsight idle "
        "rule) has flushed its L1I, L1D and L2 to the LLC: the first thread to run on "
        "it again finds them empty (Intel datasheets, 'Core C3 State': 'A core in C3 "
        "state flushes the contents of its L1 instruction cache, L1 data cache, and "
        "L2 cache to the shared L3 cache'; C6 flushes them too; models.hardware "
        "'Idle states empty a core's caches')"))
    fill_buffers: int = Field(default=10, gt=0, description=(
        "L1D fill buffers: demand misses a core keeps in flight, the cap on mlp (Intel "
        "64 and IA-32 Architectures Optimization Reference Manual, Sandy Bridge L1 "
        "DCache: 10; models.hardware 'Streams')"))
    stream_ahead_lines: float = Field(default=0.0, ge=0, description=(
        "lines the L2 streamer keeps in flight ahead of a sequential walk (Intel "
        "optimization manual, Sandy Bridge Data Prefetching: 'up to 20 lines ahead of "
        "the load request'); 0: no prefetcher modeled (models.hardware 'Streams')"))
    stream_trigger_lines: float = Field(default=2.0, ge=0, description=(
        "demand misses per 4 KiB page before the streamer has the stream (it tracks "
        "one forward and one backward stream per page and does not cross it; an "
        "assumption of two misses to see a direction)"))
    stream_walks_only: bool = Field(default=True, description=(
        "the L2 streamer follows sequential walks only (TASK footprints and thread-owned "
        "objects with their own key), not the running thread's stack, shared structures "
        "or code (models.hardware 'Streams'); false: every DRAM line of a segment, as "
        "first landed, kept on the i7-3770 pending a DVFS test's margin (docs/model.md)"))
    turbo_bins_ghz: tuple[Annotated[float, Field(ge=0.01, le=10)], ...] = Field(
        default=(), max_length=256, description=(
            "turbo limit by active cores (C0/C1): entry k-1 for k active cores, the last "
            "for more (Intel SDM vol. 3, MSR_TURBO_RATIO_LIMIT); empty: turbo_ghz whatever "
            "the count (models.turbo)"))
    power_limit_tau_s: float = Field(default=0.0, ge=0, le=1000, description=(
        "RAPL PL1 time window tau (MSR_PKG_POWER_LIMIT POWER_LIMIT_1_TIME): the package "
        "averages its power with this time constant and keeps the average at or below "
        "PL1 = tdp_w; 0: no power limit modeled (models.turbo)"))
    power_limit_2_ratio: float = Field(default=1.25, ge=1, le=10, description=(
        "PL2 / PL1: the short-term limit (Intel desktop datasheets: PL2 default 1.25 x "
        "TDP; Xeon E5 datasheet vol. 1: 'typically 20%' above PL1)"))
    pcu_interval_us: float = Field(default=500.0, ge=10, le=1e6, description=(
        "how often the package control unit revises the turbo ceiling: frequency changes "
        "applied on a ~500 us grid (Hackenberg et al., IPDPSW 2015, Haswell-EP)"))
    kernel_smt_share: bool = Field(default=False, description=(
        "kernel work shares the core with busy SMT siblings as user work does (Intel "
        "optimization manual, Hyper-Threading: the logical processors share the "
        "execution engine); held off by default pending issue 35: on, phenomena 3 and 7 "
        "fall below their tests' margins (docs/model.md 'Kernel work runs at the clock')"))
    # Kernel work per system call (models/syscalls.py, docs/model.md "Kernel work per
    # request"): microseconds on the reference core (i7-3770, Ivy Bridge at 3.4 GHz,
    # Linux 3.x-4.14 without the 2018 page-table-isolation mitigations), scaled on
    # other presets by their single-thread speed (models.syscalls.REFERENCE_IPS).
    syscall_us: float = Field(default=0.05, ge=0, description=(
        "entry and exit of a system call: lmbench 'lat_syscall null' (McVoy and Staelin, "
        "USENIX 1996) 0.04-0.06 us on 3.4-3.5 GHz Ivy Bridge/Haswell cores, ~150-200 "
        "cycles; FlexSC (Soares and Stumm, OSDI 2010, sec. 2) puts the direct mode switch "
        "in the same range and its indirect cost (polluted L1, TLB, predictors) above it"))
    tcp_send_us: float = Field(default=1.5, ge=0, description=(
        "tcp_sendmsg of a small segment down to the device (skb build, tcp_transmit_skb, "
        "ip_queue_xmit, dev_queue_xmit): half of a loopback segment's stack work, the "
        "other half being loopback_rx_us; the pair is set so that a loopback TCP round "
        "trip (two writes, two reads, two wake-ups and switches) comes to the 12-20 us "
        "that lmbench lat_tcp and netperf TCP_RR (50-80k transactions/s on one "
        "connection) report on 2012-2015 Intel machines"))
    loopback_rx_us: float = Field(default=1.5, ge=0, description=(
        "the receive softirq of a loopback segment (net_rx_action, ip_rcv, tcp_v4_rcv, "
        "queue on the peer socket, wake its reader): on loopback it runs on the sending "
        "CPU inside the sender's write (drivers/net/loopback.c loopback_xmit -> "
        "__netif_rx queues on this CPU's backlog, net/core/dev.c; local_bh_enable at the "
        "end of __dev_queue_xmit runs it), so it is charged to the writer"))
    tcp_recv_us: float = Field(default=0.7, ge=0, description=(
        "tcp_recvmsg of a small queued segment past the entry (socket lock, skb dequeue, "
        "the ACK decision), the copy apart: the lighter part of a round trip"))
    copy_us_per_kib: float = Field(default=0.1, ge=0, description=(
        "copy_to_user/copy_from_user of warm data: ~10 GB/s on one core (rep movsb, "
        "copy_user_enhanced_fast_string on Ivy Bridge and later)"))
    epoll_wait_us: float = Field(default=0.3, ge=0, description=(
        "epoll_wait past the entry with events ready (ep_poll: the instance lock, the "
        "ready list spliced): independent of the descriptors registered (Libenzi's "
        "epoll scalability figures; Gammo, Burton, Kirsch, Lanfranco, Ottawa Linux "
        "Symposium 2004)"))
    epoll_event_us: float = Field(default=0.08, ge=0, description=(
        "per ready event returned (ep_send_events: re-poll the file with tcp_poll, copy "
        "the event out): what grows with a batch while the call's base stays shared"))
    epoll_ctl_us: float = Field(default=0.3, ge=0, description=(
        "epoll_ctl past the entry: the instance mutex, the item found in its red-black "
        "tree, the file re-polled (ep_modify)"))
    poll_fd_us: float = Field(default=0.05, ge=0, description=(
        "poll/select per descriptor scanned, ready or not (do_poll calls each file's "
        "->poll: fdget, sock_poll, tcp_poll): the O(n) cost epoll was made to avoid "
        "(Banga, Mogul, Druschel, USENIX 1999; Gammo et al., OLS 2004)"))
    futex_wait_us: float = Field(default=0.3, ge=0, description=(
        "FUTEX_WAIT past the entry: hash the address, lock the bucket, queue the waiter "
        "(futex_wait_setup); the switch away is ctx_switch_us"))
    sched_yield_us: float = Field(default=0.1, ge=0, description=(
        "sched_yield past the entry: do_sched_yield takes the run-queue lock and "
        "schedule() picks the next task (the caller again if nobody waits)"))
    # A futex wake-up's cache lines, per part and per the core that last wrote them
    # (models.hardware.wake_transfer; docs/model.md "A wake-up moves its wait structures
    # between cores"). Counted by hand from the structures of the path in Linux 3.x
    # (kernel/futex.c, kernel/sched/core.c, kernel/sched/fair.c, kernel/sched/sched.h),
    # glibc's NPTL condition variable and HotSpot's Parker: estimates by structure, not
    # measurements. Which part applies where is the kernel's (simcore/kernel/placement.py).
    futex_wake_lines: float = Field(default=12.0, ge=0, le=1000, description=(
        "cache lines a futex wake-up moves between the waker's and the sleeper's cores, "
        "each way, unless wake_lines_by_part (models.hardware.wake_transfer), counted "
        "from the sources of the path: the futex hash bucket's lock and list and the "
        "sleeper's futex_q (kernel/futex.c futex_wake, 2), the sleeper's task_struct "
        "fields try_to_wake_up writes (pi_lock, state, on_rq, sched_entity: 3), the "
        "target run queue (rq lock, cfs_rq counts and timeline: 3), the user-space wait "
        "object (HotSpot Parker::unpark's pthread_mutex, pthread_cond and _counter, or "
        "glibc's; j.u.c's AQS node and state: 4); the sleeper re-reads the same set when "
        "it resumes. An estimate by structure, not a measurement"))
    wake_lines_by_part: bool = Field(default=False, description=(
        "count a wake-up's lines part by part, each from the core that last wrote them "
        "(the wake_*_lines fields below, docs/model.md 'A wake-up moves its wait "
        "structures between cores'), instead of futex_wake_lines each way. Off by "
        "default until the lead decides: on, ewyk's EPC per CPU falls to 0.734 of PC's, "
        "below tests/test_ewyk_shape.py's 0.75 (0.7535 off)"))
    wake_wait_lines: float = Field(default=10.0, ge=0, le=1000, description=(
        "lines of the wait structures the waker reads and writes, last written by the "
        "sleeper's core (it queued itself there): the futex hash bucket's lock and chain "
        "(futex_wake, struct futex_hash_bucket: 1) and the sleeper's futex_q on its kernel "
        "stack (plist_node, task, lock_ptr, key, ... bitset: 108 bytes, 2); the sleeper's "
        "task_struct as try_to_wake_up writes it (the pi_lock line; state, on_cpu and "
        "on_rq; the sched_entity's run_node, on_rq and vruntime, task_waking_fair and "
        "enqueue_entity: 2 lines; 4); HotSpot's Parker that Parker::unpark locks and "
        "signals (pthread_mutex_t 40 bytes, pthread_cond_t 48, _counter: 2) and the "
        "sleeper's AbstractQueuedSynchronizer node unparkSuccessor reads (1)"))
    wake_rq_lines: float = Field(default=7.0, ge=0, le=1000, description=(
        "lines of the target CPU's run queue the waker takes from that CPU's core when the "
        "target shares its LLC (ttwu_queue -> raw_spin_lock(&rq->lock), ttwu_do_activate; "
        "struct rq of kernel/sched/sched.h): the lock, nr_running and cpu_load line "
        "(wake_affine's source_load, idle_cpu, inc_nr_running), the rq->load line "
        "(account_entity_enqueue), the cfs_rq's load, nr_running, min_vruntime, "
        "tasks_timeline and rb_leftmost and its curr (enqueue_entity, update_curr: 2), the "
        "curr, idle and clock line (idle_cpu, update_rq_clock), the idle_stamp and "
        "avg_idle line (ttwu_do_wakeup), and the target's current task: the idle task's "
        "thread_info flags that resched_task sets (the line intel_idle's mwait watches) "
        "or a running task's sched_entity (check_preempt_wakeup): 1. 7 in all"))
    wake_remote_lines: float = Field(default=1.0, ge=0, le=1000, description=(
        "lines the waker writes on a target in another LLC: ttwu_queue_remote's llist_add "
        "on the target rq's wake_list (TTWU_QUEUE, on by default in 3.x; the target then "
        "enqueues the task itself in sched_ttwu_pending, so its run queue stays on its "
        "core); the woken side reads the same line back"))
    wake_resume_lines: float = Field(default=7.0, ge=0, le=1000, description=(
        "lines the woken thread reads back, last written by the waker's core, as it "
        "returns from schedule() to user space: its task_struct's state/on_cpu/on_rq line "
        "and sched_entity (set_next_entity, 3; not pi_lock, which it does not take), its "
        "futex_q (unqueue_me reads lock_ptr, which wake_futex cleared: 2) and the Parker "
        "(pthread_cond_timedwait re-locks the mutex and reads the condition's sequence "
        "counts; Parker::park clears _counter: 2)"))
    wake_resume_rq_lines: float = Field(default=5.0, ge=0, le=1000, description=(
        "lines of its own run queue the target CPU reads back from the waker's core when "
        "the waker enqueued the task there (same LLC): __schedule's lock and nr_running "
        "line, pick_next_task_fair's cfs_rq lines (2), update_rq_clock's clock line, and "
        "the flags of the idle task whose need_resched the idle loop was polling (1)"))
    wake_migrate_lines: float = Field(default=7.0, ge=0, le=1000, description=(
        "lines the woken thread reads back from its own previous core when it runs on "
        "another one: the return path's pt_regs at the top of its kernel stack (21 words, "
        "168 bytes: 3), thread_info (flags, cpu: 1), the task_struct's thread_struct "
        "(switch_to's saved stack pointer: 1) and futex_wait's hrtimer_sleeper on its "
        "stack (struct hrtimer and the task pointer: 2). The call frames between "
        "sys_futex and __schedule, whose sizes the compiler sets, are not counted"))
    wake_scan_lines: float = Field(default=2.0, ge=0, le=1000, description=(
        "lines the waker reads from each other CPU's core whose run queue "
        "select_task_rq_fair looks at before it settles on the target "
        "(select_idle_sibling -> idle_cpu: rq->nr_running on the rq lock's line, "
        "rq->curr and rq->idle on the clock's line, each written on that CPU at every "
        "switch, enqueue and tick: 2); the target's are in wake_rq_lines"))
    contended_waiter_cost: float = Field(default=1.0, ge=0, le=100, description=(
        "extra line transfers per other waiting core at each handover of a contended "
        "line: 1 = each waiter's copy re-fetched (test-and-test-and-set and ticket locks: "
        "Anderson, IEEE TPDS 1990; Boyd-Wickizer et al., 'Non-scalable locks are "
        "dangerous', 2012; David et al., SOSP 2013: atomic-op latency grows with the "
        "contending threads); 0 = a fixed transfer (models/coherence.py)"))

    @model_validator(mode="after")
    def _capped(self):
        if (err := over_cap(self, PRESET_CAPS)) is not None:
            raise err
        return self


class Preset(BaseModel):
    """A CPU: topology, clocks, caches, latencies, OS costs and power. Frozen and
    validated: an impossible value (a negative size, descending P-states) is
    rejected with its field's name."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False)
    GENERIC_CAPS: ClassVar[dict] = PRESET_CAPS

    name: str
    description: str
    sources: tuple[str, ...] = Field(default=())
    # Topology
    sockets: int = Field(default=1, gt=0)
    cores_per_socket: int = Field(default=4, gt=0)
    threads_per_core: int = Field(default=1, gt=0)
    llc_domains_per_socket: int = Field(default=1, gt=0,
                                        description='CCX count on AMD Zen; 1 on Intel')
    # Clocks (GHz). P-states ascending; turbo is used only when ``turbo`` is on.
    pstates_ghz: tuple[Annotated[float, Field(ge=0.01, le=10)], ...] = Field(
        default=(1.0,), max_length=256)
    turbo_ghz: float | None = Field(default=None, gt=0)
    turbo: bool = Field(default=False)
    freq_domain: Literal["core", "package"] = Field(default="core",
                                                    description='"core" or "package"')
    default_governor: Literal["performance", "powersave", "userspace", "ondemand",
                              "conservative", "schedutil"] = Field(
        default="performance", description="models.dvfs.GOVERNORS")
    transition_latency_us: float = Field(default=20.0, ge=0,
                                         description='docs/design/MODEL.md: ~20 us')
    # Pipeline: instructions per cycle of the reference workload with warm caches
    base_ipc: float = Field(default=1.0, gt=0)
    # Caches (sizes per instance: L1/L2 per core, LLC per domain), ways, latencies
    line_bytes: int = Field(default=64, gt=0)
    l1d_kib: float = Field(default=32, gt=0)
    l1d_ways: int = Field(default=8, gt=0)
    l1i_kib: float = Field(default=32, ge=0)
    l2_kib: float = Field(default=256, ge=0)
    l2_ways: int = Field(default=8, gt=0)
    llc_mib: float = Field(default=8, gt=0)
    llc_ways: int = Field(default=16, gt=0)
    l1_lat_cyc: float = Field(default=4, gt=0)
    l2_lat_cyc: float = Field(default=12, ge=0)
    llc_lat_cyc: float = Field(default=42, ge=0)
    dram_ns: float = Field(default=80.0, ge=0, description='idle DRAM latency')
    mlp: float = Field(default=1.75, gt=0, description='memory-level parallelism of misses')
    # Core-to-core line transfer latencies (ns)
    c2c_smt_ns: float = Field(default=7.0, ge=0)
    c2c_llc_ns: float = Field(default=40.0, ge=0)
    c2c_cross_llc_ns: float = Field(default=100.0, ge=0)
    c2c_socket_ns: float = Field(default=130.0, ge=0)
    # SMT: total core throughput for k busy hardware threads, k = 1..threads_per_core,
    # of threads that never wait on memory (models/smt.py)
    smt_throughput: tuple[Annotated[float, Field(ge=0.01, le=64)], ...] = Field(
        default=(1.0,), max_length=64)
    # How the core's hardware threads share it (models/smt.py): "simultaneous"
    # (Intel Hyper-Threading: the curve above whatever the threads run) or
    # "fine-grained" (one thread issues each cycle, stalled threads skipped, as the
    # UltraSPARC T1: the threads fill only each other's memory stalls)
    smt_policy: Literal["simultaneous", "fine-grained"] = Field(
        default="simultaneous", description="models/smt.py")
    # Memory
    mem_bw_gbs: float = Field(default=20.0, gt=0, description='per socket')
    mem_channels: int = Field(default=2, gt=0)
    # OS costs (us)
    ctx_switch_us: float = Field(default=3.8, ge=0, description='Li, Ding, Shen, ExpCS 2007')
    futex_wake_us: float = Field(default=1.5, ge=0, description='docs/design/MODEL.md: 1-2 us')
    wake_latency_idle_us: float = Field(default=30.0, ge=0,
                                        description='C-state exit + IPI to an idle CPU')
    wake_latency_busy_us: float = Field(default=5.0, ge=0, description='IPI to a CPU that is awake')
    # Power
    static_w_per_core: float = Field(default=1.0, ge=0)
    package_static_w: float = Field(default=5.0, ge=0)
    dyn_w_per_core_max: float = Field(default=10.0, ge=0,
                                      description='dynamic power of one busy core at max clock')
    v_min: float = Field(default=0.8, ge=0)
    v_max: float = Field(default=1.2, ge=0)
    tdp_w: float | None = Field(default=None, gt=0,
                                description='per socket, at base clock (None: not applicable)')
    extra: PresetExtra = Field(default_factory=lambda: PresetExtra(),
                                description="less common knobs (PresetExtra)")

    @model_validator(mode="after")
    def _consistent(self):
        if not self.pstates_ghz or list(self.pstates_ghz) != sorted(self.pstates_ghz):
            raise ConfigError("pstates_ghz", f"must be positive and ascending "
                                             f"(got {list(self.pstates_ghz)})")
        if len(self.smt_throughput) != self.threads_per_core or self.smt_throughput[0] != 1.0:
            raise ConfigError("smt_throughput", f"needs one total per busy thread count "
                                                f"1..{self.threads_per_core}, starting at 1.0 "
                                                f"(got {list(self.smt_throughput)})")
        bins = self.extra.turbo_bins_ghz
        if bins and (list(bins) != sorted(bins, reverse=True) or self.turbo_ghz is None
                     or not self.pstates_ghz[-1] <= bins[-1] <= bins[0] <= self.turbo_ghz):
            raise ConfigError("extra.turbo_bins_ghz", f"must not rise with the active cores "
                              f"and lie within the top P-state {self.pstates_ghz[-1]} and "
                              f"turbo_ghz {self.turbo_ghz} (got {list(bins)})")
        if self.v_min > self.v_max:
            raise ConfigError("v_min", f"{self.v_min} is above v_max {self.v_max}")
        if self.llc_domains_per_socket > self.cores_per_socket:
            raise ConfigError("llc_domains_per_socket", f"{self.llc_domains_per_socket} "
                              f"LLC domains for {self.cores_per_socket} cores")
        if self.n_cpus > MAX_CPUS:
            raise ConfigError("cores_per_socket", f"{self.sockets} sockets x "
                              f"{self.cores_per_socket} cores x {self.threads_per_core} threads "
                              f"= {self.n_cpus} CPUs, more than warmcore simulates "
                              f"(at most {MAX_CPUS})")
        if (err := over_cap(self, PRESET_CAPS)) is not None:
            raise err
        return self

    @property
    def n_cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core

    @property
    def max_ghz(self) -> float:
        return self.turbo_ghz if (self.turbo and self.turbo_ghz) else self.pstates_ghz[-1]

    @property
    def min_ghz(self) -> float:
        return self.pstates_ghz[0]


IDEAL = Preset(
    name="ideal",
    description="Queueing-theory machine: fixed CPI, no caches, switch or contention costs",
    sources=("by definition",),
    threads_per_core=1,
    pstates_ghz=(1.0,),
    ctx_switch_us=0.0,
    futex_wake_us=0.0,
    wake_latency_idle_us=0.0,
    wake_latency_busy_us=0.0,
)


def _steps(lo: float, hi: float, step: float) -> tuple[float, ...]:
    """P-states lo..hi (GHz) in ``step`` increments, rounded to the MHz."""
    n = round((hi - lo) / step)
    return tuple(round(lo + i * step, 3) for i in range(n + 1))


# Conventions for the presets below.
# * Latencies: L1/L2/LLC in core cycles at the nominal clock; dram_ns is the
#   idle load-to-use latency of a DRAM access, in ns.
# * mem_bw_gbs is the theoretical peak per socket (channels x transfer rate x
#   8 bytes); STREAM typically sustains 65-85 % of it.
# * c2c_*_ns are one-way cache-line transfers (core-to-core-latency CAS
#   ping-pong medians). On single-LLC / single-socket parts the unused levels
#   repeat the one below (or keep the default) so that they stay ordered.
# * Chips with only two cache levels (Pentium M, Core 2, UltraSPARC T1) map
#   their real L2 to the LLC, and give the model's private L2 the L1's
#   geometry and latency: it then holds the same lines as the L1, misses with
#   it and costs nothing (extra["private_l2"] = False).
# * Power: package_static_w + cores * (static_w_per_core + dynamic at the base
#   clock) stays within the TDP with all cores busy (tests check 60-100 %).
# * base_ipc is the warm-cache IPC of the reference server workload (Java
#   request handling), relative figures from per-clock comparisons in the
#   Anandtech reviews, anchored on the Jetty-8 measurement (0.92 IPC on Ivy
#   Bridge with its misses): a calibration starting point, not a measurement.
# * smt_throughput is the total core throughput for k busy threads that never
#   wait on memory; with smt_policy "fine-grained" the threads' memory stalls add
#   to it (models/smt.py); "simultaneous" (Hyper-Threading) applies the curve
#   whatever the threads run (a departure: docs/model.md "Known departures").
# * ctx_switch_us: Li, Ding, Shen (ExpCS 2007) measured 3.8 us on a 2 GHz
#   Core-era Xeon; later cores are scaled down by single-thread speed, with
#   KPTI (2018 kernels) costing back part of it on Meltdown-affected Intel parts.
# * System-call costs (PresetExtra syscall_us ... sched_yield_us, models/syscalls.py)
#   are the reference core's (i7-3770, pre-KPTI Linux) and scale on every preset by
#   its single-thread speed (nominal_ips), so each preset has its own without
#   repeating them here; a preset's extra may override any of them.

# RAPL (models.turbo): PL1 = tdp_w over tau = 1 s and PL2 = 1.25 x TDP, the hardware
# defaults of Intel's desktop parts (MSR_TURBO_POWER_LIMIT 610h table of the desktop
# datasheets, vol. 1, e.g. Xeon E3-1200 v3: "POWER_LIMIT_1_TIME ... hardware default
# value is 1 second", "PL2 ... default ... 1.25 x TDP")
_CLIENT_RAPL = dict(power_limit_tau_s=1.0, power_limit_2_ratio=1.25)
# Xeon E5 datasheet vol. 1 (PECI package power limits): PL1 up to TDP, PL2 "typically
# 20%" above it with no default, tau programmable 0.25-40 s with no default: 1 s taken,
# the hardware default of the client parts above
_SERVER_RAPL = dict(power_limit_tau_s=1.0, power_limit_2_ratio=1.2)
# Intel cores from Nehalem on flush their L1s and L2 to the L3 in core C3 and C6
# (PresetExtra.cstate_flushes_core_caches): the datasheets' "Core C3 State" and "Core
# C6 State" sections, word for word the same in the Xeon C5500/C3500 (Nehalem,
# 323103-001, 2010, 8.2.4.3), the 2nd Generation Intel Core Desktop (Sandy Bridge, vol.
# 1, 2011, 4.2.4.3), the Core i7-4820K/4930K (Ivy Bridge-E, 4.2.4.3), the Xeon E5-1600
# v2/E5-2600 v2 and Xeon E3-1200 v3 (Haswell, 2013) datasheets. For Skylake-X and -SP
# no datasheet was reached here: their core C6 is the same power gating (intel_idle's
# SKX table flags it CPUIDLE_FLAG_TLB_FLUSHED), an assumption written in docs/model.md.
_INTEL_CSTATE_FLUSH = dict(cstate_flushes_core_caches=True)
# Xeon E5 (Sandy Bridge-EP) and later Xeons: Intel DDIO (PresetExtra.ddio)
_XEON_DDIO = dict(ddio=True)

I7_3770 = Preset(
    name="i7-3770",
    description="Intel Core i7-3770 (Ivy Bridge, 22 nm, 2012): 4 cores / 8 threads, 8 MiB L3, "
                "1.6-3.4 GHz (turbo 3.9), dual-channel DDR3-1600; the class of the Jetty 8 "
                "measurement machine",
    sources=(
        ("Intel ARK, Core i7-3770: 4C/8T, 3.4 GHz base, 3.9 GHz max turbo, 8 MB cache, 77 W TDP, "
         "2 x DDR3-1600, 25.6 GB/s"),
        "7-cpu.com/cpu/IvyBridge.html (i7-3770): L1 4-5 cycles, L2 12, L3 26-34, RAM L3 + 53 ns",
        ("Linux acpi-cpufreq on Ivy Bridge: P-states 1.6-3.4 GHz in 100 MHz steps, "
         "cpuinfo_transition_latency 10 us; Sandy/Ivy Bridge client cores share one clock"),
        ("Agner Fog, The microarchitecture of Intel, AMD and VIA CPUs (Sandy/Ivy Bridge: "
         "hyper-threading shares the 4-wide core)"),
        ("nviennot/core-to-core-latency README: 4-core Intel ring parts 20-21 ns "
         "(i5-4590, i7-6700K)"),
        "data/measurements/README.md (jetty-8): ondemand governor, Linux 3.5",
        ("3rd Gen Intel Core Desktop Datasheet vol. 1, 4.2.1 Enhanced Intel SpeedStep: "
         "'the highest frequency P-state requested amongst all active cores is selected'; "
         "acpi-cpufreq with _PSD HW_ALL: one cpufreq policy per CPU (cpufreq_policy)"),
        ("Linux 3.5 drivers/cpufreq/cpufreq_ondemand.c dbs_check_cpu: load x freq_avg "
         "against up_threshold x cur, down_differential 3 (ondemand_rule 'load-freq')"),
    ),
    sockets=1, cores_per_socket=4, threads_per_core=2,
    pstates_ghz=_steps(1.6, 3.4, 0.1), turbo_ghz=3.9, turbo=False,
    freq_domain="package", default_governor="ondemand", transition_latency_us=10.0,
    base_ipc=1.3,
    l1d_kib=32, l1d_ways=8, l1i_kib=32, l2_kib=256, l2_ways=8, llc_mib=8, llc_ways=16,
    l1_lat_cyc=4, l2_lat_cyc=12, llc_lat_cyc=30, dram_ns=62.0,
    c2c_smt_ns=5.0, c2c_llc_ns=22.0, c2c_cross_llc_ns=22.0,
    smt_throughput=(1.0, 1.25),
    mem_bw_gbs=25.6, mem_channels=2,
    ctx_switch_us=2.0, futex_wake_us=1.2, wake_latency_idle_us=40.0, wake_latency_busy_us=4.0,
    static_w_per_core=2.0, package_static_w=8.0, dyn_w_per_core_max=18.0,
    v_min=0.85, v_max=1.2, tdp_w=77.0,
    # the L2 streamer: Intel optimization manual, Sandy Bridge (Ivy Bridge the same)
    # "Data Prefetching": up to 20 lines ahead of the load request (models.hardware)
    # turbo 3.9 GHz with one or two active cores, 3.8 with three, 3.7 with four: the
    # part's MSR_TURBO_RATIO_LIMIT as `cpupower frequency-info` prints it on an i7-3770
    # ("3700 MHz max turbo 4 active cores ... 3900 MHz max turbo 1 active cores";
    # trexw0w/csgo-server-basic-guide, Server_Optimization.md, Debian 9, 2019)
    # ondemand as Linux 3.5 (the Jetty 8 machine's kernel) has it: 'load-freq'
    extra=PresetExtra(stream_ahead_lines=20.0,
                      turbo_bins_ghz=(3.9, 3.9, 3.8, 3.7),
                      cpufreq_policy="cpu", ondemand_rule="load-freq", **_CLIENT_RAPL,
                      **_INTEL_CSTATE_FLUSH),
)

I7_920 = Preset(
    name="i7-920",
    description="Intel Core i7-920 (Nehalem Bloomfield, 45 nm, 2008): 4 cores / 8 threads, "
                "8 MiB L3, 1.6-2.67 GHz (turbo 2.93), triple-channel DDR3-1066",
    sources=(
        ("Intel ARK, Core i7-920: 4C/8T, 2.66 GHz base, 2.93 GHz max turbo, 8 MB cache, 130 W TDP, "
         "3 x DDR3-1066, 25.6 GB/s"),
        "7-cpu.com/cpu/Nehalem.html: L1 4 cycles, L2 10, L3 ~38-40",
        "Anandtech, Nehalem (Core i7) review, 2008: idle memory latency ~60-70 ns",
        "Linux acpi-cpufreq: multipliers 12-20 x 133 MHz; Nehalem cores share one clock/voltage",
        "Agner Fog, microarchitecture guide (Nehalem hyper-threading)",
    ),
    sockets=1, cores_per_socket=4, threads_per_core=2,
    pstates_ghz=(1.6, 1.733, 1.867, 2.0, 2.133, 2.267, 2.4, 2.533, 2.667),
    turbo_ghz=2.933, turbo=False,
    freq_domain="package", default_governor="ondemand", transition_latency_us=10.0,
    base_ipc=1.15,
    l1d_kib=32, l1d_ways=8, l1i_kib=32, l2_kib=256, l2_ways=8, llc_mib=8, llc_ways=16,
    l1_lat_cyc=4, l2_lat_cyc=10, llc_lat_cyc=39, dram_ns=67.0,
    c2c_smt_ns=6.0, c2c_llc_ns=35.0, c2c_cross_llc_ns=35.0,
    smt_throughput=(1.0, 1.2),
    mem_bw_gbs=25.6, mem_channels=3,
    ctx_switch_us=2.5, futex_wake_us=1.5, wake_latency_idle_us=50.0, wake_latency_busy_us=5.0,
    static_w_per_core=4.0, package_static_w=20.0, dyn_w_per_core_max=22.0,
    v_min=1.0, v_max=1.25, tdp_w=130.0,
    # Turbo Boost 1.0: two 133 MHz bins with one active core, one with more (FiringSquad,
    # "Intel Core i7/i5 Lynnfield performance", 2009: "2.66GHz Core i7-920 automatically
    # becomes a 2.93GHz CPU ... If only two cores are being used ... 2.80GHz"); no RAPL
    # (it came with Sandy Bridge): at 130 W its package never reaches its TDP here
    extra=PresetExtra(turbo_bins_ghz=(2.933, 2.8, 2.8, 2.8), **_INTEL_CSTATE_FLUSH),
)

I5_2400 = Preset(
    name="i5-2400",
    description="Intel Core i5-2400 (Sandy Bridge, 32 nm, 2011): 4 cores / 4 threads, 6 MiB L3, "
                "1.6-3.1 GHz (turbo 3.4), dual-channel DDR3-1333",
    sources=(
        ("Intel ARK, Core i5-2400: 4C/4T, 3.1 GHz base, 3.4 GHz max turbo, 6 MB cache, 95 W TDP, "
         "2 x DDR3-1333, 21 GB/s"),
        "7-cpu.com/cpu/SandyBridge.html: L1 4-5 cycles, L2 12, L3 26-31, RAM L3 + ~56 ns",
        "Linux acpi-cpufreq: 100 MHz steps 1.6-3.1 GHz; Sandy Bridge client cores share one clock",
        ("Intel Core datasheets vol. 1, 4.2.1 Enhanced Intel SpeedStep (the same text in the "
         "Celeron P4000 and the 3rd Gen Core / Pentium G2000 ones): "
         "'the highest frequency P-state requested amongst all active cores is selected'; "
         "acpi-cpufreq with _PSD HW_ALL: one cpufreq policy per CPU (cpufreq_policy)"),
        "nviennot/core-to-core-latency README (4-core Intel ring parts ~20 ns)",
    ),
    sockets=1, cores_per_socket=4, threads_per_core=1,
    pstates_ghz=_steps(1.6, 3.1, 0.1), turbo_ghz=3.4, turbo=False,
    freq_domain="package", default_governor="ondemand", transition_latency_us=10.0,
    base_ipc=1.3,
    l1d_kib=32, l1d_ways=8, l1i_kib=32, l2_kib=256, l2_ways=8, llc_mib=6, llc_ways=12,
    l1_lat_cyc=4, l2_lat_cyc=12, llc_lat_cyc=28, dram_ns=65.0,
    c2c_smt_ns=5.0, c2c_llc_ns=22.0, c2c_cross_llc_ns=22.0,
    smt_throughput=(1.0,),
    mem_bw_gbs=21.3, mem_channels=2,
    ctx_switch_us=2.0, futex_wake_us=1.2, wake_latency_idle_us=40.0, wake_latency_busy_us=4.0,
    static_w_per_core=3.0, package_static_w=10.0, dyn_w_per_core_max=16.0,
    v_min=0.85, v_max=1.2, tdp_w=95.0,
    # the L2 streamer as the i7-3770's: Intel optimization manual, Sandy Bridge "Data
    # Prefetching" (this very microarchitecture): up to 20 lines ahead of the load
    # request, 10 L1D fill buffers (models.hardware "Streams")
    # turbo 3.4 GHz with one active core, 3.3 with two or three, 3.2 with four (GameStar,
    # "Intel Core i5 2400", 2011: "Ist nur ein Kern aktiv ... 3,4 GHz, bei Belastung von
    # zwei oder drei Kernen auf 3,3 GHz. Wenn alle vier Kerne arbeiten ... 3,2 GHz")
    extra=PresetExtra(stream_ahead_lines=20.0, turbo_bins_ghz=(3.4, 3.3, 3.3, 3.2),
                      cpufreq_policy="cpu", **_CLIENT_RAPL, **_INTEL_CSTATE_FLUSH),
)

I9_7960X = Preset(
    name="i9-7960x",
    description="Intel Core i9-7960X (Skylake-X HCC, 14 nm, 2017): 16 cores / 32 threads on a "
                "mesh, 1 MiB L2 per core, 22 MiB non-inclusive L3, 1.2-2.8 GHz (turbo 4.4), "
                "quad-channel DDR4-2666",
    sources=(
        ("Intel ARK, Core i9-7960X: 16C/32T, 2.8 GHz base, 4.2 GHz Turbo 2.0, "
         "4.4 GHz Turbo Max 3.0, 22 MB cache, 165 W TDP, 4 x DDR4-2666 (85 GB/s)"),
        "7-cpu.com/cpu/Skylake_X.html: L1 4-5 cycles, L2 14, L3 ~70 (mesh), RAM ~80 ns",
        "Anandtech, Skylake-X review (2017): 1 MB 16-way L2, 1.375 MB/core 11-way non-inclusive L3",
        "nviennot/core-to-core-latency README: Xeon Gold 6242 (Cascade Lake mesh) 48 ns",
        ("Linux intel_pstate with HWP: per-core P-states; its 'powersave' policy is approximated "
         "here by schedutil"),
    ),
    sockets=1, cores_per_socket=16, threads_per_core=2,
    pstates_ghz=_steps(1.2, 2.8, 0.1), turbo_ghz=4.4, turbo=False,
    freq_domain="core", default_governor="schedutil", transition_latency_us=20.0,
    base_ipc=1.45,
    l1d_kib=32, l1d_ways=8, l1i_kib=32, l2_kib=1024, l2_ways=16, llc_mib=22, llc_ways=11,
    l1_lat_cyc=4, l2_lat_cyc=14, llc_lat_cyc=70, dram_ns=80.0,
    c2c_smt_ns=6.0, c2c_llc_ns=48.0, c2c_cross_llc_ns=48.0,
    smt_throughput=(1.0, 1.25),
    mem_bw_gbs=85.3, mem_channels=4,
    ctx_switch_us=1.8, futex_wake_us=1.3, wake_latency_idle_us=40.0, wake_latency_busy_us=4.0,
    static_w_per_core=1.5, package_static_w=25.0, dyn_w_per_core_max=16.0,
    v_min=0.75, v_max=1.2, tdp_w=165.0,
    # a desktop part: the client RAPL defaults; its bins by active cores not found in a
    # reachable source (ARK gives 4.2 GHz Turbo 2.0 and 4.4 GHz Turbo Max 3.0 only;
    # where else was searched: docs/model.md "Turbo held to the package's limits"):
    # turbo_ghz whatever the count; no L2 streamer modeled (the manual's Skylake
    # sections not reachable here to confirm its reach: docs/model.md "A core's
    # demand reaches the memory bus")
    extra=PresetExtra(**_CLIENT_RAPL, **_INTEL_CSTATE_FLUSH),
)

T1000 = Preset(
    name="t1000",
    description="Sun Fire T1000, UltraSPARC T1 (Niagara, 90 nm, 2005), the 8-core 1.0 GHz model: "
                "8 single-issue in-order cores x 4 threads = 32 threads, one 3 MiB L2 shared by "
                "all cores over a crossbar, 4 DDR2 channels; no DVFS",
    sources=(
        ("Sun Fire T1000 Server datasheet (2005): UltraSPARC T1, 6 or 8 cores at 1.0 GHz, "
         "4 threads per core; this preset is the 8-core model"),
        ("OpenSPARC T1 Microarchitecture Specification (Sun, 2006): 16 KB 4-way L1I, 8 KB 4-way "
         "write-through L1D, 3 MB 12-way banked L2, 4 DDR2 controllers (25.6 GB/s)"),
        ("Kongetira, Aingaran, Olukotun, 'Niagara: a 32-way multithreaded Sparc processor', "
         "IEEE Micro 25(2), 2005: 6-stage single-issue pipeline shared by 4 threads, thread "
         "switch every cycle to the least recently run available thread, a thread waiting "
         "on a miss or a long-latency op unavailable ('the hardware hides memory and "
         "pipeline stalls on a given thread by scheduling the other threads'); L2 hit "
         "~22 cycles"),
        "Sun, UltraSPARC T1 processor overview: 72 W typical at 1.2 GHz, 1.3 V",
    ),
    sockets=1, cores_per_socket=8, threads_per_core=4,
    pstates_ghz=(1.0,), turbo_ghz=None, turbo=False,
    freq_domain="package", default_governor="performance", transition_latency_us=0.0,
    base_ipc=0.3,
    # No private L2: the model's L2 mirrors the L1 (see conventions); the LLC is the real L2.
    l1d_kib=8, l1d_ways=4, l1i_kib=16, l2_kib=8, l2_ways=4, llc_mib=3, llc_ways=12,
    l1_lat_cyc=3, l2_lat_cyc=3, llc_lat_cyc=22, dram_ns=106.0,
    c2c_smt_ns=3.0, c2c_llc_ns=25.0, c2c_cross_llc_ns=25.0,
    # Fine-grained multithreading (Kongetira et al. 2005: one single-issue pipe per
    # 4 threads, "switch between threads every cycle", threads waiting on a miss
    # unavailable): threads that never stall issue one pipe's worth between them
    # (1.0 at every k); what more threads deliver comes from their memory stalls
    # (models/smt.py fine_grained_factor)
    smt_throughput=(1.0, 1.0, 1.0, 1.0), smt_policy="fine-grained",
    mem_bw_gbs=25.6, mem_channels=4,
    ctx_switch_us=6.0, futex_wake_us=3.0, wake_latency_idle_us=10.0, wake_latency_busy_us=5.0,
    static_w_per_core=2.5, package_static_w=20.0, dyn_w_per_core_max=3.0,
    v_min=1.3, v_max=1.3, tdp_w=72.0,
    extra=PresetExtra(private_l2=False),
)

LAPTOP_2007 = Preset(
    name="laptop-2007",
    description="Single-core laptop of 2005-2007: Intel Pentium M 760 (Dothan, 90 nm), "
                "0.8-2.0 GHz Enhanced SpeedStep, 2 MiB L2, 533 MT/s front-side bus",
    sources=(
        "Intel ARK, Pentium M 760: 1 core, 2.0 GHz, 2 MB L2, 533 MHz FSB, 27 W TDP",
        ("Intel Pentium M Processor on 90 nm Process datasheet (302189): Enhanced SpeedStep "
         "operating points 0.8 GHz at 0.988 V to 2.0 GHz at 1.340 V"),
        "Agner Fog, microarchitecture guide (Pentium M): L1 3 cycles, L2 ~10 cycles",
        "Li, Ding, Shen, 'Quantifying the cost of context switch', ExpCS 2007",
    ),
    sockets=1, cores_per_socket=1, threads_per_core=1,
    pstates_ghz=(0.8, 1.067, 1.333, 1.6, 2.0), turbo_ghz=None, turbo=False,
    freq_domain="package", default_governor="ondemand", transition_latency_us=10.0,
    base_ipc=0.9,
    l1d_kib=32, l1d_ways=8, l1i_kib=32, l2_kib=32, l2_ways=8, llc_mib=2, llc_ways=8,
    l1_lat_cyc=3, l2_lat_cyc=3, llc_lat_cyc=10, dram_ns=110.0,
    smt_throughput=(1.0,),
    mem_bw_gbs=4.26, mem_channels=1,       # FSB 533 MT/s x 8 B is the bottleneck
    ctx_switch_us=3.8, futex_wake_us=2.5, wake_latency_idle_us=60.0, wake_latency_busy_us=6.0,
    static_w_per_core=2.0, package_static_w=2.0, dyn_w_per_core_max=20.0,
    v_min=0.988, v_max=1.34, tdp_w=27.0,
    extra=PresetExtra(private_l2=False),
)

CORE2_QUAD = Preset(
    name="core2-quad",
    description="Intel Core 2 Quad Q6600 (Kentsfield G0, 65 nm, 2007): two dual-core dies in one "
                "package, each with a shared 4 MiB L2 (two LLC domains), 1.6/2.4 GHz, FSB 1066",
    sources=(
        ("Intel ARK, Core 2 Quad Q6600: 4C/4T, 2.4 GHz, 8 MB L2 (2 x 4 MB), 1066 MHz FSB, "
         "95 W TDP (G0 stepping)"),
        "7-cpu.com/cpu/Core2.html: L1 3 cycles, L2 14 cycles (65 nm)",
        "Agner Fog, microarchitecture guide (Core 2): 16-way shared L2 per die",
        "Enhanced SpeedStep on Q6600: 6x and 9x 266 MHz = 1.6 and 2.4 GHz",
        ("Cross-die transfers go over the front-side bus: ~100 ns (core-to-core-latency style "
         "measurements on Kentsfield/Clovertown)"),
        "Li, Ding, Shen, ExpCS 2007 (context switch)",
    ),
    sockets=1, cores_per_socket=4, threads_per_core=1, llc_domains_per_socket=2,
    pstates_ghz=(1.6, 2.4), turbo_ghz=None, turbo=False,
    freq_domain="package", default_governor="ondemand", transition_latency_us=10.0,
    base_ipc=1.0,
    l1d_kib=32, l1d_ways=8, l1i_kib=32, l2_kib=32, l2_ways=8, llc_mib=4, llc_ways=16,
    l1_lat_cyc=3, l2_lat_cyc=3, llc_lat_cyc=14, dram_ns=75.0,
    c2c_smt_ns=7.0, c2c_llc_ns=25.0, c2c_cross_llc_ns=105.0,
    smt_throughput=(1.0,),
    mem_bw_gbs=8.5, mem_channels=2,        # FSB 1066 MT/s x 8 B
    ctx_switch_us=3.8, futex_wake_us=2.0, wake_latency_idle_us=50.0, wake_latency_busy_us=6.0,
    static_w_per_core=4.0, package_static_w=10.0, dyn_w_per_core_max=16.0,
    v_min=1.1, v_max=1.3, tdp_w=95.0,
    extra=PresetExtra(private_l2=False),
)

XEON_SP = Preset(
    name="xeon-sp",
    description="Intel Xeon Gold 6148 (Skylake-SP, 14 nm, 2017), one socket: 20 cores / 40 "
                "threads on a mesh, 1 MiB L2 per core, 27.5 MiB non-inclusive L3, 1.0-2.4 GHz "
                "(turbo 3.7), six-channel DDR4-2666",
    sources=(
        ("Intel ARK, Xeon Gold 6148: 20C/40T, 2.4 GHz base, 3.7 GHz max turbo, 27.5 MB L3, "
         "150 W TDP, 6 x DDR4-2666 (128 GB/s)"),
        ("7-cpu.com/cpu/Skylake_X.html and Anandtech, 'Intel Xeon Scalable (Skylake-SP)' review "
         "(2017): L2 14 cycles, L3 ~60-70 cycles, DRAM ~90 ns idle"),
        "nviennot/core-to-core-latency README: Xeon Gold 6242 (same mesh) 48 ns",
        "RHEL tuned profile throughput-performance: performance governor",
    ),
    sockets=1, cores_per_socket=20, threads_per_core=2,
    pstates_ghz=_steps(1.0, 2.4, 0.1), turbo_ghz=3.7, turbo=False,
    freq_domain="core", default_governor="performance", transition_latency_us=20.0,
    base_ipc=1.45,
    l1d_kib=32, l1d_ways=8, l1i_kib=32, l2_kib=1024, l2_ways=16, llc_mib=27.5, llc_ways=11,
    l1_lat_cyc=4, l2_lat_cyc=14, llc_lat_cyc=65, dram_ns=90.0,
    c2c_smt_ns=6.0, c2c_llc_ns=50.0, c2c_cross_llc_ns=50.0,
    smt_throughput=(1.0, 1.25),
    mem_bw_gbs=128.0, mem_channels=6,
    ctx_switch_us=1.8, futex_wake_us=1.3, wake_latency_idle_us=30.0, wake_latency_busy_us=4.0,
    static_w_per_core=1.2, package_static_w=30.0, dyn_w_per_core_max=10.5,
    v_min=0.7, v_max=1.15, tdp_w=150.0,
    # RAPL holds 20 busy cores near 150 W (issue 35: 264 W at 3.7 GHz without it); the
    # bins by active cores (Xeon Scalable specification update) not found here, nor the
    # Skylake streamer's reach (docs/model.md: where each was searched)
    extra=PresetExtra(**_SERVER_RAPL, **_XEON_DDIO, **_INTEL_CSTATE_FLUSH),
)

EPYC_ZEN3 = Preset(
    name="epyc-zen3",
    description="AMD EPYC 7513 (Zen 3 Milan, 7 nm, 2021), one socket: 32 cores / 64 threads in "
                "4 CCDs of one 8-core CCX each, 32 MiB L3 per CCX (4 LLC domains), "
                "1.5-2.6 GHz (boost 3.65), eight-channel DDR4-3200",
    sources=(
        ("AMD EPYC 7513 product page: 32C/64T, 2.6 GHz base, 3.65 GHz max boost, 128 MB L3, "
         "200 W default TDP, 8 x DDR4-3200 (204.8 GB/s)"),
        ("Anandtech, 'AMD 3rd Gen EPYC Milan review' (2021): 8-core CCX with unified 32 MB L3, "
         "L3 ~46 cycles, DRAM ~110 ns, intra-CCX core-to-core ~20 ns, cross-CCX ~80-110 ns"),
        "nviennot/core-to-core-latency README: EPYC 7773X (Milan-X) median 115 ns",
        ("7-cpu.com/cpu/Zen3.html-style tables and AMD Software Optimization Guide for Family 19h: "
         "L1D 32 KB 8-way 4-5 cycles, L2 512 KB 8-way 12 cycles, L3 16-way"),
        "Linux acpi-cpufreq on Milan: three P-states, per-core; Ubuntu default schedutil",
    ),
    sockets=1, cores_per_socket=32, threads_per_core=2, llc_domains_per_socket=4,
    pstates_ghz=(1.5, 2.0, 2.6), turbo_ghz=3.65, turbo=False,
    freq_domain="core", default_governor="schedutil", transition_latency_us=20.0,
    base_ipc=1.6,
    l1d_kib=32, l1d_ways=8, l1i_kib=32, l2_kib=512, l2_ways=8, llc_mib=32, llc_ways=16,
    l1_lat_cyc=4, l2_lat_cyc=12, llc_lat_cyc=46, dram_ns=110.0,
    c2c_smt_ns=7.0, c2c_llc_ns=20.0, c2c_cross_llc_ns=105.0,
    smt_throughput=(1.0, 1.25),
    mem_bw_gbs=204.8, mem_channels=8,
    ctx_switch_us=1.5, futex_wake_us=1.0, wake_latency_idle_us=30.0, wake_latency_busy_us=4.0,
    static_w_per_core=1.0, package_static_w=60.0, dyn_w_per_core_max=6.5,
    v_min=0.8, v_max=1.2, tdp_w=200.0,
)

VM_2VCPU = Preset(
    name="vm-2vcpu",
    description="2-vCPU cloud VM on a Zen 3 (EPYC Milan) host, modelled as it physically is: "
                "one core with 2 SMT threads (the guest's lscpu shows 2 cores x 1 thread); "
                "fixed clock, since guests cannot set P-states",
    sources=(
        ("lscpu in this project's CI VM: AMD EPYC family 25 model 1 (Milan) under KVM, 2 vCPUs, "
         "BogoMIPS 4499.99 (TSC 2.25 GHz), 32 MiB L3, no cpufreq in the guest"),
        ("AWS EC2 and Google Cloud documentation: on x86 instances each vCPU is one hardware "
         "thread, so a 2-vCPU instance is one physical core"),
        ("AMD Software Optimization Guide for Family 19h: 32 KB L1D, 512 KB L2 per core, "
         "32 MB L3 per CCX"),
        "Anandtech, EPYC Milan review (2021): L3 ~46 cycles, DRAM ~110 ns",
    ),
    sockets=1, cores_per_socket=1, threads_per_core=2,
    pstates_ghz=(2.25,), turbo_ghz=None, turbo=False,
    freq_domain="package", default_governor="performance", transition_latency_us=0.0,
    base_ipc=1.6,
    l1d_kib=32, l1d_ways=8, l1i_kib=32, l2_kib=512, l2_ways=8, llc_mib=32, llc_ways=16,
    l1_lat_cyc=4, l2_lat_cyc=12, llc_lat_cyc=46, dram_ns=110.0,
    c2c_smt_ns=7.0, c2c_llc_ns=20.0, c2c_cross_llc_ns=20.0,
    smt_throughput=(1.0, 1.25),
    mem_bw_gbs=25.0, mem_channels=2,       # one core's achievable share, not the host's
    # vCPU wake-ups go through the hypervisor (halt exit, posted-interrupt IPI)
    ctx_switch_us=2.0, futex_wake_us=1.5, wake_latency_idle_us=50.0, wake_latency_busy_us=8.0,
    # The VM's share of the host's power: one core plus 1/64 of the I/O die.
    static_w_per_core=1.0, package_static_w=1.5, dyn_w_per_core_max=5.0,
    v_min=1.0, v_max=1.0, tdp_w=None,
)

SERVER_2015 = Preset(
    name="server-2015",
    description="Plausible 2015 server: two Intel Xeon E5-2670 v3 (Haswell-EP, 22 nm), "
                "2 x 12 cores / 24 threads, 30 MiB L3 per socket, 1.2-2.3 GHz (turbo 3.1), "
                "quad-channel DDR4-2133 per socket; for the eat-what-you-kill benchmark",
    sources=(
        ("Intel ARK, Xeon E5-2670 v3: 12C/24T, 2.3 GHz base, 3.1 GHz max turbo, 30 MB L3, "
         "120 W TDP, 4 x DDR4-2133 (68 GB/s)"),
        ("7-cpu.com/cpu/Haswell.html and Anandtech, 'Intel Xeon E5 v3 (Haswell-EP)' review "
         "(2014): L2 12 cycles, L3 ~40 cycles on the 12-core die, DRAM ~85 ns, QPI ~130 ns"),
        "Anandtech Haswell-EP review: per-core P-states (PCPS), 20-way 2.5 MB L3 slices",
        "data/ewyk-benchmark.md: machine unpublished, 'plausible 2015 server'",
    ),
    sockets=2, cores_per_socket=12, threads_per_core=2,
    pstates_ghz=_steps(1.2, 2.3, 0.1), turbo_ghz=3.1, turbo=False,
    freq_domain="core", default_governor="performance", transition_latency_us=20.0,
    base_ipc=1.4,
    l1d_kib=32, l1d_ways=8, l1i_kib=32, l2_kib=256, l2_ways=8, llc_mib=30, llc_ways=20,
    l1_lat_cyc=4, l2_lat_cyc=12, llc_lat_cyc=42, dram_ns=85.0,
    c2c_smt_ns=6.0, c2c_llc_ns=45.0, c2c_cross_llc_ns=45.0, c2c_socket_ns=125.0,
    smt_throughput=(1.0, 1.25),
    mem_bw_gbs=68.0, mem_channels=4,
    ctx_switch_us=1.8, futex_wake_us=1.2, wake_latency_idle_us=30.0, wake_latency_busy_us=4.0,
    static_w_per_core=1.5, package_static_w=20.0, dyn_w_per_core_max=11.0,
    v_min=0.75, v_max=1.1, tdp_w=120.0,
    # the bins by active cores (Xeon E5 v3 specification update) not found here, nor the
    # Haswell streamer's reach (docs/model.md: where each was searched)
    extra=PresetExtra(**_SERVER_RAPL, **_XEON_DDIO, **_INTEL_CSTATE_FLUSH),
)

PRESETS: dict[str, Preset] = {
    p.name: p for p in (
        IDEAL, I7_3770, I7_920, I5_2400, I9_7960X, T1000, LAPTOP_2007, CORE2_QUAD, XEON_SP,
        EPYC_ZEN3, VM_2VCPU, SERVER_2015,
    )
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise KeyError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}") from None


def cpu_topology(preset: Preset) -> tuple[list[int], list[int], list[int], list[int]]:
    """Physical core, LLC domain, socket and SMT thread index of every CPU.

    CPUs are numbered as Linux enumerates them on Intel and AMD machines: one
    hardware thread of every core first (socket by socket), then the second
    thread of every core, and so on: cpu = thread * (sockets * cores_per_socket)
    + socket * cores_per_socket + core. So ``taskset -c 0-3`` (``server.cpus=4``)
    means four distinct cores, and cpu N's SMT sibling is cpu N + cores. LLC
    domains (CCXs) split a socket's cores evenly.
    """
    cps = max(1, preset.cores_per_socket)
    doms = max(1, preset.llc_domains_per_socket)
    per_dom = -(-cps // doms)
    n_cores = preset.sockets * cps
    core, llc, socket, thread = [], [], [], []
    for t in range(max(1, preset.threads_per_core)):
        for c in range(n_cores):
            s, c_in = divmod(c, cps)
            core.append(c)
            llc.append(s * doms + min(doms - 1, c_in // per_dom))
            socket.append(s)
            thread.append(t)
    return core, llc, socket, thread


def nominal_ips(preset: Preset) -> float:
    """Instructions per second of one lone thread with warm caches at the top P-state:
    what a "microsecond of service" means on this preset."""
    return preset.base_ipc * preset.pstates_ghz[-1] * 1e9


def check_preset(p: Preset) -> None:
    """Raise pydantic's ValidationError if a preset is impossible (the model validates
    on construction; this re-checks one built elsewhere)."""
    Preset.model_validate(p.model_dump())


def with_overrides(preset: Preset, **changes) -> Preset:
    """A new, validated preset with ``changes`` (lists become tuples, ``extra`` a
    PresetExtra); a ConfigError naming the preset's field if one is impossible."""
    data = preset.model_dump()
    for key, value in changes.items():
        if isinstance(value, list):
            value = tuple(value)
        if key == "extra" and isinstance(value, dict):
            value = {**data["extra"], **{k: tuple(v) if isinstance(v, list) else v
                                         for k, v in value.items()}}
        data[key] = value
    try:
        return Preset.model_validate(data)
    except ValidationError as e:
        # a list's field, not its position: P-states and SMT curves are set whole
        raise config_error(e, unknown="not a preset parameter", indices=False) from None
