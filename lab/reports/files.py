"""The archived-files table: every file of the run directory with its size and SHA-256,
and the two report files that cannot list their own digest.

    files_table([ArchivedFile.of_bytes("results.json", data)])   # Table: path | size | SHA-256
    files_table(files, grouped=True)   # one row per directory (<scenario>/r<rep>/, scenarios/)
"""

from __future__ import annotations

import re

from lab.reports import REPORT_FILES, ArchivedFile
from lab.reports.table import Table, fmt

#: a repetition's evidence directory ("<scenario>/r<rep>/..."), else any top-level one
#: ("scenarios/", "sessions/")
_UNIT_DIR = re.compile(r"^(?P<dir>[^/]+/r\d+|[^/]+)/")


def _grouped(files: list[ArchivedFile]) -> list[list[str]]:
    """Top-level files one per row; each directory (a repetition's evidence, the scenario
    files, the shared tracer sessions) as one row (count, bytes)."""
    rows: list[list[str]] = []
    groups: dict[str, list[ArchivedFile]] = {}
    for f in sorted(files, key=lambda f: f.path):
        if f.path in REPORT_FILES:
            continue
        match = _UNIT_DIR.match(f.path)
        if match is None:
            rows.append([f.path, fmt(f.size), f.sha256])
        else:
            groups.setdefault(match.group("dir"), []).append(f)
    for directory, members in groups.items():
        rows.append(
            [
                f"{directory}/ ({len(members)} file{'' if len(members) == 1 else 's'})",
                fmt(sum(f.size for f in members)),
                "each file's SHA-256: report.md and SHA256SUMS",
            ]
        )
    return sorted(rows, key=lambda row: row[0])


def files_table(files: list[ArchivedFile] | None, *, grouped: bool = False) -> Table:
    notes = [
        "SHA256SUMS covers every archived file, this report included; SHA256SUMS.sig signs "
        "SHA256SUMS, and SHA256SUMS.signify holds the same signature and list for signify -C. "
        "Files written after this report (SHA256SUMS and SHA256SUMS.gnu, the signatures, "
        "the public keys, the attestation) are not in this table."
    ]
    if files is None:
        return Table(
            ["path", "size (bytes)", "SHA-256"],
            [],
            ["The archived file list was not supplied to this report.", *notes],
        )
    rows = (
        _grouped(files)
        if grouped
        else [
            [f.path, fmt(f.size), f.sha256]
            for f in sorted(files, key=lambda f: f.path)
            if f.path not in REPORT_FILES
        ]
    )
    views = {"report.md": "Markdown", "report.pdf": "PDF", "report.html": "HTML"}
    rows += [
        [name, "-", f"this report ({views.get(name, name)} view): digest in SHA256SUMS"]
        for name in REPORT_FILES
    ]
    return Table(["path", "size (bytes)", "SHA-256"], rows, notes)
