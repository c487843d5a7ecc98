"""PARAMS.toml: what a calibration found, readable by a person and by
``warmcore predict`` / ``run --params``. It records the fitted values with their
95% intervals, the fit's unit-box optimum and covariance (for prediction
intervals), the spec it came from (its digest and measurements), the sha256 of
every data file and the warmcore version."""

from __future__ import annotations

import math
from pathlib import Path

import tomli_w

import warmcore
from warmcore.simcore.config import ConfigError, parse_toml, read_text

REQUIRED = ("values", "fit", "unit_optimum", "unit_cov")


def params_document(cal) -> dict:
    from warmcore.calibration.fit import METHOD, spec_hashes

    spec = cal.spec
    return {
        "warmcore_version": warmcore.__version__,
        "method": METHOD,
        "spec_digest": spec.digest(),
        "measurements": [m.name for m in spec.measurement],
        "spec": spec.model_dump(mode="json", exclude_none=True),   # the whole spec it came from
        "data_sha256": spec_hashes(spec),
        "seeds": list(spec.run.seeds),
        "evaluations": cal.evaluations,
        "condition_number": cal.condition_number if cal.condition_number < 1e300 else 1e300,
        "warnings": list(cal.warnings),
        "values": dict(cal.values),
        "ci95": {k: list(v) for k, v in cal.ci95.items()},
        "fit": [f.model_dump() for f in spec.fit],
        "unit_optimum": list(cal.unit_optimum),
        "unit_cov": [list(row) for row in cal.unit_cov],
    }


def write_params(cal, path: str | Path) -> None:
    text = ("# warmcore calibration: fitted parameters (docs/calibration.md)\n"
            + tomli_w.dumps(params_document(cal)))
    tmp = Path(f"{path}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def load_params(path: str | Path) -> dict:
    return check_params(read_text(path, "--params"), str(path))


def check_params(text: str, name: str) -> dict:
    """The PARAMS.toml document in ``text`` (``name`` for messages)."""
    doc = parse_toml(text, f"--params: {name}")
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise ConfigError("--params", f"{name}: not a warmcore PARAMS.toml (no "
                          f"{', '.join(missing)})")
    if not isinstance(doc["values"], dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in doc["values"].values()):
        raise ConfigError("--params", f"{name}: values must be finite numbers")
    return doc


def apply_params(sc: warmcore.Scenario, params: dict) -> warmcore.Scenario:
    """The scenario with the fitted values (whole numbers where the parameter is)."""
    space = {p.path: p for p in warmcore.parameters(sc)}
    changes = {}
    for path, v in params["values"].items():
        if path not in space:
            raise ConfigError("--params", f"{path} is not a parameter of scenario {sc.name!r}")
        changes[path] = round(v) if space[path].type == "int" else float(v)
    return sc.with_(changes)
