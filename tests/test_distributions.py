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
    assert set(step) == set(d.DISTRIBUTIONS) - {"empirical"}   # a step has no value list


def test_the_effects_switches_and_the_machines_effects_are_the_one_declaration():
    from warmcore.models.hardware import HardwareMachine

    assert tuple(Effects.model_fields) == tuple(EFFECTS)
    assert all(Effects.model_fields[e].description == EFFECTS[e] for e in EFFECTS)
    m = HardwareMachine("i7-3770")
    assert tuple(m.effects) == tuple(EFFECTS)
