"""Evidence archives: signing keys, signatures, provenance, packing and verification."""
