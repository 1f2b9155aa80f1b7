"""The archived-files table: every file of the run directory with its size and SHA-256,
and the two report files that cannot list their own digest.

    files_table([ArchivedFile.of_bytes("results.json", data)])   # Table: path | size | SHA-256
"""

from __future__ import annotations

from lab.reports import REPORT_FILES, ArchivedFile
from lab.reports.table import Table, fmt


def files_table(files: list[ArchivedFile] | None) -> Table:
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
    rows = [
        [f.path, fmt(f.size), f.sha256]
        for f in sorted(files, key=lambda f: f.path)
        if f.path not in REPORT_FILES
    ]
    views = {"report.md": "Markdown", "report.pdf": "PDF"}
    rows += [
        [name, "-", f"this report ({views.get(name, name)} view): digest in SHA256SUMS"]
        for name in REPORT_FILES
    ]
    return Table(["path", "size (bytes)", "SHA-256"], rows, notes)
