"""tests/documented: the docs runner's tests. Their session fixture, `docs_run`, is in
tests/conftest.py, so that a suite may read what one documented command made
(`docs_run.run_one`)."""
