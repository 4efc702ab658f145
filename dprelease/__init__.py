"""dprelease: differentially private synthetic microdata releases.

The project's folders (``mechanisms/``, ``spec/``, ``engines/``, ``ledger/``, ``checks/``,
``bundle/``, ``expectations/``, ``tasks/``, ``flows/``) are installed as the subpackages
``dprelease.mechanisms`` ... ``dprelease.flows``; nothing else is installed at the top level.
"""

__version__ = "0.1.0"
