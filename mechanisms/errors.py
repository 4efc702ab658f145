"""One error hierarchy, so callers can catch ``DPReleaseError`` (a ``ValueError``)."""

from __future__ import annotations

__all__ = ["BudgetError", "DPReleaseError", "SchemaError"]


class DPReleaseError(ValueError):
    """Base class: messages read ``<name> (<value>) must be <rule>`` and say what to do."""


class SchemaError(DPReleaseError):
    """The declared public schema is inconsistent (bounds, levels, categories)."""


class BudgetError(DPReleaseError):
    """A privacy budget or its split is invalid."""
