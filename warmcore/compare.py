"""Comparing strategies on one scenario, and sweeping the offered load.

Every strategy runs the same scenario with the same seed, so they see the same
arrivals and service demands (common random numbers): differences between rows
come from the strategies, not from the dice.
"""

from __future__ import annotations

import math

from warmcore.simcore.config import ConfigError, Scenario
from warmcore.build import simulate

COLUMNS = [
    # key, header, format
    ("strategy", "strategy", "{:<22}"),
    ("load", "load", "{:>9}"),
    ("throughput_rps", "req/s", "{:>11,.0f}"),
    ("p50_us", "p50 us", "{:>9,.1f}"),
    ("p99_us", "p99 us", "{:>10,.1f}"),
    ("max_us", "max us", "{:>10,.1f}"),
    ("cpus", "CPUs", "{:>6.2f}"),
    ("cpu_us_per_req", "CPU us/req", "{:>10.2f}"),
    ("ipc", "IPC", "{:>5.2f}"),
    ("ghz", "GHz", "{:>5.2f}"),
    ("llc_loads_per_req", "LLC ld/req", "{:>10.1f}"),
    ("migrations_per_req", "migr/req", "{:>8.3f}"),
    ("switches_per_req", "cs/req", "{:>7.3f}"),
    ("uj_per_req", "uJ/req", "{:>8.1f}"),
    ("rps_per_cpu", "req/s/CPU", "{:>10,.0f}"),
]


def summarise(strategy: str, load, r: dict) -> dict:
    """One comparison row from a result."""
    n = max(r["requests"], 1)
    cpus = r["cpus_utilized"]
    return {
        "strategy": strategy,
        "load": load,
        "throughput_rps": r["throughput_rps"],
        "p50_us": r["latency_us"]["p50"],
        "p99_us": r["latency_us"]["p99"],
        "max_us": r["latency_us"]["max"],
        "cpus": cpus,
        "cpu_us_per_req": r["task_clock_ms"] * 1e3 / n,
        "ipc": r["ipc"],
        "ghz": r["ghz"],
        "llc_loads_per_req": r["llc_loads"] / n,
        "migrations_per_req": r["cpu_migrations"] / n,
        "switches_per_req": r["context_switches"] / n,
        "uj_per_req": r["joules_per_request"] * 1e6,
        "rps_per_cpu": r["throughput_rps"] / cpus if cpus > 0 else math.nan,
        "drained": r["drained"],
    }


def load_field(cfg: Scenario) -> str:
    """What --load sets: the open-loop rate or the number of closed-loop clients."""
    kind = cfg.workload.kind
    if kind in ("open", "connections", "stream"):
        return "rate_per_s"
    if kind == "closed":
        return "clients"
    if kind == "saturating":
        return "connections"
    if kind == "batch":
        return "jobs"
    raise ConfigError("--load", f"workload kind {kind!r} has no load to sweep")


def with_strategy(cfg: Scenario, name: str, load=None) -> Scenario:
    data = cfg.model_dump()
    data["strategy"] = {"name": name, "params": dict(cfg.strategy.params)
                        if name == cfg.strategy.name else {}}
    if load is not None:
        field = load_field(cfg)
        data["workload"][field] = int(load) if field != "rate_per_s" else float(load)
    return Scenario.model_validate(data)


def compare(cfg: Scenario, strategies: list[str], loads: list[float] | None = None,
            progress=None) -> list[dict]:
    """Rows for every strategy (and every load, if given), in that order."""
    rows = []
    for name in strategies:
        for load in (loads or [None]):
            r = simulate(with_strategy(cfg, name, load))
            rows.append(summarise(name, load if load is not None else "-", r))
            if progress:
                progress(rows[-1])
    return rows


def knee(rows: list[dict]) -> float | None:
    """The knee of one strategy's latency-vs-load curve: the last load before p99
    latency passes twice its value at the lightest load ("latency doubles"), or
    throughput falls below 95% of the offered load (a saturated open loop). None if
    it never bends."""
    base = rows[0]["p99_us"]
    prev = None
    for row in rows:
        load = row["load"]
        saturated = isinstance(load, float) and row["throughput_rps"] < 0.95 * load
        if row["p99_us"] > 2 * base or saturated or not row["drained"]:
            return prev
        prev = load
    return None


def format_table(rows: list[dict]) -> str:
    head = " ".join(fmt.replace(",.0f", "").replace(",.1f", "").replace(".2f", "")
                    .replace(".1f", "").replace(".3f", "").format(h)
                    for _, h, fmt in COLUMNS)
    lines = [head]
    for row in rows:
        cells = []
        for key, _, fmt in COLUMNS:
            v = row[key]
            if isinstance(v, float) and not math.isfinite(v):
                cells.append(_blank(fmt).format("-"))
            elif key == "load" and not isinstance(v, str):
                cells.append(fmt.format(f"{v:g}"))
            else:
                cells.append(fmt.format(v))
        lines.append(" ".join(cells))
    return "\n".join(lines)


def _blank(fmt: str) -> str:
    width = "".join(ch for ch in fmt.split(":")[1].split(".")[0] if ch.isdigit())
    align = "<" if "<" in fmt else ">"
    return "{:" + align + width + "}"
