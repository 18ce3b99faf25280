"""Operational scripts of the repository, importable as a package (run them with ``python -m scripts.<module>``)."""
