"""A forwarding module: the builders moved to ``tests/helpers.py``. It remains only for
``tests/mechanisms/test_wiring_factor_gauss.py`` (maintained apart), which still imports
``tests.flows.helpers``; delete it once that import reads ``tests.helpers``."""

from tests.helpers import DEMO_DIR, DEMO_SPEC, adult_rows, write_spec

__all__ = ["DEMO_DIR", "DEMO_SPEC", "adult_rows", "write_spec"]
