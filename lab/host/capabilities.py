"""Linux capabilities: the one name table and the hex-mask decoder.

    from lab.host.capabilities import CAP_BPF, decode_capabilities, effective_mask
    decode_capabilities("00000000a80425fb")              # ["CAP_CHOWN", "CAP_DAC_OVERRIDE", ...]
    decode_capabilities("00000000a80425fb", prefix=False)  # ["CHOWN", ...] as Docker spells them
    effective_mask() >> CAP_BPF & 1                      # does this process hold CAP_BPF?

``python -m lab doctor`` reports the capabilities it holds, the container code records what
the lab container really held, and the bpftrace collector decides whether it may attach:
all three decode ``/proc/<pid>/status`` masks with this table.
"""

from __future__ import annotations

from pathlib import Path

#: capability names by bit number, from include/uapi/linux/capability.h (0 … CAP_LAST_CAP = 40)
CAPABILITY_NAMES: tuple[str, ...] = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
)

CAP_SYS_ADMIN = CAPABILITY_NAMES.index("CAP_SYS_ADMIN")
CAP_PERFMON = CAPABILITY_NAMES.index("CAP_PERFMON")
CAP_BPF = CAPABILITY_NAMES.index("CAP_BPF")

STATUS = Path("/proc/self/status")


def decode_capabilities(mask_hex: str, *, prefix: bool = True) -> list[str]:
    """A ``CapEff``-style hex mask -> capability names, by bit; a bit this table does not
    know reads ``CAP_<n>``. ``prefix=False`` drops the ``CAP_`` of known names, as Docker's
    ``--cap-add`` spells them."""
    mask = int(mask_hex, 16)
    names: list[str] = []
    bit = 0
    while mask >> bit:
        if mask >> bit & 1:
            if bit >= len(CAPABILITY_NAMES):
                names.append(f"CAP_{bit}")
            else:
                name = CAPABILITY_NAMES[bit]
                names.append(name if prefix else name.removeprefix("CAP_"))
        bit += 1
    return names


def capability_mask(status_text: str, field_name: str = "CapEff") -> str | None:
    """The hex mask of ``field_name`` in a ``/proc/<pid>/status`` text, or None."""
    for line in status_text.splitlines():
        key, _, value = line.partition(":")
        if key == field_name:
            return value.strip()
    return None


def effective_mask(status_path: Path = STATUS) -> int:
    """This process's effective capabilities as a bit mask; 0 when they cannot be read."""
    try:
        mask = capability_mask(status_path.read_text())
        return int(mask, 16) if mask else 0
    except (OSError, ValueError):
        return 0


def effective_capabilities(status_path: Path = STATUS) -> list[str]:
    """This process's effective capabilities by name; empty when they cannot be read."""
    try:
        mask = capability_mask(status_path.read_text())
    except OSError:
        return []
    return decode_capabilities(mask) if mask else []
