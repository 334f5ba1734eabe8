"""The GTPO reward service: format and correctness scoring over HTTP."""
