"""Workloads: what the lab judges, each a fixture, how a candidate of it is built and run,
its clauses and the oracle that decides them (``safestore``: the second article's Go
``Store.Write``)."""
