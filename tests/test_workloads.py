"""Workload generators: each against the law that must govern it."""

from __future__ import annotations

import pytest

import warmcore

from warmcore.build import build, finish, run_built
from tests.helpers import run, scenario
from warmcore.build import simulate_once
from warmcore.simcore.config import load


def test_closed_loop_obeys_the_interactive_response_time_law():
    # N clients, think Z, response R: X = N / (R + Z) exactly (for long runs).
    r = run("mmc", {"machine.cores": 2}, workload={
        "kind": "closed", "clients": 6, "think_us": 2000.0, "service_us": 500.0}, requests=20_000)
    x = r["throughput_rps"]
    assert x == pytest.approx(6 / (r["latency_us"]["mean"] * 1e-6 + 2e-3), rel=0.02)


@pytest.mark.parametrize("strategy", ["thread-pool", "event-loop"])
def test_a_closed_client_is_serial_anyway(strategy):
    """A closed client has one request in flight, so flagging its connection serial
    (HTTP/1.1, as `web` does) changes nothing for a strategy that does not produce
    by connection: the same numbers, bit for bit. Only Jetty's selectors look at it
    (docs/strategies.md, "What a selector produces")."""
    def result(serial):
        return run("web", {"strategy.name": strategy, "workload.serial": serial},
                   seed=1, requests=1500)

    assert result(True) == result(False)


def test_closed_loop_with_one_client_never_queues():
    r = run("mmc", workload={"kind": "closed", "clients": 1, "think_us": 100.0,
                             "service_us": 300.0}, requests=2000)
    assert r["wait_us"]["mean"] == pytest.approx(0.0, abs=1e-6)


def test_batch_makespan_is_total_work_over_cpus_for_equal_jobs():
    r = run("mmc", {"machine.cores": 4}, workload={
        "kind": "batch", "jobs": 16, "service": "deterministic", "service_us": 1000.0},
        requests=1)
    assert r["requests"] == 16
    assert r["makespan_s"] == pytest.approx(16 * 1e-3 / 4, rel=1e-9)


def test_batch_with_more_threads_than_cpus_time_slices_fairly():
    # 8 CPU-bound 50 ms jobs on 8 threads and 2 CPUs: all end near 200 ms (fair share),
    # not 4 waves of 50 ms, because the scheduler slices time between them.
    cfg = scenario("mmc", {"machine.cores": 2, "strategy.params.threads": 8}, workload={
        "kind": "batch", "jobs": 8, "service": "deterministic", "service_us": 50_000.0},
        requests=1)
    ctx = build(cfg, 1)
    r = finish(ctx, run_built(ctx))
    assert r["makespan_s"] == pytest.approx(0.2, rel=0.02)
    assert r["latency_us"]["p50"] > 0.15e6     # no job finished in the first waves
    assert r["context_switches"] > 8           # preemptions happened


def test_trace_arrivals_are_replayed(tmp_path):
    f = tmp_path / "arrivals.txt"
    f.write_text("# seconds\n0.001\n0.002\n0.0025\n0.010\n")
    r = run("mmc", workload={"kind": "open", "arrival": "trace", "trace_file": str(f),
                             "service": "deterministic", "service_us": 1000.0},
            requests=10, warmup=0.0)
    assert r["requests"] == 4 and r["stop_reason"] == "workload finished"
    # On 4 CPUs nobody waits: each takes exactly its 1 ms service.
    assert r["latency_us"]["max"] == pytest.approx(1000.0, rel=1e-6)


def test_bad_trace_file_names_the_field(tmp_path):
    from warmcore.simcore.config import ConfigError

    f = tmp_path / "arrivals.txt"
    f.write_text("0.002\n0.001\n")
    with pytest.raises(ConfigError, match="workload.trace_file.*non-decreasing"):
        run("mmc", workload={"kind": "open", "arrival": "trace", "trace_file": str(f)},
            requests=10)


def test_constant_rate_arrivals_are_evenly_spaced():
    r = run("mmc", {"machine.cores": 1}, workload={
        "kind": "open", "arrival": "constant", "rate_per_s": 500.0,
        "service": "deterministic", "service_us": 1000.0}, requests=1000)
    # D/D/1 below saturation: no waiting at all.
    assert r["wait_us"]["mean"] == pytest.approx(0.0, abs=1e-6)
    assert r["throughput_rps"] == pytest.approx(500.0, rel=0.01)


def test_many_connections_spread_requests_over_connections():
    cfg = scenario("mmc", workload={"kind": "connections", "connections": 20,
                                    "rate_per_s": 2000.0, "service_us": 100.0},
                   requests=4000)
    ctx = build(cfg, 2)
    seen = set()
    orig = ctx.strategy.on_arrival
    ctx.strategy.on_arrival = lambda conn: (seen.add(conn.id), orig(conn))
    ctx.workload.on_arrival = ctx.strategy.on_arrival
    finish(ctx, run_built(ctx))
    assert seen == set(range(20))


def test_stream_runs_producer_and_consumer_as_their_own_processes():
    r = run("mmc", {"machine.cores": 4, "producer.cpus": [0], "consumer.cpus": [1],
                    "server.cpus": [2, 3]},
            workload={"kind": "stream", "rate_per_s": 2000.0, "producer_us": 50.0,
                      "consumer_us": 80.0, "service_us": 100.0}, requests=3000)
    procs = r["processes"]
    assert set(procs) == {"server", "producer", "consumer"}
    # Each process's CPU time per message matches its own cost.
    n = r["arrived"]
    assert procs["producer"]["task_clock_ms"] / n == pytest.approx(0.05, rel=0.05)
    assert procs["consumer"]["task_clock_ms"] / n == pytest.approx(0.08, rel=0.05)
    assert r["cpu_utilization"][0] == pytest.approx(2000 * 50e-6, rel=0.1)
    assert r["cpu_utilization"][1] == pytest.approx(2000 * 80e-6, rel=0.1)
    # Latency covers production, service and consumption.
    assert r["latency_us"]["mean"] >= 50 + 80


def test_saturating_stream_is_limited_by_its_window():
    r = run("mmc", {"machine.cores": 2}, workload={
        "kind": "stream", "window": 4, "producer_us": 10.0, "consumer_us": 10.0,
        "service_us": 100.0}, requests=2000)
    assert r["mean_in_system"] <= 4.0 + 1e-9


def test_same_seed_gives_same_demands_whatever_the_strategy_settings():
    """Common random numbers: comparisons see the same requests."""
    a = build(scenario("mmc", {"strategy.params.threads": 1}, requests=10), 3)
    b = build(scenario("mmc", {"strategy.params.threads": 4}, requests=10), 3)
    da = [a.workload.factory.make(0.0).consume.instructions for _ in range(200)]
    db = [b.workload.factory.make(0.0).consume.instructions for _ in range(200)]
    assert da == db and len(set(da)) == 200


def _one_conn_hello(pipelined: bool) -> dict:
    return {"kind": "connections", "connections": 1, "rate_per_s": 500.0, "service_us": 5.0,
            "serial": True, "pipelined": pipelined, "client_turnaround_us": 1000.0}


def _most_unanswered_at_the_server(pipelined: bool) -> int:
    """Run 4 busy connections; return the most requests one of them ever had at the
    server (arrived and not yet answered: in its inbox or being handled)."""
    cfg = scenario("hello", workload={"kind": "connections", "connections": 4,
                                    "rate_per_s": 150_000.0, "service_us": 5.0,
                                    "serial": True, "pipelined": pipelined,
                                    "client_turnaround_us": 20.0}, requests=3000)
    ctx = build(cfg, 1)
    conns = ctx.workload.connections
    worst = [0]
    orig = ctx.strategy.on_arrival

    def probe(conn):
        worst[0] = max(worst[0], max(len(c.inbox) + c.busy for c in conns))
        orig(conn)
    ctx.strategy.on_arrival = probe
    r = finish(ctx, run_built(ctx))
    assert r["requests"] == 3000
    return worst[0]


def test_unpipelined_connections_keep_one_request_at_the_server_each():
    """workload.pipelined=false (wrk, wrk2): a request due while its connection awaits a
    response waits at the client, so the server never holds two of one connection;
    pipelined (the default) at the same load it does."""
    assert _most_unanswered_at_the_server(pipelined=False) == 1
    assert _most_unanswered_at_the_server(pipelined=True) > 1


def test_held_requests_pay_the_client_turnaround_in_their_latency():
    """Latency counts from when a request was due: one that waited for the previous
    response and then client_turnaround_us (1 ms) shows it; pipelined ones do not."""
    lat = {p: run("hello", workload=_one_conn_hello(p), requests=2000, seed=1)["latency_us"]
           for p in (True, False)}
    assert lat[False]["p99"] > 1000.0 > lat[True]["p99"], lat
    assert lat[False]["mean"] > 2 * lat[True]["mean"], lat


def test_unpipelined_needs_serial_connections_and_a_valid_turnaround():
    from warmcore.simcore.config import ConfigError, load
    with pytest.raises(ConfigError, match="pipelined"):
        load("hello", ["workload.serial=false", "workload.pipelined=false"])
    with pytest.raises(ConfigError, match="client_turnaround_us"):
        load("hello", ["workload.client_turnaround_us=-1"])
    with pytest.raises(ConfigError, match="client_turnaround_us"):
        load("hello", ["workload.client_turnaround_us=nan"])


def test_traced_arrivals_on_an_unpipelined_connection_wait_for_the_response(tmp_path):
    """Two requests due together on one connection, one in flight at a time: the second
    is sent 5 ms (the turnaround) after the first one's 1 ms response, so its latency
    from when it was due is their sum; pipelined, it is at the server at once and waits
    only for the first one's handling (a serial connection): 2 ms."""
    f = tmp_path / "arrivals.txt"
    f.write_text("0.001\n0.001\n")
    def max_latency(pipelined):
        return run("mmc", workload={
            "kind": "open", "arrival": "trace", "trace_file": str(f), "serial": True,
            "pipelined": pipelined, "client_turnaround_us": 5000.0,
            "service": "deterministic", "service_us": 1000.0},
            requests=10, warmup=0.0)["latency_us"]["max"]
    assert max_latency(False) == pytest.approx(1000.0 + 5000.0 + 1000.0, rel=1e-6)
    assert max_latency(True) == pytest.approx(2000.0, rel=1e-6)


@pytest.mark.parametrize("client_us, rate, server_cpus, client_cpus", [
    (40.0, 1e6 / 40, 30 / 40, 1.0),        # the client is the bottleneck: the server waits
    (20.0, 1e6 / 30, 1.0, 20 / 30),        # the server is: the client waits
])
def test_a_colocated_pipelined_client_bounds_the_loop_by_the_slower_side(
        client_us, rate, server_cpus, client_cpus):
    """By hand: one pipelined connection (8 in flight), a 30 us handler on the ideal
    machine (free system calls, no caches, no selector pass cost), a client thread
    paying client_us per request. The loop runs at 1 / max(30, client_us) per us;
    each side is busy its own cost over that period. The slower client makes the
    server park and be woken once per request (the Jetty 8 run: 0.867 CPUs, issue
    28)."""
    sc = warmcore.Scenario.load("pipeline").edit({
        "machine.preset": "ideal", "machine.cores": 4, "machine.governor": None,
        "workload.service": "deterministic", "workload.service_us": 30.0,
        "work.produce_us": 0.0, "workload.client_us": client_us,
        "strategy.params.select_us": 0.0}, strategy="pc", requests=4000)
    r = warmcore.simulate(sc)
    assert r.throughput_rps == pytest.approx(rate, rel=0.01)
    assert r.cpus_utilized == pytest.approx(server_cpus, rel=0.01)
    client_s = r.processes["producer"].task_clock_ms * 1e-3
    assert client_s / r.sim_seconds == pytest.approx(client_cpus, rel=0.01)
    if client_us > 30:
        assert r.context_switches / r.requests == pytest.approx(1.0, abs=0.01)


@pytest.mark.parametrize("client_us, rate, server_cpus", [
    (40.0, 1e6 / 40, 30 / 40),         # the client is the bottleneck: the server waits
    (20.0, 1e6 / 30, 1.0),             # the server is
])
def test_a_remote_pipelined_client_paces_the_loop_without_a_cpu_here(
        client_us, rate, server_cpus):
    """By hand, as the co-located case above: a 30 us handler, a client on another
    machine spending client_us a request (8 in flight). The loop runs at
    1 / max(30, client_us) per us and the server is busy its 30 us of each period,
    parking once per request when the client is slower; no thread of this machine
    runs the client (no process ``producer``)."""
    sc = warmcore.Scenario.load("pipeline").edit({
        "machine.preset": "ideal", "machine.cores": 4, "machine.governor": None,
        "workload.service": "deterministic", "workload.service_us": 30.0,
        "work.produce_us": 0.0, "workload.client_us": client_us,
        "workload.client_host": "remote", "strategy.params.select_us": 0.0},
        strategy="pc", requests=4000)
    r = warmcore.simulate(sc)
    assert r.throughput_rps == pytest.approx(rate, rel=0.01)
    assert r.cpus_utilized == pytest.approx(server_cpus, rel=0.01)
    assert "producer" not in r.processes
    if client_us > 30:
        assert r.context_switches / r.requests == pytest.approx(1.0, abs=0.01)


def test_a_remote_client_frees_the_package_clock_a_local_one_holds():
    """The Jetty 8 run's 1.94 GHz at 0.87 CPUs (issue 28): the same client turnaround
    on this machine keeps its CPU busy and, under per-CPU ondemand with the package
    at its busiest core's request (i7-3770), the clock at the top; on another
    machine the server's own load (about half of the top clock's cycles) sets it."""
    def ghz(host):
        sc = warmcore.Scenario.load("pipeline").edit(
            {"workload.client_us": 37.7, "workload.client_host": host},
            strategy="pc", requests=4000)
        return warmcore.simulate(sc).ghz
    assert ghz("server") == pytest.approx(3.4, rel=1e-3)
    assert ghz("remote") < 2.5


def test_a_remote_client_needs_its_turnaround():
    with pytest.raises(warmcore.ConfigError) as e:
        warmcore.Scenario.load("pipeline").edit({"workload.client_host": "remote"})
    assert e.value.field == "workload.client_host"


def test_a_colocated_client_is_refused_with_batches():
    sc = warmcore.Scenario.load("ewyk").edit({"workload.batches": [4, 2, 1]})
    with pytest.raises(warmcore.ConfigError) as e:
        sc.edit({"workload.client_us": 10.0})
    assert e.value.field == "workload.client_us"


def test_injected_events_on_serial_sources_run():
    """The inject kind has no client protocol to hold events back: with serial sources
    (one event of a source at a time in the server) it runs, every event answered.
    Found by tests/test_fuzz.py: it crashed looking for `pipelined`."""
    sc = warmcore.Scenario.load("lmax-latency").edit({"workload.serial": True},
                                                      strategy="abq", requests=300)
    r = warmcore.simulate(sc)
    assert r.requests == 300 and r.throughput_rps > 0


def test_program_call_from_an_empirical_list_blocks_only_above_zero():
    """A call step with distribution "empirical" draws its values (with replacement); a
    draw of 0 does not block (the EWYK handler's `if (delay > 0) Thread.sleep(delay)`).
    One ideal CPU, 10 us of compute then a call of 0 or 1000 us: about half the requests
    take 10 us and none of them blocks, the others 1010 us."""
    sets = ["workload.kind=\"closed\"", "workload.clients=1", "workload.think_us=100",
            "workload.service=\"deterministic\"", "workload.service_us=10",
            'work.program=[{compute_us=10.0}, {call_us=500.0, distribution="empirical", '
            'values_us=[0.0, 1000.0]}]']
    r = simulate_once(load("mmc", sets, requests=2000), 3)
    lat = r["latency_us"]
    assert lat["min"] == pytest.approx(10.0, rel=1e-6)
    assert lat["max"] == pytest.approx(1010.0, rel=1e-6)
    assert lat["mean"] == pytest.approx(510.0, rel=0.05)     # half of them block
    assert r["breakdown_us"]["blocked_io"] == pytest.approx(500.0, rel=0.05)


def test_a_call_drawn_as_zero_is_no_call_for_virtual_threads_either():
    """The request's program leaves out a call whose draw is 0, so no runner sees one: a
    virtual thread does not freeze and unmount for it. The fastest request of a program
    with a call of 0 or 1000 us takes exactly as long as one of the compute alone."""
    base = ["workload.kind=\"closed\"", "workload.clients=1", "workload.think_us=100",
            "workload.service=\"deterministic\"", "workload.service_us=10"]

    def fastest(program):
        sc = load("mmc", [*base, f"work.program={program}"], strategy="virtual-threads",
                  requests=400)
        return simulate_once(sc, 3)["latency_us"]["min"]

    alone = fastest("[{compute_us=10.0}]")
    with_zero = fastest('[{compute_us=10.0}, {call_us=500.0, distribution="empirical", '
                        'values_us=[0.0, 1000.0]}]')
    assert with_zero == pytest.approx(alone, rel=1e-9)


@pytest.mark.parametrize("step, field", [
    ('{call_us=5.0, values_us=[5.0]}', "values_us"),                       # not empirical
    ('{call_us=5.0, distribution="empirical"}', "values_us"),              # no values
    ('{call_us=5.0, distribution="empirical", values_us=[1.0, 3.0]}', "call_us"),  # mean 2
    ('{compute_us=1.0, distribution="empirical", values_us=[0.0, 2.0]}', "values_us"),
    ('{call_us=5.0, distribution="empirical", values_us=[5.0, nan]}', "values_us"),
])
def test_empirical_program_steps_are_validated(step, field):
    from warmcore.simcore.config import ConfigError
    with pytest.raises(ConfigError, match=field):
        load("mmc", [f"work.program=[{step}]"])


def _local_tool(clients, threads, client_us, think_us=0.0, cores=8, timeout_us=None):
    """The mmc machine (ideal CPUs: free system calls, no caches) serving closed
    clients with a deterministic 10 us service, their load tool on this machine."""
    sets = {"machine.cores": cores, "strategy.params.threads": cores}
    return run("mmc", sets, workload={
        "kind": "closed", "clients": clients, "think": "deterministic",
        "think_us": think_us, "service": "deterministic", "service_us": 10.0,
        "client_us": client_us, "client_threads": threads, "timeout_us": timeout_us},
        requests=4000, warmup=0.1)


@pytest.mark.parametrize("think_us", [0.0, 25.0])
def test_a_local_load_tool_adds_its_own_cpu_to_each_clients_cycle(think_us):
    """By hand: one client, one wrk thread spending 6 us a request (3 writing, 3
    reading), a 10 us service, think Z: the client's cycle is 6 + 10 + Z us and its
    latency, write to read, 16 us; the tool's thread is busy 6 us of each cycle."""
    r = _local_tool(clients=1, threads=1, client_us=6.0, think_us=think_us)
    cycle_s = (6.0 + 10.0 + think_us) * 1e-6
    assert r["throughput_rps"] == pytest.approx(1 / cycle_s, rel=1e-3)
    assert r["latency_us"]["mean"] == pytest.approx(16.0, rel=1e-6)
    tool_s = r["processes"]["producer"]["task_clock_ms"] * 1e-3
    assert tool_s / r["sim_seconds"] == pytest.approx(6e-6 / cycle_s, rel=0.01)


@pytest.mark.parametrize("threads, rate", [(1, 1e6 / 40), (2, 2e6 / 40)])
def test_a_local_load_tool_is_bounded_by_its_threads(threads, rate):
    """By hand: 8 clients, no think, a 10 us service on 8 CPUs, the tool spending
    40 us a request: each of its threads serves its clients one at a time, so the
    rate is threads / 40 us and each thread is busy all the time."""
    r = _local_tool(clients=8, threads=threads, client_us=40.0)
    assert r["throughput_rps"] == pytest.approx(rate, rel=0.01)
    tool_s = r["processes"]["producer"]["task_clock_ms"] * 1e-3
    assert tool_s / r["sim_seconds"] == pytest.approx(threads, rel=0.01)


def test_a_local_load_tool_shares_the_servers_cpus():
    """By hand: the same 8 clients and one 40 us tool thread on one CPU with the
    server: each request takes 40 + 10 us of that CPU, so 20,000 requests/s."""
    r = _local_tool(clients=8, threads=1, client_us=40.0, cores=1)
    assert r["throughput_rps"] == pytest.approx(1e6 / 50, rel=0.01)


def test_a_local_load_tool_times_out_and_sends_again_from_its_thread():
    """By hand: one client timing out after 5 us from its write (a 6 us tool: 3
    writing), a 10 us service: every request times out, its response is not read, and
    the client writes its next one at once, one every 5 us, none answered."""
    r = _local_tool(clients=1, threads=1, client_us=6.0, timeout_us=5.0)
    assert r["goodput_rps"] == 0.0 and r["requests"] == 0
    assert r["timed_out"] / r["sim_seconds"] == pytest.approx(1 / 5e-6, rel=1e-3)
