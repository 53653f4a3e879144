"""Which NVML devices a process sees: CUDA_VISIBLE_DEVICES and explicit indices, resolved purely.

Supported CUDA_VISIBLE_DEVICES entries: NVML indices (`0,2`), `GPU-<uuid>` and unique prefixes of
it, and `MIG-<uuid>` (R470+ drivers). Like CUDA, the first entry that names no device (`-1`, `7`
on a two-GPU box, a repeat, an unknown or ambiguous UUID, the legacy `MIG-GPU-<uuid>/<gi>/<ci>`
form) hides itself and every entry after it. Indices are read in NVML (PCI bus) order, which is
CUDA's order when `CUDA_DEVICE_ORDER=PCI_BUS_ID` or when every GPU is the same model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_INDEX = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class VisibleEntry:
    """One CUDA_VISIBLE_DEVICES entry: an index, a GPU UUID prefix, or a MIG UUID."""

    text: str
    index: int | None = None
    gpu_uuid_prefix: str | None = None
    mig_uuid: str | None = None


@dataclass(frozen=True, slots=True)
class VisibleSpec:
    """CUDA_VISIBLE_DEVICES parsed up to the first entry CUDA would refuse."""

    raw: str
    entries: tuple[VisibleEntry, ...]
    refused_entry: str | None = None
    refused_why: str | None = None


@dataclass(frozen=True, slots=True)
class Selection:
    """The devices to read, in CUDA order: NVML indices, or MIG UUIDs still to look up."""

    targets: tuple[int | str, ...]
    note: str | None = None


def dropped_note(entry: str, why: str) -> str:
    """Say that a CUDA_VISIBLE_DEVICES entry, and the ones after it, hide no device."""
    return f"CUDA_VISIBLE_DEVICES entry {entry!r} {why}; CUDA ignores it and every entry after it"


def parse_cuda_visible_devices(raw: str | None) -> VisibleSpec | None:
    """Parse CUDA_VISIBLE_DEVICES; None when it is unset (every device is visible)."""
    if raw is None:
        return None
    if not raw.strip():
        return VisibleSpec(raw=raw, entries=())
    entries: list[VisibleEntry] = []
    for piece in raw.split(","):
        text = piece.strip()
        if _INDEX.fullmatch(text):
            entries.append(VisibleEntry(text=text, index=int(text)))
        elif text.startswith("MIG-GPU-"):
            why = "is the legacy MIG-GPU-<uuid>/<gi>/<ci> form, which slotop does not map"
            return VisibleSpec(raw, tuple(entries), text, why)
        elif text.startswith("GPU-") and len(text) > len("GPU-"):
            entries.append(VisibleEntry(text=text, gpu_uuid_prefix=text))
        elif text.startswith("MIG-") and len(text) > len("MIG-"):
            entries.append(VisibleEntry(text=text, mig_uuid=text))
        else:
            why = "is not a device index, GPU-<uuid> or MIG-<uuid>"
            return VisibleSpec(raw, tuple(entries), text, why)
    return VisibleSpec(raw=raw, entries=tuple(entries))


def _target_for(entry: VisibleEntry, uuids: Sequence[str | None]) -> int | str:
    """Return the NVML index or MIG UUID an entry names, raising LookupError with why not."""
    if entry.index is not None:
        if entry.index >= len(uuids):
            raise LookupError(f"is not a device index (NVML sees {len(uuids)})")
        return entry.index
    if entry.gpu_uuid_prefix is not None:
        prefix = entry.gpu_uuid_prefix
        matches = [
            i for i, uuid in enumerate(uuids) if uuid is not None and uuid.startswith(prefix)
        ]
        if not matches:
            raise LookupError("matches no device's UUID")
        if len(matches) > 1:
            raise LookupError(f"matches {len(matches)} devices' UUIDs")
        return matches[0]
    assert entry.mig_uuid is not None
    return entry.mig_uuid


def resolve_visible(spec: VisibleSpec | None, uuids: Sequence[str | None]) -> Selection:
    """Resolve a parsed CUDA_VISIBLE_DEVICES against NVML's devices (`uuids[i]` is index i's)."""
    if spec is None:
        return Selection(targets=tuple(range(len(uuids))))
    if not spec.entries and spec.refused_entry is None:
        return Selection(targets=(), note="CUDA_VISIBLE_DEVICES is empty")
    targets: list[int | str] = []
    for entry in spec.entries:
        try:
            target = _target_for(entry, uuids)
        except LookupError as exc:
            return Selection(tuple(targets), dropped_note(entry.text, str(exc)))
        if target in targets:
            return Selection(tuple(targets), dropped_note(entry.text, "repeats a device"))
        targets.append(target)
    note = None
    if spec.refused_entry is not None and spec.refused_why is not None:
        note = dropped_note(spec.refused_entry, spec.refused_why)
    return Selection(tuple(targets), note)


def resolve_indices(indices: Sequence[int], device_count: int) -> Selection:
    """Select explicit NVML indices (from settings), skipping, and naming, those that do not exist."""
    targets: list[int | str] = []
    missing: list[int] = []
    for index in indices:
        if not 0 <= index < device_count:
            missing.append(index)
        elif index not in targets:
            targets.append(index)
    note = None
    if missing:
        listed = ", ".join(str(index) for index in missing)
        note = f"GPU indices from settings not found (NVML sees {device_count}): {listed}"
    return Selection(tuple(targets), note)
