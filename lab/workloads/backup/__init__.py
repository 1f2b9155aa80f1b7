"""The backup workload: a client backs up one file to the lab's receiver, and the lab judges
its claims against clauses C1–C6. Its own parts live here — the receiver and the decoy
(``receiver``, ``decoy``, ``endpoint``, ``protocol``, ``store``, ``upload``, ``records``), the
independent verifier (``backup_check``), the deterministic source file (``fixture``), the
scenario files (``scenario``, ``scenario_yaml``), the contract (``contract``) and its
calibration expectations (``calibration``). The generic stages reach it through
``lab.workloads``."""
