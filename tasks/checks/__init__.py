"""Post-release checks: utility and linkage metrics, gates, the internal report."""
