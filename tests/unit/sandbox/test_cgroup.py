"""``CgroupStats``: what the kernel reported for an invocation's cgroup, typed."""

from __future__ import annotations


def test_cgroup_stats_round_trip_and_never_invent_a_figure() -> None:
    from lab.model import SandboxRecord
    from lab.model.sandbox import CgroupStats

    stats = CgroupStats(cpu_usage_s=0.25, memory_peak_bytes=4096, pids_max_hit=0)
    data = stats.to_dict()
    assert data["cpu_usage_s"] == 0.25 and data["pids_peak"] is None and data["oom_kills"] is None
    assert CgroupStats.from_dict(data) == stats
    # a figure that is not a number (a damaged or hostile document) is absent, never 0
    odd = CgroupStats.from_dict({"cpu_usage_s": "0.25", "pids_peak": True, "oom_kills": 2})
    assert odd == CgroupStats(oom_kills=2)
    # without a sandbox there are no stats: {} in results.json, as before
    assert SandboxRecord(enabled=False).to_dict()["stats"] == {}
    assert SandboxRecord(enabled=True, stats=stats).to_dict()["stats"] == data
