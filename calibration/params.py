"""PARAMS.toml: what a calibration found, readable by a person and by
``warmcore predict`` / ``run --params``. It records the fitted values with their
95% intervals, the fit's unit-box optimum and covariance (for prediction
intervals), the spec it came from (its digest and measurements), the sha256 of
every data file and the warmcore version."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import numpy as np
import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

import warmcore
from warmcore.calibration.fit import MAX_FIT, MAX_SEEDS, FitParam, Seed, check_fit_bounds
from warmcore.simcore.config import (
    ConfigError,
    config_error,
    parse_toml,
    read_text,
    write_atomic,
)

REQUIRED = ("values", "fit", "unit_optimum", "unit_cov")


def params_document(cal, where: str | Path | None = None) -> dict:
    """The PARAMS.toml document of ``cal``; ``where``: the folder it is written to,
    which the recorded spec's ``base_dir`` is made relative to (an absolute path of
    the machine the fit ran on would mean nothing on another)."""
    from warmcore.calibration.fit import METHOD, spec_hashes

    spec = cal.spec
    recorded = spec.model_dump(mode="json", exclude_none=True)   # the whole spec it came from
    if where is not None:
        recorded["base_dir"] = Path(os.path.relpath(Path(spec.base_dir).resolve(),
                                                    Path(where).resolve())).as_posix()
    return {
        "warmcore_version": warmcore.__version__,
        "method": METHOD,
        "spec_digest": spec.digest(),
        "measurements": [m.name for m in spec.measurement],
        "spec": recorded,
        "data_sha256": spec_hashes(spec),
        "seeds": list(spec.run.seeds),
        "evaluations": cal.evaluations,
        "condition_number": cal.condition_number if cal.condition_number < 1e300 else 1e300,
        "warnings": list(cal.warnings),
        "notes": list(cal.notes),
        "values": dict(cal.values),
        "ci95": {k: list(v) for k, v in cal.ci95.items()},
        "fit": [f.model_dump() for f in spec.fit],
        "unit_optimum": list(cal.unit_optimum),
        "unit_cov": [list(row) for row in cal.unit_cov],
    }


def write_params(cal, path: str | Path) -> None:
    text = ("# warmcore calibration: fitted parameters (docs/calibration.md)\n"
            + tomli_w.dumps(params_document(cal, Path(path).resolve().parent)))
    write_atomic(path, text, "--out")


def load_params(path: str | Path) -> dict:
    return check_params(read_text(path, "--params"), str(path))


class ParamsDoc(BaseModel):
    """What ``predict`` and ``--params`` read from a PARAMS.toml, checked whole: a
    tampered or damaged file is one line, never a traceback or a value applied
    unchecked. (The other keys are a record for people: kept, not read.)"""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)
    values: dict[str, float]
    fit: list[FitParam] = Field(min_length=1, max_length=MAX_FIT)
    unit_optimum: list[Annotated[float, Field(ge=0, le=1)]]
    unit_cov: list[list[float]]
    seeds: list[Seed] = Field(default=[1, 2], min_length=1, max_length=MAX_SEEDS)

    @model_validator(mode="after")
    def _consistent(self):
        paths = [f.path for f in self.fit]
        if len(set(paths)) != len(paths):
            raise ConfigError("fit", "a path is fitted twice")
        if set(self.values) != set(paths):
            raise ConfigError("values", f"names {sorted(self.values)}, the fit "
                              f"{sorted(paths)}")
        p = len(paths)
        if len(self.unit_optimum) != p:
            raise ConfigError("unit_optimum", f"{len(self.unit_optimum)} numbers for {p} "
                              "fitted parameters")
        cov = np.array(self.unit_cov, dtype=float) if all(
            len(row) == p for row in self.unit_cov) else None
        if cov is None or cov.shape != (p, p):
            raise ConfigError("unit_cov", f"not a {p} x {p} matrix")
        scale = max(1.0, float(np.abs(cov).max()))
        if not np.allclose(cov, cov.T, rtol=0, atol=1e-9 * scale):
            raise ConfigError("unit_cov", "not symmetric: not a covariance")
        if float(np.linalg.eigvalsh(cov).min()) < -1e-9 * scale:
            raise ConfigError("unit_cov", "has a negative eigenvalue: not a covariance")
        return self


def check_params(text: str, name: str) -> dict:
    """The PARAMS.toml document in ``text`` (``name`` for messages), checked."""
    doc = parse_toml(text, f"--params: {name}")
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise ConfigError("--params", f"{name}: not a warmcore PARAMS.toml (no "
                          f"{', '.join(missing)})")
    try:
        checked = ParamsDoc.model_validate(doc)
    except ValidationError as e:
        err = config_error(e)
        raise ConfigError("--params", f"{name}: {err.field}: {err.reason}") from None
    return {**doc, **checked.model_dump(include={"values", "fit", "unit_optimum",
                                                 "unit_cov", "seeds"})}


def check_against(sc: warmcore.Scenario, params: dict) -> dict:
    """The parameters of ``params`` as ``sc`` takes them: each fitted path a numeric
    parameter of the scenario, its bounds and its value inside the parameter's range
    (whole numbers where the parameter is). Returns {path: value}."""
    space = {p.path: p for p in warmcore.parameters(sc)}
    out = {}
    for f in params["fit"]:
        path = f["path"]
        p = space.get(path)
        if p is None or p.type not in ("int", "float"):
            raise ConfigError("--params", f"{path} is not a numeric parameter of scenario "
                              f"{sc.name!r}")
        check_fit_bounds(FitParam(**f), p, f"--params: fit.{path}")
        v = params["values"][path]
        if p.type == "int" and v != round(v):       # calibrate writes whole numbers here
            raise ConfigError("--params", f"values.{path}: {v!r} is not a whole number "
                              f"({path} is an integer parameter)")
        v = round(v) if p.type == "int" else float(v)
        try:
            p.check(v)
        except ValueError as e:
            raise ConfigError("--params", f"values.{path}: {v!r}: {e}") from None
        out[path] = v
    return out


def apply_params(sc: warmcore.Scenario, params: dict) -> warmcore.Scenario:
    """The scenario with the fitted values (whole numbers where the parameter is)."""
    return sc.with_(check_against(sc, params))
