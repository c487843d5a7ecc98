"""LLC loads and LLC stores as perf counts them on Intel cores (issue 28): an L2 miss
is a demand data read (perf's LLC-loads / LLC-misses) unless the core's first access
to the line is a store, whose read for ownership perf counts as LLC-stores /
LLC-store-misses (Linux arch/x86/events/intel/core.c, snb_hw_cache_extra_regs:
C(LL) OP_READ = SNB_DMND_READ, OP_WRITE = SNB_DMND_WRITE). The model's footprints
say which of their lines are written first (Footprint.fresh: models.cache.Hierarchy,
"Loads and stores"). Every figure below is counted by hand."""

from __future__ import annotations

import pytest

import warmcore
from warmcore.simcore.work import (
    C_L1M,
    C_LLCL,
    C_LLCM,
    C_LLCS,
    C_LLCSM,
    SHARED,
    TASK,
    Footprint,
    Segment,
)
from tests.helpers import request_factory
from tests.test_hardware import machine


def _counts(c):
    return c[C_LLCL], c[C_LLCM], c[C_LLCS], c[C_LLCSM]


def test_a_fresh_footprint_splits_its_misses_into_reads_and_rfos():
    """Core 0 parses a new request: 64 lines, of which it reads 4 (the bytes on the
    wire) and writes 60 first (the objects it allocates). No cache holds any of them:
    64 L1d misses; 4 LLC loads that miss, 60 LLC stores that miss."""
    c = machine().execute(0, Segment(0, (Footprint(TASK, 1, 64.0, True, 60.0),)), "p", 0.0)
    assert c[C_L1M] == pytest.approx(64.0)
    assert _counts(c) == pytest.approx((4.0, 4.0, 60.0, 60.0))


def test_the_lines_written_first_are_the_cold_ones():
    """Core 0 (a client on the machine) wrote 4 lines of request 9; core 1 parses it
    (64 lines, 60 written first): the 4 read come core to core (LLC loads, no miss),
    the 60 allocated are new to every cache (stores that miss) -- not 60/64 of each."""
    m = machine()
    m.execute(0, Segment(0, (Footprint(TASK, 9, 4.0, True),)), "client", 0.0)
    c = m.execute(1, Segment(0, (Footprint(TASK, 9, 64.0, True, 60.0),)), "server", 1e-6)
    assert _counts(c) == pytest.approx((4.0, 0.0, 60.0, 60.0))


def test_a_reader_on_another_core_makes_loads_of_what_was_stored():
    """The parsed request (64 lines, 60 written first on core 0) is read by a consumer
    on core 1 (no fresh lines): all 64 are L2 misses that are demand reads, served by
    core 0's caches inside the LLC domain: 64 LLC loads, no miss, no store."""
    m = machine()
    m.execute(0, Segment(0, (Footprint(TASK, 3, 64.0, True, 60.0),)), "parser", 0.0)
    c = m.execute(1, Segment(0, (Footprint(TASK, 3, 64.0, False),)), "handler", 1e-6)
    assert _counts(c) == pytest.approx((64.0, 0.0, 0.0, 0.0))


def test_lines_already_held_make_no_rfo():
    """The same core writes its 64 lines again: they are in its L1, no L2 miss, so no
    LLC load or store whatever ``fresh`` says."""
    m = machine()
    fp = (Footprint(SHARED, "buf", 64.0, True, 64.0),)
    m.execute(0, Segment(0, fp), "t", 0.0)
    c = m.execute(0, Segment(0, fp), "t", 1e-6)
    assert _counts(c) == pytest.approx((0.0, 0.0, 0.0, 0.0), abs=1e-9)  # decay in 1 us


@pytest.mark.parametrize("fresh", [0.0, 10.0, 64.0, 200.0])
def test_loads_and_stores_add_up_to_the_l2_misses_of_before(fresh):
    """However many lines are written first, loads + stores are the L2 misses and
    misses + store misses the LLC misses that a footprint without fresh lines makes
    (the split moves counts, never time); more fresh lines than lines: all stores."""
    def run(f):
        m = machine()
        m.execute(0, Segment(0, (Footprint(TASK, 5, 24.0, True),)), "w", 0.0)
        return m.execute(2, Segment(0, (Footprint(TASK, 5, 64.0, True, f),)), "r", 1e-6)

    plain, split = run(0.0), run(fresh)
    assert split[C_LLCL] + split[C_LLCS] == pytest.approx(plain[C_LLCL])
    assert split[C_LLCM] + split[C_LLCSM] == pytest.approx(plain[C_LLCM])
    assert split[:5] == pytest.approx(plain[:5])        # duration, cycles, ..., L1d misses
    assert split[C_LLCS] == pytest.approx(min(fresh, 64.0))


def test_the_parser_writes_the_parsed_request_first_and_reads_the_bytes():
    """pipeline: task_kib 4 (64 lines), request_kib 0.2 (3.2 lines on the wire): the
    produce segment's task has 60.8 fresh lines, the consumer's none. A task smaller
    than the request is all bytes read: no fresh line."""
    req = request_factory({}).make(0.0)
    assert req.produce.footprint[0] == Footprint(TASK, 0, 64.0, True, 60.8)
    assert req.consume.footprint[0] == Footprint(TASK, 0, 64.0, False, 0.0)
    small = request_factory({"work.task_kib": 0.1, "work.request_kib": 0.2}).make(0.0)
    assert small.produce.footprint[0].fresh == 0.0


def test_results_and_the_perf_view_report_llc_stores():
    """A run's result carries llc_stores and llc_store_misses (pipeline pc: the
    parsed request's 60.8 lines per request, all from DRAM), and `warmcore run`
    prints them as perf stat does."""
    from warmcore.calibration.fit import FIGURES

    sc = warmcore.Scenario.load("pipeline").edit({}, strategy="pc", requests=1000)
    r = warmcore.simulate(sc)
    assert FIGURES["llc_stores_per_req"](r) == pytest.approx(60.8, abs=0.01)
    assert FIGURES["llc_store_misses_per_req"](r) == pytest.approx(60.8, abs=0.01)
    assert r.to_dict()["llc_stores"] == r.llc_stores


PERF = """ Performance counter stats for process id '42':
      1000.000000 task-clock        #    1.000 CPUs utilized
        2,000,000 LLC-loads
          500,000 LLC-misses
        6,000,000 LLC-stores
        1,000,000 LLC-store-misses
      1.000000000 seconds time elapsed
"""


def test_a_perf_file_gives_llc_stores_per_request(tmp_path):
    """perf's LLC-stores and LLC-store-misses over 1,000 requests: 6,000 and 1,000 a
    request, beside LLC-loads' 2,000."""
    from warmcore.calibration.perf_figures import figures_from_perf

    path = tmp_path / "run.perf.txt"
    path.write_text(PERF)
    figs = figures_from_perf(path, requests=1000, elapsed_s=1.0)
    assert figs["llc_loads_per_req"].value == pytest.approx(2000.0)
    assert figs["llc_stores_per_req"].value == pytest.approx(6000.0)
    assert figs["llc_store_misses_per_req"].value == pytest.approx(1000.0)


def test_a_handoff_moves_loads_not_stores():
    """pipeline, pc against jetty9-milestone: both parse the same requests, so both
    store the same 60.8 fresh lines a request; the milestone's handler reads the
    parsed request (and the connection) from the parser's core when they differ, which
    are LLC loads (87.2 against pc's 3.2: docs/model.md "LLC loads and LLC stores")."""
    def per_req(strategy):
        sc = warmcore.Scenario.load("pipeline").edit({}, strategy=strategy, requests=3000)
        r = warmcore.simulate(sc)
        return r.llc_loads / r.requests, r.llc_stores / r.requests

    pc, j9 = per_req("pc"), per_req("jetty9-milestone")
    assert pc[1] == pytest.approx(60.8, abs=0.01) and j9[1] == pytest.approx(60.8, abs=0.01)
    assert pc[0] == pytest.approx(3.2, abs=0.01)
    assert j9[0] > 20 * pc[0]
