"""Safe-store, the second workload: the second article's Go ``Store.Write`` with a
path-traversal hole (``campaigns/safe-store/``), judged on S3 (contained, by the kernel),
S4 (legitimate names land) and S5 (scope) by ``judge_candidate``.

    from lab.workloads.safestore import judge_candidate
    judged = judge_candidate(tree, fixture=fixture, out=out, editable=["store.go"],
                             protected=["store_test.go"], gocache=cache)
    judged.clauses["S3"].verdict        # "pass", "fail" or "not-observed"
"""

from lab.model.safestore import ClauseResult, SafeStoreJudgement
from lab.workloads.safestore.oracle import judge_candidate

__all__ = ["ClauseResult", "SafeStoreJudgement", "judge_candidate"]
