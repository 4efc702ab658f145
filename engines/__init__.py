"""Tables in and out: reading the confidential input the way a release does
(``engines.tables``, ``engines.inputs``), and the streaming engines that run per-chunk
functions over a file on this machine or on a Dask cluster (``engines.chunks``,
``engines.runners``). Plain functions and classes, no Prefect; imports ``mechanisms``
and ``spec`` only."""
