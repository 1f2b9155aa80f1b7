# The Execution Evidence Lab image: a pinned Debian base, every Debian package at the version
# locked in docker/apt-packages.lock, Python dependencies from hash-locked wheels, the native
# client built reproducibly, and a manifest of all of it under /usr/share/lab/manifest.
#
#   invoke lab.build        # resolves the base (pull, or debootstrap when no registry), fetches
#                           # the locked wheels, and runs the build below with every build arg
#   invoke image.lock       # re-resolve docker/apt-packages.lock and docker/requirements.lock
#
# See docs/container.md (how it runs) and docs/reproducibility.md (what is reproducible).
# Only the classic builder's syntax is used (no BuildKit mounts) so engines without buildx
# build it too.

# debian:bookworm-slim 12.11, multi-arch index digest (the Debian 12.11 point release,
# 2025-05-17). When no registry is reachable, `invoke lab.build` passes instead a local image
# debootstrapped from the Debian archive (lab/container/base.py, docs/container.md).
ARG BASE_IMAGE=debian:bookworm-slim@sha256:2424c1850714a4d94666ec928e24d86de958646737b1d113f5b2207be44d37d8

# --- Debian packages, every one at its locked version ----------------------------------
FROM ${BASE_IMAGE} AS system
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 LC_ALL=C.UTF-8
COPY docker/debian.sources docker/apt-install.sh docker/apt-packages.lock /opt/lab/docker/
RUN sh /opt/lab/docker/apt-install.sh /opt/lab/docker/apt-packages.lock

# --- Python dependencies: only the hash-locked wheels, no package index ----------------
# A separate stage, so the wheel files themselves never become a layer of the final image.
FROM system AS venv
COPY docker/requirements.lock /opt/lab/docker/requirements.lock
COPY docker/wheels/ /opt/lab/wheels/
RUN python3 -m venv /opt/lab/venv \
 && /opt/lab/venv/bin/pip install --no-cache-dir --no-index --find-links /opt/lab/wheels \
        --only-binary=:all: --require-hashes --no-deps -r /opt/lab/docker/requirements.lock

# --- The lab ---------------------------------------------------------------------------
FROM system
ARG SOURCE_DATE_EPOCH=0
# SOURCE_DATE_EPOCH stays set so that anything built or archived later in the image is
# stamped with the commit's time, never the build's.
ENV SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH} \
    PATH=/opt/lab/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    LAB_IN_CONTAINER=1
COPY --from=venv /opt/lab/venv /opt/lab/venv
COPY docker/entrypoint.sh /opt/lab/docker/entrypoint.sh

# The native client: the Makefile adds -ffile-prefix-map, and the build directory is the
# same in every build, so identical sources and toolchain give an identical binary.
WORKDIR /lab
COPY native/ /lab/native/
RUN make -C native clean && make -C native

# What the lab reads besides its modules, in the layout of a checkout; the package below
# carries the same files as package data (lab/_data/* link here, lab/resources.py).
COPY scenarios/ /lab/scenarios/
COPY probes/ /lab/probes/
COPY campaigns/ /lab/campaigns/
# The public contract an agent campaign's workspace holds (lab/campaign/workspace.py).
COPY docs/protocol.md docs/client-contract.md /lab/docs/

# The package itself (build backend pinned in docker/requirements.lock, hence no isolation).
COPY pyproject.toml README.md* /lab/
COPY lab/ /lab/lab/
RUN pip install --no-cache-dir --no-index --no-deps --no-build-isolation /lab \
 && rm -rf /lab/build /lab/*.egg-info
# The sandbox's own programs, the system-call filter (native/filter/lab-filter.c, libseccomp)
# and the listening-socket helper (native/listen/lab-listen.c), built once here into the
# lab's cache directory rather than at the first run of every container.
RUN cd /lab && python -c "from lab.sandbox import helpers; print(helpers.FILTER.path(), helpers.LISTEN.path())"

# What is in the image, readable by the lab's provenance and by anyone with `docker run`.
RUN mkdir -p /usr/share/lab/manifest \
 && dpkg-query -W -f='${Package}=${Version}\n' | LC_ALL=C sort \
        > /usr/share/lab/manifest/packages.txt \
 && pip freeze --all | LC_ALL=C sort > /usr/share/lab/manifest/python.txt \
 && (cd /lab/native && sha256sum backup-client) > /usr/share/lab/manifest/client.sha256

# Labels last: they change with every commit and must not invalidate the layers above.
ARG BASE_IMAGE
ARG LAB_SOURCE=unknown
ARG LAB_REVISION=unknown
ARG LAB_CREATED=1970-01-01T00:00:00Z
ARG LAB_BASE_PROVENANCE=unknown
LABEL org.opencontainers.image.title="execution-evidence-lab" \
      org.opencontainers.image.source="${LAB_SOURCE}" \
      org.opencontainers.image.revision="${LAB_REVISION}" \
      org.opencontainers.image.created="${LAB_CREATED}" \
      org.opencontainers.image.base.name="${BASE_IMAGE}" \
      dev.execution-evidence-lab.base-provenance="${LAB_BASE_PROVENANCE}"

ENTRYPOINT ["/opt/lab/docker/entrypoint.sh"]
CMD ["python", "-m", "lab", "doctor"]
