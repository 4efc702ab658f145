"""The ``dprelease`` command line: a thin typer layer over the flow, the records and the ledger.

``main.py`` holds the app and the release commands, ``draft.py`` ``init`` and ``discover``,
``records.py`` ``ledger`` and ``audit``, ``recovery.py`` ``recover``, ``settle`` and ``notify``;
``console.py`` the rich console, the error panel and the one table from an exception's class
to the exit code.
"""
