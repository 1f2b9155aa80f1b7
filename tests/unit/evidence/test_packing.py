"""The archive's tarball in segments: the tar stream ``tarfile`` writes, cut at fixed
member boundaries into gzip members; the same bytes whether or not the early segments were
prepared, and a file changed after ``prepare`` packed as it is at ``build``."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from lab.evidence import archive
from lab.evidence.archive import GENERATED, build_tarball, collect_files
from lab.evidence.packing import LATE, Packer, entries_of, segments


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run-1"  # the run id tests.unit.evidence.test_archive.INPUTS names
    (run / "baseline" / "none" / "invocation-1").mkdir(parents=True)
    (run / "scenarios").mkdir()
    (run / "baseline" / "none" / "invocation-1" / "client.stdout").write_bytes(b"ok\n" * 400)
    (run / "baseline" / "none" / "invocation-1" / "empty").write_bytes(b"")
    (run / "baseline" / "block").write_bytes(b"b" * 512)
    (run / "results.json").write_text('{"schema_version": 1}\n')
    (run / "report.md").write_text("# report\n")
    (run / "scenarios" / "baseline.yaml").write_text("name: baseline\n")
    tool = run / "probes.sh"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    (run / ("timeline.jsonl")).write_bytes(os.urandom(300_000))  # several deflate blocks
    return run


def _with_late_files(run: Path) -> None:
    for name in sorted(LATE):
        (run / name).write_bytes(f"{name}\n".encode())


def _tarfile_stream(run: Path, epoch: int) -> bytes:
    """The tar stream as ``tarfile`` writes it (the packer's reference)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries_of(collect_files(run)):
            name = f"{run.name}/{entry.rel}" if entry.rel else run.name
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = epoch, 0, 0, "", ""
            if entry.directory:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
                continue
            path = run / entry.rel
            info.size = path.stat().st_size
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            with open(path, "rb") as fh:
                tar.addfile(info, fh)
    return out.getvalue()


def test_late_names_are_the_pdf_and_what_the_archive_writer_generates() -> None:
    assert frozenset({"report.pdf", *GENERATED}) == LATE


def test_the_tar_stream_is_tarfiles_in_gzip_members(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    _with_late_files(run)
    dest = tmp_path / "a.tar.gz"
    build_tarball(run, dest, epoch=1_700_000_000)
    data = dest.read_bytes()
    assert gzip.decompress(data) == _tarfile_stream(run, 1_700_000_000)
    # one gzip member per segment, and the tar's end its own
    members = data.count(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
    assert members >= len(segments(entries_of(collect_files(run)))) + 1
    with tarfile.open(dest, "r:gz") as tar:
        assert f"{run.name}/probes.sh" in tar.getnames()
        assert tar.getmember(f"{run.name}/probes.sh").mode == 0o755


@pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar not installed")
def test_gnu_tar_reads_every_member(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    _with_late_files(run)
    dest = tmp_path / "a.tar.gz"
    build_tarball(run, dest, epoch=0)
    out = tmp_path / "out"
    out.mkdir()
    subprocess.run(["tar", "-xzf", str(dest), "-C", str(out)], check=True)
    for rel in collect_files(run):
        assert (out / run.name / rel).read_bytes() == (run / rel).read_bytes()


def test_prepared_or_not_the_same_bytes(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    packer = Packer(run, epoch=5)
    assert packer.prepare(collect_files(run)) >= 2  # before the late files exist
    assert packer.prepare(collect_files(run)) == 0  # nothing left to prepare
    _with_late_files(run)
    prepared = packer.build(tmp_path / "prepared.tar.gz", collect_files(run))
    cold = build_tarball(run, tmp_path / "cold.tar.gz", epoch=5)
    assert prepared == cold
    assert (tmp_path / "prepared.tar.gz").read_bytes() == (tmp_path / "cold.tar.gz").read_bytes()


def test_a_file_changed_after_prepare_is_packed_as_it_is(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    packer = Packer(run, epoch=5)
    packer.prepare(collect_files(run))
    _with_late_files(run)
    (run / "results.json").write_text('{"schema_version": 2, "changed": true}\n')
    stdout = run / "baseline" / "none" / "invocation-1" / "client.stdout"
    before = stdout.stat()
    stdout.write_bytes(b"KO\n" * 400)  # the same size
    os.utime(stdout, ns=(before.st_atime_ns, before.st_mtime_ns + 1))
    packer.build(tmp_path / "a.tar.gz", collect_files(run))
    build_tarball(run, tmp_path / "b.tar.gz", epoch=5)
    assert (tmp_path / "a.tar.gz").read_bytes() == (tmp_path / "b.tar.gz").read_bytes()
    with tarfile.open(tmp_path / "a.tar.gz", "r:gz") as tar:
        got = tar.extractfile(f"{run.name}/baseline/none/invocation-1/client.stdout")
        assert got is not None and got.read() == b"KO\n" * 400


def test_a_file_added_after_prepare_is_packed(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    packer = Packer(run, epoch=5)
    packer.prepare(collect_files(run))
    _with_late_files(run)
    (run / "baseline" / "late-note.txt").write_text("added\n")
    packer.build(tmp_path / "a.tar.gz", collect_files(run))
    assert gzip.decompress((tmp_path / "a.tar.gz").read_bytes()) == _tarfile_stream(run, 5)


def test_the_cut_depends_on_names_alone() -> None:
    files = ["SHA256SUMS", "a/x", "a/y", "lab.pub", "report.md", "report.pdf", "results.json"]
    cut = [[e.rel for e in seg] for seg in segments(entries_of(files))]
    assert cut == [
        ["", "SHA256SUMS", "a"],  # a directory's entry: in the run it falls in
        ["a/x", "a/y"],
        ["lab.pub"],
        ["report.md"],
        ["report.pdf"],
        ["results.json"],
    ]


def test_the_run_archive_verifies_after_a_prepared_pack(tmp_path: Path) -> None:
    from lab.evidence.signing import Signer
    from lab.evidence.verify import verify_archive
    from tests.unit.evidence.test_archive import INPUTS

    run = _run_dir(tmp_path)
    (run / "report.pdf").write_bytes(b"%PDF-1.4\n")
    (run / "results.json").write_text('{"$schema": "results.schema.json", "schema_version": 1}')
    (run / "results.schema.json").write_text('{"type": "object"}')
    packer = archive.packer_for(run, 1_700_000_000)
    packer.prepare(collect_files(run))
    info = archive.write_archive(
        run,
        signer=Signer.ephemeral(),
        provenance_inputs=INPUTS,
        epoch=1_700_000_000,
        packer=packer,
    )
    assert verify_archive(info.path).ok
