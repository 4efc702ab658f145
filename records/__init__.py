"""What a release leaves on record, checked, settled and shown: ``records.audit`` re-checks a
bundle against its files and the ledger (``dprelease audit verify``); ``records.recovery``
clears what a dead release left (stale staging folders, ``reserved`` attempts:
``dprelease recover``, ``dprelease ledger settle``); ``records.artifacts`` builds the
Prefect artifacts of a release as plain JSON from its public facts. No Prefect, no typer;
imports ``bundle``, ``ledger``, ``spec`` and ``mechanisms``."""
