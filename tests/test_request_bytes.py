"""Where a request's bytes come from, a reused working set beyond L2, and IPC against
the clock (issue 28 item 3; docs/model.md "Where a request's bytes come from" and "A
reused working set beyond L2"). Each figure is computed by hand below."""

from __future__ import annotations

import pytest

import warmcore
from warmcore.models.hardware import HardwareMachine
from warmcore.models.presets import get_preset, with_overrides
from warmcore.simcore.work import (
    C_COHER,
    C_CYC,
    C_INS,
    C_LLCL,
    C_LLCM,
    C_RELOAD,
    SHARED,
    TASK,
    Footprint,
    Segment,
)
from tests.helpers import request_factory
from tests.test_hardware import TEST, machine

LINE = 64
TASK_LINES = 4.0 * 1024 / LINE          # pipeline's task_kib 4
SENT_LINES = 0.2 * 1024 / LINE          # request_kib 0.2: 3.2 lines on the wire


def pipeline(sets: dict, requests: int = 1500):
    """(result, LLC loads, LLC misses, LLC stores, LLC store misses per request) of the
    server process."""
    sc = warmcore.Scenario.load("pipeline").edit(sets, strategy="pc", requests=requests)
    r = warmcore.simulate(sc)
    srv = r.processes["server"]
    n = r.requests
    return (r, srv.llc_loads / n, srv.llc_misses / n, srv.llc_stores / n,
            srv.llc_store_misses / n)


# ------------------------------------------------------------------ (a) the bytes' source
# Of the 64 fresh task lines the parse reads the 3.2 on the wire (demand reads: perf's
# LLC-loads) and writes the other 60.8 first (the parsed request it allocates: demand
# RFOs, perf's LLC-stores; models.cache.Hierarchy "Loads and stores").
PARSED_LINES = TASK_LINES - SENT_LINES


def test_a_load_tool_off_the_machine_without_ddio_leaves_every_task_line_to_dram():
    """The i7-3770 has no DDIO (a client part): the NIC's DMA wrote DRAM, so all 64
    lines of the fresh task miss the LLC: the 3.2 read are 3.2 LLC loads that miss,
    the 60.8 written first 60.8 LLC stores that miss."""
    _, loads, misses, stores, store_misses = pipeline({})
    assert loads == pytest.approx(SENT_LINES, abs=0.01)
    assert misses == pytest.approx(SENT_LINES, abs=1e-6)
    assert stores == pytest.approx(PARSED_LINES, abs=0.01)
    assert store_misses == pytest.approx(PARSED_LINES, abs=1e-6)


def test_with_ddio_the_nic_writes_the_request_bytes_into_the_llc():
    """DDIO on (the override a Xeon E5 has by default): the 3.2 lines on the wire are
    in the LLC when the server reads them (3.2 loads, no miss); the other 60.8 of the
    task (the parsed request, allocated fresh) still come from DRAM, as stores."""
    _, loads, misses, stores, store_misses = pipeline({"machine.overrides.extra.ddio": True})
    assert loads == pytest.approx(SENT_LINES, abs=0.01)
    assert misses == pytest.approx(0.0, abs=1e-6)
    assert stores == pytest.approx(PARSED_LINES, abs=0.01)
    assert store_misses == pytest.approx(PARSED_LINES, abs=1e-6)


def test_a_client_on_the_machine_writes_the_bytes_the_server_reads():
    """client_us set: the client's write copies the 3.2 request lines on its own core
    (loopback's cached copy); the server's read finds them there or in the LLC: 3.2
    LLC loads and no miss per request; the parsed request's 60.8 lines are stores
    that miss."""
    r, loads, misses, stores, store_misses = pipeline({"workload.client_us": 40.0})
    assert loads == pytest.approx(SENT_LINES, abs=0.01)
    assert misses == pytest.approx(0.0, abs=1e-6)
    assert stores == pytest.approx(PARSED_LINES, abs=0.01)
    assert store_misses == pytest.approx(PARSED_LINES, abs=1e-6)


def test_a_read_of_lines_the_client_core_still_holds_is_a_transfer_not_a_miss():
    """Machine level: core 0 (the client) writes 4 lines of request 9; core 1 (the
    server, same LLC domain) reads 64 lines of it: 4 come core to core at c2c_llc_ns
    (40 ns, / mlp 2), the other 60 from DRAM; 64 LLC loads, 60 misses."""
    m = machine()
    m.execute(0, Segment(0, (Footprint(TASK, 9, 4.0, True),)), "client", 0.0)
    c = m.execute(1, Segment(0, (Footprint(TASK, 9, 64.0, True),)), "server", 1e-6)
    assert c[C_LLCL] == pytest.approx(64.0)
    assert c[C_LLCM] == pytest.approx(60.0)
    assert c[C_COHER] == pytest.approx(4 * 40e-9 / 2)


def test_dma_write_fills_the_llc_only_with_ddio():
    """By hand on the test machine (LLC 42 cycles at 3 GHz, DRAM 80 ns, mlp 2): 10 of
    64 lines DMA-written into the LLC are LLC hits for the first reader, the rest DRAM:
    reload = (10 x 38 cycles / 3 GHz + 54 x 80 ns) / 2 on CPU 1 (socket 0's first LLC
    domain, where the NIC writes). Without DDIO, 64 misses."""
    for ddio, misses in ((True, 54.0), (False, 64.0)):
        m = machine(preset=with_overrides(TEST, extra={"ddio": ddio}))
        m.dma_write(TASK, 5, 10.0)
        c = m.execute(1, Segment(0, (Footprint(TASK, 5, 64.0, True),)), "t", 0.0)
        assert c[C_LLCL] == pytest.approx(64.0)
        assert c[C_LLCM] == pytest.approx(misses)
        hits = 64.0 - misses
        assert c[C_RELOAD] == pytest.approx((hits * 38 / 3e9 + misses * 80e-9) / 2)


def test_ddio_is_on_the_xeons_and_off_on_client_parts():
    assert get_preset("xeon-sp").extra.ddio and get_preset("server-2015").extra.ddio
    for name in ("i7-3770", "i5-2400", "i7-920", "i9-7960x", "epyc-zen3"):
        assert not get_preset(name).extra.ddio, name


# ------------------------------------------------------------------ (b) read-mostly data
def test_read_mostly_data_is_one_copy_every_core_reads_from_the_llc():
    """100 lines of read-mostly data read on core 0 then on core 1: core 1 misses its
    own L1 and L2 and hits the shared LLC for all 100 (no writer: no transfer): 100
    LLC loads, 0 misses, no coherence time. The same lines *written* on core 0 (a
    connection's state) come core to core instead."""
    m = machine()
    data = Footprint(SHARED, "read-mostly", 100.0, False)
    m.execute(0, Segment(0, (data,)), "a", 0.0)
    c = m.execute(1, Segment(0, (data,)), "b", 1e-6)
    assert (c[C_LLCL], c[C_LLCM], c[C_COHER]) == pytest.approx((100.0, 0.0, 0.0))
    assert c[C_RELOAD] == pytest.approx(100 * 38 / 3e9 / 2)
    written = Footprint(SHARED, ("conn", 0), 100.0, True)
    m.execute(0, Segment(0, (written,)), "a", 2e-6)
    w = m.execute(1, Segment(0, (written,)), "b", 3e-6)
    assert w[C_COHER] == pytest.approx(100 * 40e-9 / 2)


def test_data_kib_is_read_by_the_handler_only():
    req = request_factory({"work.data_kib": 64.0}).make(0.0)
    data = [f for f in req.consume.footprint if f.key == "read-mostly"]
    assert data == [Footprint(SHARED, "read-mostly", 1024.0, False)]
    assert not [f for f in req.produce.footprint if f.key == "read-mostly"]


def test_a_working_set_beyond_l2_makes_llc_loads_that_hit():
    """pipeline pc with 512 KiB of read-mostly data (twice the i7-3770's 256 KiB L2,
    1/16 of its 8 MiB LLC): thousands of LLC loads a request, and still only the 3.2
    load misses of the request's bytes (the parsed request's 60.8 are stores): the LLC
    holds the data between requests."""
    _, loads, misses, _, _ = pipeline({"work.data_kib": 512.0})
    assert loads > 1000
    assert misses == pytest.approx(SENT_LINES, abs=0.5)


ONLY_DATA = {"work.task_kib": 0.0, "work.thread_kib": 0.0, "work.code_kib": 0.0,
             "work.conn_kib": 0.0, "work.shared_kib": 0.0, "run.warmup": 0.0}


def test_a_request_reads_one_random_part_of_the_read_mostly_data():
    """data_kib 64 read 16 KiB at a time: 4 parts of 256 lines, one per request, drawn
    from a stream of its own. Over 400 requests each part is read (the chance one is
    missed is 4 x (3/4)^400), and each comes once from DRAM: its 256 misses, then
    the 8 MiB LLC holds it, whichever part the next request reads. The misses are
    exactly 4 x 256 beyond those of the same run without the data."""
    def misses(sets):
        sc = warmcore.Scenario.load("pipeline").edit({**ONLY_DATA, **sets}, strategy="pc",
                                                     requests=400)
        return warmcore.simulate(sc).llc_misses
    base = misses({})
    assert misses({"work.data_kib": 64.0, "work.data_read_kib": 16.0}) - base == 4 * 256
    assert misses({"work.data_kib": 64.0}) - base == 1024      # all of it: the same lines
    assert misses({"work.data_kib": 16.0, "work.data_read_kib": 16.0}) - base == 256


def test_parts_beyond_l2_are_llc_loads_that_hit():
    """4 MiB read 16 KiB (256 lines) at a time: 256 parts, so a part comes back about
    256 requests after its last read, when the 256 KiB L2 has long refilled and the
    8 MiB LLC still holds it. Once every part has been read (the warm-up: about 256 x
    ln 256 = 1,420 requests), nearly all of a request's 256 lines are LLC loads that
    hit; all 4 MiB read by every request would instead be 65,536 lines (the test
    above's `data_kib` alone)."""
    sc = warmcore.Scenario.load("pipeline").edit(
        {**ONLY_DATA, "work.data_kib": 4096.0, "work.data_read_kib": 16.0,
         "run.warmup": 0.5}, strategy="pc", requests=6000)
    r = warmcore.simulate(sc)
    loads, misses = r.llc_loads / r.requests, r.llc_misses / r.requests
    assert 0.9 * 256 < loads < 256 + 8            # (a few lines of the sockets' own)
    assert misses < 0.05 * 256


@pytest.mark.parametrize("read", [0.0, 65.0, float("nan")])
def test_a_read_part_outside_the_data_is_refused_naming_the_field(read):
    with pytest.raises(warmcore.ConfigError) as e:
        warmcore.Scenario.load("pipeline").edit({"work.data_kib": 64.0,
                                                 "work.data_read_kib": read})
    assert e.value.field == "work.data_read_kib"


def test_data_kib_is_a_calibration_parameter():
    from warmcore.params import parameter
    p = parameter(warmcore.Scenario.load("pipeline"), "work.data_kib")
    assert p.unit == "KiB" and p.ge == 0


def test_a_negative_data_kib_is_refused_naming_the_field():
    with pytest.raises(warmcore.ConfigError) as e:
        warmcore.Scenario.load("pipeline").edit({"work.data_kib": -1.0})
    assert e.value.field == "work.data_kib"


# ------------------------------------------------------------------ (c) IPC and the clock
def test_ipc_rises_as_the_clock_falls_by_the_dram_stall_in_nanoseconds():
    """3e4 instructions at base IPC 1 over 1000 cold lines (80 ns each, mlp 2: 40 us
    of DRAM stall): cycles = 3e4 + 40e-6 x f, so IPC = 3e4 / (3e4 + 4e4) = 0.4286 at
    1 GHz and 3e4 / (3e4 + 1.2e5) = 0.2 at 3 GHz."""
    def ipc(ghz):
        m = HardwareMachine(TEST, effects={"energy": False, "membus": False},
                            governor="userspace", userspace_ghz=ghz)
        c = m.execute(0, Segment(3e4, (Footprint(TASK, 1, 1000.0),)), "t", 0.0)
        return c[C_INS] / c[C_CYC]

    assert ipc(1.0) == pytest.approx(3e4 / (3e4 + 4e4))
    assert ipc(3.0) == pytest.approx(3e4 / (3e4 + 1.2e5))
