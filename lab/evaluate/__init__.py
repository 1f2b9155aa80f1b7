"""Candidate evaluation: judge a client someone else wrote against the frozen contract."""
