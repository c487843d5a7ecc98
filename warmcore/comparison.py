"""Comparing strategies on one scenario, and sweeping the offered load: the table,
the load knob and the knee (``warmcore.compare`` in warmcore.api runs them).

Every strategy runs the same scenario with the same seed, so they see the same
arrivals and service demands (common random numbers): differences between rows
come from the strategies, not from the dice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from warmcore.simcore.config import WORKLOADS, ConfigError, Scenario, kind_of

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
# Shown when some client was refused or timed out (Result.per_request, has_outcomes).
OUTCOME_COLUMNS = [
    ("arrived_rps", "arrived/s", "{:>11,.0f}"),
    ("goodput_rps", "goodput/s", "{:>11,.0f}"),
    ("rejected_pct", "rejected%", "{:>9.2f}"),
    ("timed_out_pct", "timed out%", "{:>10.2f}"),
]


def load_field(cfg: Scenario) -> str:
    """What --load sets: the workload kind's load field (an open loop's rate, the
    number of closed-loop clients...: simcore/config/kinds.py)."""
    field = kind_of(cfg.workload).load_field
    if field is None:
        raise ConfigError("--load", f"workload kind {cfg.workload.kind!r} has no load to sweep")
    return field


def load_fields() -> list[str]:
    """Every field an offered load sets, over the registered workload kinds (in the
    order of their names, each once)."""
    return list(dict.fromkeys(k.load_field for k in WORKLOADS if k.load_field))


def with_strategy(cfg: Scenario, name: str, load=None, keep: Sequence[str] = ()) -> Scenario:
    """``cfg`` run by strategy ``name`` (the scenario's tunables kept only if it is the
    scenario's strategy, or if named in ``keep``), at offered ``load`` if given."""
    changes = {}
    if load is not None:
        field = load_field(cfg)
        changes[f"workload.{field}"] = float(load) if field == "rate_per_s" else int(load)
    return cfg.with_(changes, strategy=name, keep=keep)


def knee(rows: list[dict]) -> float | None:
    # rows: Result.per_request() of one strategy, in load order
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
    from warmcore.result import has_outcomes

    columns = COLUMNS + OUTCOME_COLUMNS if has_outcomes(rows) else COLUMNS
    head = " ".join(fmt.replace(",.0f", "").replace(",.1f", "").replace(".2f", "")
                    .replace(".1f", "").replace(".3f", "").format(h)
                    for _, h, fmt in columns)
    lines = [head]
    for row in rows:
        cells = []
        for key, _, fmt in columns:
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
