"""The lab image and its engine: the Debian base, the build, ``docker run``."""
