"""Thin Prefect tasks around ``mechanisms``; each states its cache and persistence policy."""
