"""Judging what was observed: the contract, the calibration, repetition aggregates."""
