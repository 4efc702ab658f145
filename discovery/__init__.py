"""``dprelease discover``: a draft spec's bounds, atoms and category sets discovered under
differential privacy and charged to the dataset's ledger as a release of its own, with a
bundle ``audit verify`` checks (``discovery.schema``). The estimators and their proofs are
``mechanisms.discovery``; this package reads the data, reserves and records the spend and
writes the bundle. No Prefect, no typer; imports ``bundle``, ``engines``, ``ledger``,
``spec`` and ``mechanisms``."""
