"""``python -m dprelease.cli``: the ``dprelease`` command."""

from dprelease.cli.main import main

main()
