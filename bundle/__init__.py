"""The release bundle: the release document and its README (``bundle.document``), the
writers, manifests, atomic publish and failure records (``bundle.write``), and the JSON
and sha256 helpers (``bundle.files``). No Prefect; imports ``mechanisms`` and ``spec``."""
