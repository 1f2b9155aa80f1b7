"""`lab merge`: shards of one run, verified, read back and written as one signed run."""
