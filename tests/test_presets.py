"""Every preset is self-consistent, sourced, and has the published figures it claims."""

from __future__ import annotations

from itertools import pairwise

import pytest

from warmcore.models.dvfs import GOVERNORS
from warmcore.models.energy import dynamic_power_w, static_power_w
from warmcore.models.presets import IDEAL, PRESETS, Preset, get_preset, with_overrides

REQUIRED = {"ideal", "i7-3770", "i7-920", "i5-2400", "i9-7960x", "t1000", "laptop-2007",
            "core2-quad", "xeon-sp", "epyc-zen3", "vm-2vcpu", "server-2015"}
ALL = sorted(PRESETS)


def test_required_presets_present():
    assert set(PRESETS) >= REQUIRED


def test_ideal_unchanged():
    assert Preset(
        name="ideal",
        description="Queueing-theory machine: fixed CPI, no caches, switch or contention costs",
        sources=("by definition",), threads_per_core=1, pstates_ghz=(1.0,),
        ctx_switch_us=0.0, futex_wake_us=0.0, wake_latency_idle_us=0.0, wake_latency_busy_us=0.0,
    ) == IDEAL
    assert PRESETS["ideal"] is IDEAL


@pytest.mark.parametrize("name", ALL)
def test_identity_and_sources(name):
    p = PRESETS[name]
    assert p.name == name and get_preset(name) is p
    assert p.description
    assert len(p.sources) >= 1 and all(isinstance(s, str) and s.strip() for s in p.sources)


@pytest.mark.parametrize("name", ALL)
def test_topology(name):
    p = PRESETS[name]
    assert min(p.sockets, p.cores_per_socket, p.threads_per_core, p.llc_domains_per_socket) >= 1
    assert p.n_cpus == p.sockets * p.cores_per_socket * p.threads_per_core
    assert p.cores_per_socket % p.llc_domains_per_socket == 0


@pytest.mark.parametrize("name", ALL)
def test_clocks_and_governor(name):
    p = PRESETS[name]
    ps = p.pstates_ghz
    assert len(ps) >= 1 and ps[0] > 0
    assert all(a < b for a, b in pairwise(ps)), "P-states must be strictly ascending"
    assert p.turbo_ghz is None or p.turbo_ghz > ps[-1]
    assert p.min_ghz == ps[0] and p.max_ghz == ps[-1]        # turbo off by default
    assert p.freq_domain in ("core", "package")
    assert p.default_governor in GOVERNORS
    assert p.transition_latency_us >= 0


@pytest.mark.parametrize("name", ALL)
def test_smt_curve(name):
    s = PRESETS[name].smt_throughput
    assert len(s) == PRESETS[name].threads_per_core
    assert s[0] == 1.0
    assert all(a <= b for a, b in pairwise(s)), "total throughput must not fall"
    per_thread = [x / k for k, x in enumerate(s, start=1)]
    assert all(a >= b for a, b in pairwise(per_thread))
    assert all(x <= k for k, x in enumerate(s, start=1))


@pytest.mark.parametrize("name", ALL)
def test_caches_and_latencies(name):
    p = PRESETS[name]
    for kib, ways in ((p.l1d_kib, p.l1d_ways), (p.l2_kib, p.l2_ways),
                      (p.llc_mib * 1024, p.llc_ways)):
        sets = kib * 1024 / (p.line_bytes * ways)
        assert sets >= 1 and sets == int(sets), "size must be a whole number of sets"
    assert p.l1d_kib <= p.l2_kib <= p.llc_mib * 1024
    assert p.l1_lat_cyc <= p.l2_lat_cyc <= p.llc_lat_cyc
    llc_ns = p.llc_lat_cyc / p.pstates_ghz[-1]
    assert p.dram_ns > llc_ns
    assert 1.0 <= p.mlp <= 10
    assert p.c2c_smt_ns <= p.c2c_llc_ns <= p.c2c_cross_llc_ns <= p.c2c_socket_ns
    assert p.mem_bw_gbs > 0 and p.mem_channels >= 1 and p.base_ipc > 0


@pytest.mark.parametrize("name", ALL)
def test_os_costs_and_power(name):
    p = PRESETS[name]
    for v in (p.ctx_switch_us, p.futex_wake_us, p.wake_latency_idle_us, p.wake_latency_busy_us,
              p.static_w_per_core, p.package_static_w, p.dyn_w_per_core_max):
        assert v >= 0
    assert 0 < p.v_min <= p.v_max


@pytest.mark.parametrize("name", [n for n in ALL if PRESETS[n].tdp_w])
def test_power_is_tdp_consistent(name):
    # all cores busy at the highest non-turbo P-state: 60-100 % of the TDP
    p = PRESETS[name]
    cores = p.sockets * p.cores_per_socket
    watts = static_power_w(p) + cores * dynamic_power_w(p, p.pstates_ghz[-1])
    assert 0.6 <= watts / (p.tdp_w * p.sockets) <= 1.0


@pytest.mark.parametrize("name, cpus, tpc, pstates, llc_mib, gov", [
    ("i7-3770", 8, 2, (1.6, 3.4), 8, "ondemand"),
    ("i7-920", 8, 2, (1.6, 2.667), 8, "ondemand"),
    ("i5-2400", 4, 1, (1.6, 3.1), 6, "ondemand"),
    ("i9-7960x", 32, 2, (1.2, 2.8), 22, "schedutil"),
    ("t1000", 32, 4, (1.0, 1.0), 3, "performance"),
    ("laptop-2007", 1, 1, (0.8, 2.0), 2, "ondemand"),
    ("core2-quad", 4, 1, (1.6, 2.4), 4, "ondemand"),
    ("xeon-sp", 40, 2, (1.0, 2.4), 27.5, "performance"),
    ("epyc-zen3", 64, 2, (1.5, 2.6), 32, "schedutil"),
    ("vm-2vcpu", 2, 2, (2.25, 2.25), 32, "performance"),
    ("server-2015", 48, 2, (1.2, 2.3), 30, "performance"),
])
def test_published_figures(name, cpus, tpc, pstates, llc_mib, gov):
    p = PRESETS[name]
    assert p.n_cpus == cpus and p.threads_per_core == tpc
    assert (p.pstates_ghz[0], p.pstates_ghz[-1]) == pstates
    assert p.llc_mib == llc_mib and p.default_governor == gov


def test_specific_topologies():
    ivb = PRESETS["i7-3770"]
    assert ivb.turbo_ghz == 3.9 and len(ivb.pstates_ghz) == 19 and ivb.freq_domain == "package"
    assert with_overrides(ivb, turbo=True).max_ghz == 3.9
    assert PRESETS["core2-quad"].llc_domains_per_socket == 2
    zen = PRESETS["epyc-zen3"]
    assert zen.cores_per_socket // zen.llc_domains_per_socket == 8      # 8 cores per CCX
    assert zen.c2c_cross_llc_ns > 3 * zen.c2c_llc_ns
    t1 = PRESETS["t1000"]
    # one single-issue pipe per 4 threads: stall-free threads share it (models/smt.py)
    assert t1.smt_policy == "fine-grained" and t1.smt_throughput == (1.0, 1.0, 1.0, 1.0)
    assert t1.llc_domains_per_socket == 1 and t1.cores_per_socket == 8
    assert PRESETS["server-2015"].sockets == 2
    assert len(PRESETS["vm-2vcpu"].pstates_ghz) == 1                    # guests can't DVFS
    big = ("i7-3770", "i9-7960x", "xeon-sp", "epyc-zen3", "server-2015")
    assert all(PRESETS[n].smt_throughput == (1.0, 1.25) for n in big)


def test_get_preset_unknown_lists_names():
    with pytest.raises(KeyError, match="i7-3770"):
        get_preset("pentium-4")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_passes_the_override_checks(name):
    from warmcore.models.presets import check_preset

    check_preset(PRESETS[name])

