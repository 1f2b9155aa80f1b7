"""The workloads the lab can judge, each a package beside the others: ``backup`` (a client
backing up a file to the lab's receiver, judged against C1–C6) and ``safestore`` (the second
article's Go ``Store.Write``, judged on S3–S5 by ``judge_candidate``). The generic stages
(sandbox, collectors, judge machinery, reports, evidence) know no workload; the pipeline
picks one here."""
