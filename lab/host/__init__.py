"""This machine: the process wrapper, capabilities and tools, identity, clocks."""
