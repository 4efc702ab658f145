"""The post-release checks' metrics: utility (``checks.utility``), record linkage
(``checks.linkage``), the reports with their stated sample sizes (``checks.reports``),
the metrics the differentially private gates measure (``checks.gates``) and the internal
HTML report (``checks.html``). Everything they compute from the confidential data stays
in ``internal/``. Plain functions, no Prefect; imports ``mechanisms`` only."""
