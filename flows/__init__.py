"""The release flow, its spec and the ``dprelease`` command line."""
