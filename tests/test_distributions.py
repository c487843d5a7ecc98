"""Distributions are a class each (simcore/distributions.py), and the scenario's
choices, the hardware effects and their switches each come from one declaration."""

from __future__ import annotations

import typing

import numpy as np
import pytest

from warmcore.simcore import distributions as d
from warmcore.simcore.config import Effects, ServiceShape, Step
from warmcore.simcore.machine import EFFECTS


@pytest.mark.parametrize("name, cv, values, scv", [
    ("deterministic", 1.0, None, 0.0),
    ("exponential", 1.0, None, 1.0),
    ("lognormal", 2.0, None, 4.0),
    ("empirical", 1.0, [1e-4, 3e-4], 0.25),    # mean 2e-4, variance 1e-8: scv 1/4
    ("hyperexponential", 2.0, None, 4.0),
    ("hyperexponential", 1.0, None, 1.0),      # p1 = 1/2, both phases the mean: M
    ("coxian", 3.0, None, 9.0),
    ("coxian", 0.75, None, 0.5625),
])
def test_each_distribution_draws_its_mean_and_variation(name, cv, values, scv):
    dist = d.distribution(name, 2e-4, cv=cv, values_s=values)
    assert dist.mean_s == pytest.approx(2e-4) and dist.scv == pytest.approx(scv)
    draw = dist.sampler(np.random.default_rng(7))
    xs = np.array([draw() for _ in range(200_000)])
    assert xs.mean() == pytest.approx(2e-4, rel=0.02)
    assert xs.var() / xs.mean() ** 2 == pytest.approx(scv, rel=0.1, abs=1e-9)


def test_the_scenarios_choices_are_the_distribution_classes():
    service = typing.get_args(ServiceShape.model_fields["service"].annotation)
    assert set(service) == set(d.DISTRIBUTIONS)
    step = typing.get_args(Step.model_fields["distribution"].annotation)
    assert set(step) == set(d.DISTRIBUTIONS)    # empirical with its own values_us


def test_the_effects_switches_and_the_machines_effects_are_the_one_declaration():
    from warmcore.models.hardware import HardwareMachine

    assert tuple(Effects.model_fields) == tuple(EFFECTS)
    assert all(Effects.model_fields[e].description == EFFECTS[e] for e in EFFECTS)
    m = HardwareMachine("i7-3770")
    assert tuple(m.effects) == tuple(EFFECTS)


def test_the_h2_balanced_means_fit_by_hand():
    """cv 2, mean 1 ms: p1 = (1 + sqrt(3/5)) / 2 = 0.887298, phase means m / (2 p_i) =
    0.563508 and 4.436492 ms; E[S^2] = 2 (p1 m1^2 + p2 m2^2) = 5 ms^2 = (1 + cv^2) m^2."""
    h = d.distribution("hyperexponential", 1e-3, cv=2.0)
    assert h.p1 == pytest.approx(0.887298, abs=1e-6)
    assert (h.m1, h.m2) == (pytest.approx(0.563508e-3, rel=1e-5),
                            pytest.approx(4.436492e-3, rel=1e-6))
    assert h.second_moment == pytest.approx(5e-6)


def test_the_coxian_fit_by_hand():
    """cv 2, mean 1 ms (Marie): phase 1 of mean 0.5 ms, then with p = 1/8 a phase of
    mean 4 ms: mean 0.5 + 4/8 = 1 ms, variance 0.25 + 2 x 16/8 - (4/8)^2 = 4 ms^2."""
    c = d.distribution("coxian", 1e-3, cv=2.0)
    assert (c.m1, c.p, c.m2) == (pytest.approx(0.5e-3), 0.125, pytest.approx(4e-3))
    assert c.scv == pytest.approx(4.0)


@pytest.mark.parametrize("name, cv", [("hyperexponential", 0.99), ("coxian", 0.7)])
def test_a_cv_outside_the_shapes_fit_is_refused(name, cv):
    from warmcore.simcore.config import ConfigError
    from tests.helpers import scenario

    with pytest.raises(ConfigError, match=f"service_cv.*{name} needs a cv of at least"):
        scenario("mmc", {"workload.service": name, "workload.service_cv": cv})
    with pytest.raises(ValueError, match="needs a cv of at least"):
        Step(compute_us=1.0, distribution=name, cv=cv)
