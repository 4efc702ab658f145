"""The release bundle: the release document and its README (``bundle.document``), the
document read back as a typed value (``bundle.release_doc``: ``ReleaseDocument``, its parts
in ``bundle.privacy_doc`` and ``bundle.parts``), the writers, manifests, atomic publish and
failure records (``bundle.write``), and the JSON and sha256 helpers (``bundle.files``). No
Prefect; imports ``mechanisms`` and ``spec``."""
