"""The registry (``mechanisms.registry``) and what ``Synthesizer.__init_subclass__`` derives
so that a mechanism does not restate it: ``summary`` from the class docstring's first
paragraph, ``params_type`` from the ``Synthesizer[P, E, M, D]`` base."""

from __future__ import annotations

import dataclasses

import pytest

from dprelease.mechanisms.mst import MST
from dprelease.mechanisms.registry import MECHANISMS, registry
from dprelease.mechanisms.spectral import SpectralParams
from dprelease.mechanisms.synthesizer import Synthesizer


def test_each_mechanism_has_its_params_type_and_a_one_line_summary():
    for name, m in MECHANISMS.items():
        assert m.name == name
        assert dataclasses.is_dataclass(m.params_type) and m.params_type() is not None
        assert m.summary and "\n" not in m.summary and "  " not in m.summary


def test_a_name_registered_twice_is_refused():
    with pytest.raises(ValueError, match="'mst'"):
        registry(MST(), MST())


def test_summary_and_params_type_are_derived_unless_set():
    class Derived(Synthesizer[SpectralParams, None, None, None]):
        """two lines of
        summary

        and a remark."""

    class Set(Derived):
        """Another docstring."""

        summary = "given"

    assert (Derived.summary, Derived.params_type) == ("two lines of summary", SpectralParams)
    assert (Set.summary, Set.params_type) == ("given", SpectralParams)
