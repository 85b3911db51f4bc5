"""Keel's command-line tools (`keel-prune`, `keel-inspect`, `keel-profile`; `python -m keel.tools.NAME`)."""
