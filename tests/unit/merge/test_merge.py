"""``lab merge``: shards verified before they are read, refused with one sentence when they
are not one run's, and merged into a run with the unsharded run's verdicts and aggregates."""

from __future__ import annotations

import base64
import gzip
import io
import json
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from lab import __version__
from lab._cli import main
from lab.evidence.keys import generate_keypair
from lab.evidence.signing import Signer
from lab.evidence.verify import verify_archive
from lab.judge.aggregate import aggregate
from lab.merge.combine import MergeRequest, merge
from lab.model import RunResult
from lab.run.shard import ShardSpec, Unit, shard_record, shard_run_id, work_units
from tests.unit.merge.shard_archives import pack_shard, refused
from tests.unit.reports.reports_sample import build_sample_run

Mutate = Callable[[RunResult], None]


def whole_run() -> RunResult:
    run = build_sample_run()
    run.options["scenarios"] = [s.name for s in run.scenarios]
    run.options["lab_version"] = __version__
    return run


def make_shard(
    out: Path, signer: Signer, spec: ShardSpec, *, run_id: str = "run-t", mutate: Mutate = id
) -> Path:
    run = whole_run()
    mine = spec.select(work_units(run.options["scenarios"], 1))
    run.scenarios = [s for s in run.scenarios if Unit(s.name, s.repetition) in mine]
    run.run_id = shard_run_id(run_id, spec)
    run.shard = shard_record(spec, mine, run_id, "scenario")
    run.aggregate = aggregate(run.scenarios)
    mutate(run)
    return pack_shard(run, out, signer, whole_run().options["scenarios"])


def shards(tmp_path: Path, signer: Signer, count: int = 3, **kw: object) -> list[Path]:
    return [
        make_shard(tmp_path / "s", signer, ShardSpec(i, count), **kw)  # type: ignore[arg-type]
        for i in range(1, count + 1)
    ]


def test_merge_equals_the_unsharded_run(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    archives = shards(tmp_path, signer)
    outcome = merge(MergeRequest(archives=archives, pubkey=pub, out=tmp_path / "m"), say=print)
    whole = json.loads(json.dumps(whole_run().to_dict()))
    merged = json.loads((outcome.run_dir / "results.json").read_text())
    assert merged["run_id"] == "run-t"
    assert merged["scenarios"] == whole["scenarios"]
    assert merged["aggregate"] == whole["aggregate"]
    assert merged["calibration"] == whole["calibration"]
    assert [s["index"] for s in merged["shards"]] == [1, 2, 3]
    assert outcome.archive is not None
    report = verify_archive(outcome.archive.path, pubkey=pub)
    assert report.authenticity_established
    envelope = json.loads((outcome.run_dir / "provenance.intoto.jsonl").read_text())
    statement = json.loads(base64.b64decode(envelope["payload"]))
    deps = statement["predicate"]["buildDefinition"]["resolvedDependencies"]
    listed = [d for d in deps if "shard" in d.get("annotations", {})]
    assert [d["annotations"]["shard"] for d in listed] == ["1/3", "2/3", "3/3"]
    assert all("uri" not in d for d in listed)  # a bare file name is no URI
    digests = {d["name"]: d["digest"]["sha256"] for d in listed}
    assert digests == {
        a.name: a.with_name(a.name + ".sha256").read_text().split()[0] for a in archives
    }
    md = (outcome.run_dir / "report.md").read_text()
    assert "## Shards" in md and archives[0].name in md
    assert (outcome.run_dir / "shards" / "2" / "SHA256SUMS").is_file()
    rows = [json.loads(r) for r in (outcome.run_dir / "timeline.jsonl").read_text().splitlines()]
    # these shards' timelines name no time base: kept as written, after the header that
    # says so (tests/unit/merge/test_merge_timeline.py converts real ones)
    assert rows[0]["event"] == "time-base" and rows[0]["time_base"] == "CLOCK_REALTIME"
    assert [r["shard"] for r in rows[1:]] == [1, 2, 3]
    assert not any(b["converted"] for b in rows[0]["shards"])
    assert (outcome.run_dir / "baseline" / "r1" / "result.json").is_file()


def _repack(archive: Path, change: Callable[[str, bytes], bytes]) -> None:
    members = []
    with tarfile.open(archive, "r:gz") as tar:
        for info in tar:
            data = tar.extractfile(info).read() if info.isfile() else None  # type: ignore[union-attr]
            members.append((info, data))
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                data = change(info.name, data)
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    archive.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))


def test_tampered_shard_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    archives = shards(tmp_path, signer)

    def flip_verdict(name: str, data: bytes) -> bytes:
        return data.replace(b'"fail"', b'"pass"') if name.endswith("/results.json") else data

    _repack(archives[1], flip_verdict)
    message = refused(archives, pub, tmp_path, archives[1].name, "does not verify", "re-run")
    assert "results.json" in message


def test_shard_signed_by_another_key_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    other = Signer.from_file(generate_keypair(tmp_path / "other").secret)
    archives = shards(tmp_path, signer, count=2)
    archives[1].unlink()
    shutil.rmtree(archives[1].with_suffix("").with_suffix(""))
    archives[1] = make_shard(tmp_path / "s", other, ShardSpec(2, 2))
    refused(archives, pub, tmp_path, archives[1].name, "does not verify against lab.pub")


def test_two_shards_with_the_same_index_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    archives = shards(tmp_path, signer)
    twin = tmp_path / "copy-of-shard1.tar.gz"
    shutil.copyfile(archives[0], twin)
    refused([*archives, twin], pub, tmp_path, "both shard 1/3", twin.name)


def test_missing_shard_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    archives = shards(tmp_path, signer)
    refused([archives[0], archives[2]], pub, tmp_path, "shard(s) 2 of 3", "missing")


def test_shards_of_different_runs_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    archives = shards(tmp_path, signer, count=2)
    other = make_shard(tmp_path / "o", signer, ShardSpec(2, 2), run_id="run-other")
    refused([archives[0], other], pub, tmp_path, "differ in run id", "run-other")


def test_shards_of_different_lab_versions_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    a = make_shard(tmp_path / "a", signer, ShardSpec(1, 2))

    def older(run: RunResult) -> None:
        run.options["lab_version"] = "0.0.9"

    b = make_shard(tmp_path / "b", signer, ShardSpec(2, 2), mutate=older)
    refused([a, b], pub, tmp_path, "differ in lab version", "0.0.9")


def test_shards_of_different_counts_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key
    a = make_shard(tmp_path / "a", signer, ShardSpec(1, 2))
    b = make_shard(tmp_path / "b", signer, ShardSpec(2, 3))
    refused([a, b], pub, tmp_path, "differ in shard count")


def test_shard_with_foreign_units_refused(tmp_path: Path, key: tuple[Signer, Path]) -> None:
    signer, pub = key

    def drop(run: RunResult) -> None:
        run.scenarios = run.scenarios[1:]

    a = make_shard(tmp_path / "a", signer, ShardSpec(1, 2), mutate=drop)
    b = make_shard(tmp_path / "b", signer, ShardSpec(2, 2))
    refused([a, b], pub, tmp_path, a.name, "holds units")


def test_cli_refusal_is_one_sentence(
    tmp_path: Path, key: tuple[Signer, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    signer, pub = key
    archives = shards(tmp_path, signer, count=2)
    code = main(["merge", str(archives[0]), "--pubkey", str(pub), "--out", str(tmp_path / "m")])
    err = capsys.readouterr().err
    assert code == 1
    assert "missing" in err and "Traceback" not in err
