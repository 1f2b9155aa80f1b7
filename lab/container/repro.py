"""``invoke image.repro``: build the lab image from a clean cache several times and compare
what must be identical (the client binary, the package manifest); image digests and the
layers that differ are reported either way (``docs/reproducibility.md``).

    report = reproduce(ctx, builds=2)     # also written to artifacts/.image/repro.json
    report["client_identical"], report["packages_identical"], report["differing_layers"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lab.container.base import DEFAULT_BASE_IMAGE, resolve_base
from lab.container.engine import Context, write_json
from lab.container.image import build_image, inspect_image
from lab.errors import ContainerError
from lab.host import procs


def reproduce(ctx: Context, *, builds: int = 2) -> dict[str, Any]:
    """Build the image ``builds`` times from a clean cache and compare what must match.

    The client binary's SHA-256 and the installed-package manifest must be identical; image
    digests are reported either way, with the layers that differ (the classic builder keeps
    build-time file dates in every layer it writes, so those layers differ). Writes
    ``artifacts/.image/repro.json``.
    """
    base = resolve_base(DEFAULT_BASE_IMAGE, workdir=Path("/var/tmp/lab-base"), log=ctx.log)
    results: list[dict[str, Any]] = []
    for index in range(1, builds + 1):
        tag = f"execution-evidence-lab:repro-{index}"
        identity = build_image(ctx, tag=tag, no_cache=True, base=base, record=False)
        info = inspect_image(ctx, tag) or {}
        identity["layers"] = list((info.get("RootFS") or {}).get("Layers") or [])
        results.append(identity)
    first = results[0]
    same = {
        key: all(r[key] == first[key] for r in results)
        for key in ("client_sha256", "packages_sha256", "id")
    }
    differing = sorted(
        {
            i
            for r in results[1:]
            for i, layer in enumerate(r["layers"])
            if i >= len(first["layers"]) or layer != first["layers"][i]
        }
    )
    report = {
        "base": base.as_dict(),
        "builds": [
            {
                k: r[k]
                for k in (
                    "name",
                    "id",
                    "client_sha256",
                    "packages_sha256",
                    "build_seconds",
                    "size_bytes",
                )
            }
            for r in results
        ],
        "client_identical": same["client_sha256"],
        "packages_identical": same["packages_sha256"],
        "image_identical": same["id"],
        "layers": len(first["layers"]),
        "differing_layers": differing,
    }
    write_json(ctx.image_dir / "repro.json", report)
    # The comparison is recorded; the extra images (about 1 GB each) are not kept.
    procs.run(
        ["docker", "image", "rm", *(r["name"] for r in results)],
        purpose="remove the reproduction images",
        log=ctx.log,
        timeout=300,
        accept=None,
    )
    if not (same["client_sha256"] and same["packages_sha256"]):
        raise ContainerError(
            "two clean builds differ in the client binary or the package manifest; see "
            f"{ctx.image_dir / 'repro.json'}."
        )
    return report
