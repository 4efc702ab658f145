"""The mathematics of dprelease: public schema, DP primitives, accountants, synthesizers.

Pure numpy/scipy. Nothing here imports Prefect or Great Expectations, reads a file or
prints; every random draw comes from a ``numpy.random.Generator`` passed in by the caller.
"""
