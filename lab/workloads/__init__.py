"""The workloads the lab can judge, each a package beside the others: ``backup`` (a client
backing up a file to the lab's receiver, judged against C1–C6). The generic stages (sandbox,
collectors, judge machinery, reports, evidence) know no workload; the pipeline picks one here."""
