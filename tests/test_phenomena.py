"""docs/design/MODEL.md's phenomena, on the built-in scenarios with their default parameters."""

from __future__ import annotations

import pytest

from tests.helpers import run, study_loop_migrations_per_request


def test_contended_server_is_faster_on_one_cpu_than_on_four():
    """Phenomenon 3: contended stores make a message server faster on fewer cores."""
    one = run("contended", {"server.cpus": 1}, requests=6000)
    four = run("contended", {"server.cpus": 4}, requests=6000)
    assert one["throughput_rps"] > four["throughput_rps"]
    # ... because on four cores every message stalls on the contended lines.
    assert four["breakdown_us"]["contention"] > 10 * one["breakdown_us"]["contention"]


def test_throughput_machine_loses_on_one_job_and_wins_on_many():
    """Phenomenon 4: many slow hardware threads lose on one task, win by a wide margin
    on many (Sun T1000 against a contemporary Core 2 Quad)."""
    def makespan(preset, jobs):
        return run("throughput-machine", {"machine.preset": preset,
                                          "workload.jobs": jobs})["makespan_s"]

    assert makespan("t1000", 1) > 2 * makespan("core2-quad", 1)
    assert makespan("core2-quad", 64) > 1.5 * makespan("t1000", 64)


def test_throughput_machine_gains_per_core_only_what_its_threads_stall():
    """Phenomenon 4 as the report measured it (issue 29): on a long-running calculation
    that never waits on memory (work.task_kib = 0) the T1000 gained far less per core as
    its hardware threads filled: 32 jobs (4 per core) take about 4x the time of 8, a
    core's four threads delivering one thread's worth (at least 3.5x: no more than
    1.15x per core). It still loses on one job and wins on many against the
    single-core laptop of its day (laptop-2007): more than 2x slower on one job
    (5.8x measured), faster on 64 (1.33x measured, asserted 1.2x)."""
    def makespan(preset, jobs):
        return run("throughput-machine", {"machine.preset": preset, "workload.jobs": jobs,
                                          "work.task_kib": 0.0})["makespan_s"]

    assert makespan("t1000", 32) > 3.5 * makespan("t1000", 8)
    assert makespan("t1000", 1) > 2 * makespan("laptop-2007", 1)
    assert makespan("laptop-2007", 64) > 1.2 * makespan("t1000", 64)


def test_pipeline_dispatching_before_parsing_recovers_it_all():
    """Phenomenon 1's last part, "reverting the threading model recovered it all", on
    today's pec: Jetty's fix (commit 6bfc19be1b, "dispatch before parsing so that
    handling is done in same thread", ManagedSelector's threading from 9.3 on) has the
    selector produce the endpoint's task, and the pool thread that runs it parses and
    handles every pipelined request (HttpConnection.onFillable). So pec on `pipeline`
    does what pc does: the same rate, IPC, LLC loads per request and clock, on one CPU,
    with no dispatch or coherence cost per request (issue 36 item 2; the milestone's
    threading is jetty9-milestone, below)."""
    pc = run("pipeline", {"strategy.name": "pc"}, requests=8000)
    pec = run("pipeline", {"strategy.name": "pec"}, requests=8000)
    for key in ("throughput_rps", "ipc", "ghz"):
        assert pec[key] == pytest.approx(pc[key], rel=1e-3), key
    per_req = lambda r: r["llc_loads"] / r["requests"]  # noqa: E731
    assert per_req(pec) == pytest.approx(per_req(pc), rel=1e-3)
    assert pec["cpus_utilized"] < 1.01 and pec["context_switches"] < 0.01 * pec["requests"]
    assert pec["breakdown_us"]["dispatch"] < 0.5 and pec["breakdown_us"]["coherence"] == 0


def test_pipeline_jetty9_milestone_is_a_parallel_slowdown_in_all_its_parts():
    """Phenomenon 1 with the Jetty 9 milestone's own threading (strategy
    jetty9-milestone: the selector parses, the handling is dispatched to the pool, the
    next pipelined request is dispatched from the completion), every part as the
    report gives it, against pc (Jetty 8's one thread) on the built-in `pipeline`
    scenario: slower, more than one CPU of task-clock, a lower IPC, more than twice
    the LLC loads per request and, under ondemand, a lower clock. Why more than one
    CPU: each dispatch wakes a pool thread that finds its job already taken (the
    dispatching thread polls the queue first) and goes back to sleep, and those
    sleep and wake cycles run on other CPUs (the thread's halves of the context
    switches, its futex_wait, the queue's head lock, the wake-up's line transfers)."""
    pc = run("pipeline", {"strategy.name": "pc"}, requests=8000)
    j9 = run("pipeline", {"strategy.name": "jetty9-milestone"}, requests=8000)
    assert pc["throughput_rps"] > 1.2 * j9["throughput_rps"]
    assert j9["cpus_utilized"] > 1.1 and pc["cpus_utilized"] < 1.01
    assert j9["ipc"] < 0.9 * pc["ipc"]
    per_req = lambda r: r["llc_loads"] / r["requests"]  # noqa: E731
    assert per_req(j9) > 2 * per_req(pc)
    assert j9["ghz"] < 0.9 * pc["ghz"]
    # the extra CPU is the futile wake-ups' system time on other CPUs
    assert j9["context_switches"] / j9["requests"] > 1.5
    busy = [u for u in j9["cpu_utilization"] if u > 0.01]
    assert len(busy) >= 2 and sorted(busy)[-2] > 0.05
    # The slowdown is hand-off and cache cost: dispatch and coherence appear in the
    # breakdown of the milestone and not of pc (1.5 and 0.54 us a request measured).
    assert j9["breakdown_us"]["dispatch"] > 1 and pc["breakdown_us"]["dispatch"] < 0.5
    assert j9["breakdown_us"]["coherence"] > 0.25 and pc["breakdown_us"]["coherence"] == 0


def test_hello_event_loop_uses_less_cpu_and_migrates_less_than_a_thread_pool():
    """Phenomenon 5 (Netty vs Tomcat) on `hello` (the web server at a set rate, no
    backend call), at its default load: the event loop spends less CPU per request at
    a higher IPC, switches and migrates less."""
    tp = run("hello", {"strategy.name": "thread-pool"}, requests=6000)
    el = run("hello", {"strategy.name": "event-loop"}, requests=6000)
    per = lambda r, k: r[k] / r["requests"]  # noqa: E731
    assert per(el, "task_clock_ms") < 0.95 * per(tp, "task_clock_ms")
    assert el["ipc"] > tp["ipc"]
    assert per(el, "cpu_migrations") < 0.6 * per(tp, "cpu_migrations")
    assert per(el, "context_switches") < per(tp, "context_switches")
    assert per(el, "futex_wakes") < per(tp, "futex_wakes")


def test_contended_server_slows_at_every_step_from_one_cpu_to_all():
    """Phenomenon 3 in all its parts (issue 12): on the built-in `contended` scenario
    (its messages over loopback TCP, each end paying its socket calls), throughput
    falls strictly from 1 server CPU to 2, to half the CPUs (4 of 8) and to
    all 8, by at least 10% at each step and more than 2x from one CPU to all, because
    a contended line's handover costs more the more cores wait on it
    (models/coherence.py); and producer and consumer sharing the server's CPUs make
    it slower still than the same server with them on other cores."""
    rps = {n: run("contended", {"server.cpus": n}, requests=6000)["throughput_rps"]
           for n in (1, 2, 4, 8)}
    assert rps[1] > 1.1 * rps[2] > 1.1 * 1.1 * rps[4], rps
    assert rps[4] > 1.1 * rps[8], rps
    assert rps[1] > 2 * rps[8], rps

    def with_clients_on(server, clients):
        return run("contended", {"server.cpus": server, "producer.cpus": clients,
                                 "consumer.cpus": clients}, requests=6000)["throughput_rps"]
    for server in ([0], [0, 1]):
        shared, apart = with_clients_on(server, server), with_clients_on(server, [2, 3])
        assert shared < 0.9 * apart, (server, shared, apart)


def _hello(strategy, rate):
    return run("hello", {"strategy.name": strategy, "workload.rate_per_s": rate}, requests=10000)


def test_hello_event_loop_is_cheaper_reaches_more_and_gets_cheaper_with_load():
    """Phenomenon 5 in the parts a set rate shows (RxNetty vs Tomcat, Gregg et al. 2015),
    on the built-in `hello` scenario (the web server's hello handler without its
    backend call, at a set rate; models/syscalls.py's kernel work): the
    event loop spends less CPU per request and reaches a higher peak rate (each
    strategy's saturating rate: the throughput of an offered load far above both
    capacities, 600k/s against ~340k/s and ~220k/s, wrk-style connections with one
    request in flight each); as the load rises from 60k to 250k requests/s (from 27%
    of the pool's peak to past it, and to 73% of the loop's: the pool saturates
    first, as Tomcat did in the study) the loop's migrations per request fall, its
    IPC rises and its CPU per request falls (fewer wake-ups and epoll_wait calls per
    request as its batches grow), while the pool's maximum latency grows by a factor
    several times the loop's."""
    per = lambda r, k: r[k] / r["requests"]  # noqa: E731
    peak = {s: _hello(s, 600_000.0)["throughput_rps"] for s in ("thread-pool", "event-loop")}
    assert peak["event-loop"] > 1.3 * peak["thread-pool"], peak      # published: 46%
    lo = {s: _hello(s, 60_000.0) for s in ("thread-pool", "event-loop")}
    hi = {s: _hello(s, 250_000.0) for s in ("thread-pool", "event-loop")}
    assert per(lo["event-loop"], "task_clock_ms") < 0.8 * per(lo["thread-pool"],
                                                              "task_clock_ms")
    el_lo, el_hi = lo["event-loop"], hi["event-loop"]
    assert per(el_hi, "cpu_migrations") < 0.7 * per(el_lo, "cpu_migrations")
    assert el_hi["ipc"] > 1.02 * el_lo["ipc"]
    assert per(el_hi, "task_clock_ms") < 0.95 * per(el_lo, "task_clock_ms")
    growth = {s: hi[s]["latency_us"]["max"] / lo[s]["latency_us"]["max"] for s in lo}
    assert growth["thread-pool"] > 10 * growth["event-loop"], growth


def _web(strategy, clients):
    return run("web", {"strategy.name": strategy, "workload.clients": clients})


def machine_cpus(r) -> float:
    """CPUs busy on the whole machine: the server's and, on `web`, wrk's."""
    return sum(r["cpu_utilization"])


def test_web_event_loop_is_cheaper_peaks_higher_and_gets_cheaper_as_the_pool_gets_dearer():
    """Phenomenon 5 in all its parts (RxNetty vs Tomcat, Gregg et al. 2015) on the
    built-in `web` scenario, the study's own shape: wrk-style clients whose requests
    wait on a backend call (the loop through RxNetty's non-blocking client, the pool
    blocking a worker per call). At the study's sustained point (400 clients) the loop
    spends less CPU per request, switches and migrates less; its peak rate is higher
    by a clear margin (2400 clients saturate both: all 4 CPUs busy, which the server
    shares with wrk as in the study); from 50 to 1100 clients and from 400 to 1100
    clients (the study's top step) the loop's migrations per request fall, its IPC
    rises and its CPU per request falls, while the pool's CPU per request rises (its
    workers' stacks, touched round-robin, outgrow the LLC as the requests in flight
    grow) and its maximum latency degrades while the loop's does not."""
    per = lambda r, k: r[k] / r["requests"]  # noqa: E731
    lo = {s: _web(s, 400) for s in ("thread-pool", "event-loop")}
    hi = {s: _web(s, 1100) for s in ("thread-pool", "event-loop")}
    tp, el = lo["thread-pool"], lo["event-loop"]
    assert per(el, "task_clock_ms") < 0.8 * per(tp, "task_clock_ms")
    assert el["ipc"] > 1.2 * tp["ipc"]
    assert per(el, "context_switches") < 0.7 * per(tp, "context_switches")
    assert per(el, "cpu_migrations") < 0.6 * per(tp, "cpu_migrations")
    el_hi, tp_hi = hi["event-loop"], hi["thread-pool"]
    assert per(el_hi, "cpu_migrations") < 0.7 * per(el, "cpu_migrations")
    # and from the staircase's first step (issue 29: it migrated more at 1100 than at 50)
    el_first = _web("event-loop", 50)
    assert per(el_hi, "cpu_migrations") < 0.7 * per(el_first, "cpu_migrations")
    assert el_hi["ipc"] > 1.03 * el["ipc"]
    assert per(el_hi, "task_clock_ms") < 0.92 * per(el, "task_clock_ms")
    assert per(tp_hi, "task_clock_ms") > 1.15 * per(tp, "task_clock_ms")
    assert tp_hi["ipc"] < 0.9 * tp["ipc"]
    assert tp_hi["latency_us"]["max"] > 1.3 * tp["latency_us"]["max"]
    assert el_hi["latency_us"]["max"] < 1.05 * el["latency_us"]["max"]
    # the pool saturates the machine (its 4 CPUs busy, shared with wrk as in the
    # study) below the loop's rate at the same clients
    assert machine_cpus(tp_hi) > 3.9 and el_hi["throughput_rps"] > 1.4 * tp_hi["throughput_rps"]
    peak = {s: _web(s, 2400) for s in ("thread-pool", "event-loop")}
    assert min(machine_cpus(r) for r in peak.values()) > 3.9, peak
    assert peak["event-loop"]["throughput_rps"] > 1.5 * peak["thread-pool"]["throughput_rps"]


def test_the_study_measured_the_loop_migrating_less_per_request_as_load_rose():
    """What the RxNetty-vs-Tomcat slides' "Thread Migrations" chart says, as read into
    docs/data/wsperflab-2015/curves.csv: from 100 to 1050 clients RxNetty's migrations
    a request (the whole machine's) never rise from one step to the next, 8.85 -> 5.89
    by 400 clients and 0.76 at 1050, although their count a second peaks near 400. By
    hand from the CSV: at 400 clients 9.0e5 / (60 x 2548) = 5.89."""
    per_request = study_loop_migrations_per_request()
    steps = sorted(per_request)
    assert all(per_request[a] >= per_request[b] for a, b in zip(steps, steps[1:], strict=False))
    assert per_request[400] == pytest.approx(9.0e5 / (60 * 2548), rel=1e-3)
    assert per_request[400] < 0.75 * per_request[100] and per_request[1050] < 0.1 * per_request[100]


@pytest.mark.xfail(strict=True, reason="known departure (issue 29): on `web` the machine's "
                   "migrations a request (server and wrk) rise from 100 to 400 clients "
                   "(0.48 -> 0.89) where the study's fall (8.85 -> 5.89); the study's machine "
                   "also ran the backend mock and five calls a request at 30x web's time "
                   "scale; at that scale the model falls too (tests/test_wsperflab_2015.py)")
def test_web_loop_migrates_less_per_request_from_the_first_steps_as_the_study_measured():
    """The study's shape (the test above) on `web`, counting as its perf did: every
    process on the machine (the server and wrk; the backend mock is opt-in)."""
    def machine_migrations(r):
        return sum(p["cpu_migrations"] for p in r["processes"].values()) / r["requests"]

    assert machine_migrations(_web("event-loop", 400)) < 0.9 * machine_migrations(
        _web("event-loop", 100))


def test_virtual_threads_use_more_cpu_than_a_bounded_pool_as_every_task_queues():
    """Phenomenon 7 (Jetty's Loom report) on `loom`, the report's benchmark
    (webtide/loom-trial ManyTasks and FakeDataBase; 3000 tasks, each two gets and a put
    behind a 100-permit semaphore, sleeping 1-5, 1-5 and 2 ms): one virtual thread per
    task uses "almost twice" the CPU per task of the benchmark's QueuedThreadPool(100,
    100) for the same work: asserted 1.6 to 2.4 (twice, +-20%; measured 2.17 with the
    SecureRandom estimate of the scenario, 1.79 at twice that cost). Why: every virtual
    thread queues and dequeues on the semaphore (nearly all of its 3 acquisitions park,
    and each park and sleep freezes and thaws its stack and goes through the carrier
    pool), where the pool's 100 threads never wait for one of the 100 permits (by
    hand: never more holders than permits); the same database time per task."""
    from warmcore.build import build, finish, run_built
    from warmcore.simcore.config import load

    def loom(*sets):
        ctx = build(load("loom", ["workload.jobs=3000", *sets]), 1)
        return finish(ctx, run_built(ctx)), ctx

    vt, vctx = loom()
    pool, pctx = loom("strategy.params.kernel_threads=true", "strategy.params.pool=100")
    per = lambda r: r["task_clock_ms"] * 1e3 / r["requests"]  # noqa: E731
    assert vt["requests"] == pool["requests"] == 3000
    assert 1.6 <= per(vt) / per(pool) <= 2.4, (per(vt), per(pool))
    assert vctx.strategy.stats["permit_waits"] > 2.5 * 3000
    assert pctx.strategy.stats["permit_waits"] == 0
    assert vt["breakdown_us"]["blocked_io"] == pytest.approx(pool["breakdown_us"]["blocked_io"],
                                                             rel=1e-9)


@pytest.fixture(scope="module")
def ewyk_2015():
    """The report's own benchmark (simcore/scenarios/ewyk-2015.toml), its default run."""
    from warmcore.build import simulate_once
    from warmcore.simcore.config import load
    return {s: simulate_once(load("ewyk-2015", strategy=s), 1) for s in ("pc", "pec", "epc")}


def test_eat_what_you_kill_as_the_report_measured_it(ewyk_2015):
    """Phenomenon 2 (data/ewyk-benchmark.md) on the benchmark the report ran
    (jetty-project/eat-what-you-kill, April 2015): 2000 client threads, a quarter of
    the handlers sleeping up to 99 ms, PEC handing them to a 256-thread pool.
    * PC "almost 8 times" PEC: asserted 6.5 to 8 (measured 7.77; by hand 2000 / 256 =
      7.81, the threads that can sleep at once);
    * PEC "a lot less CPU (idle during dispatch delays)": under 0.3 of PC's CPUs (0.18);
    * PEC normalised for CPU ~30% below PC: below 0.85 (0.72);
    * EPC better than PC "because it could use more cores": above 1.04x PC's throughput
      on above 1.05x its CPUs (1.079 and 1.110; at most 2256 / 2000 = 1.128 by hand,
      the pool's threads added to the clients');
    * EPC "near identical" to PC per CPU: within 10% (0.972)."""
    pc, pec, epc = ewyk_2015["pc"], ewyk_2015["pec"], ewyk_2015["epc"]

    def per_cpu(r):
        return r["throughput_rps"] / r["cpus_utilized"]

    assert 6.5 <= pc["throughput_rps"] / pec["throughput_rps"] <= 8.0
    assert pec["cpus_utilized"] < 0.3 * pc["cpus_utilized"]
    assert per_cpu(pec) < 0.85 * per_cpu(pc)
    assert epc["throughput_rps"] > 1.04 * pc["throughput_rps"]
    assert epc["cpus_utilized"] > 1.05 * pc["cpus_utilized"]
    assert 0.9 <= per_cpu(epc) / per_cpu(pc) <= 1.1


def test_eat_what_you_kill_throughputs_are_the_sleeping_threads_over_the_mean_sleep(
        ewyk_2015):
    """Why, by hand: the handlers' CPU is microseconds and their sleep 12,387 us on
    average (300 of 400 draws none, one each of random(100) ms plus Linux's 50 us timer
    slack), and the machine has 48 CPUs for 3. So PC serves 2000 / 12.40 ms (each client
    thread sleeps its own requests' delays) and PEC 256 / 12.40 ms (the pool's threads
    sleep them), each within 2%."""
    mean_sleep_s = (sum(d * 1000.0 + 50.0 for d in range(1, 100)) / 400) * 1e-6
    cpu_s = 10e-6            # produce, handle, the switches of a sleep: ~10 us a request
    for strategy, threads in (("pc", 2000), ("pec", 256)):
        expected = threads / (mean_sleep_s + cpu_s)
        assert ewyk_2015[strategy]["throughput_rps"] == pytest.approx(expected, rel=0.02)
