"""CUDA_VISIBLE_DEVICES parsing and resolution against NVML's devices, with no NVML."""

from __future__ import annotations

import pytest

from slotop.collectors.gpu.visible import (
    Selection,
    VisibleEntry,
    parse_cuda_visible_devices,
    resolve_indices,
    resolve_visible,
)

UUIDS: list[str | None] = ["GPU-aaaa-0000", "GPU-aaab-1111", "GPU-cccc-2222"]


def test_unset_means_every_device() -> None:
    assert parse_cuda_visible_devices(None) is None
    assert resolve_visible(None, UUIDS) == Selection(targets=(0, 1, 2))


@pytest.mark.parametrize(
    ("raw", "entries", "refused"),
    [
        ("0", (VisibleEntry("0", index=0),), None),
        (" 1 , 0 ", (VisibleEntry("1", index=1), VisibleEntry("0", index=0)), None),
        ("GPU-aaab", (VisibleEntry("GPU-aaab", gpu_uuid_prefix="GPU-aaab"),), None),
        ("MIG-77", (VisibleEntry("MIG-77", mig_uuid="MIG-77"),), None),
        ("", (), None),
        ("  ", (), None),
        ("-1", (), "-1"),
        ("0,-1,1", (VisibleEntry("0", index=0),), "-1"),
        ("0,,1", (VisibleEntry("0", index=0),), ""),
        ("GPU-", (), "GPU-"),
        ("cuda:0", (), "cuda:0"),
        ("MIG-GPU-aaaa-0000/1/0", (), "MIG-GPU-aaaa-0000/1/0"),
    ],
)
def test_parse_stops_at_the_first_entry_cuda_refuses(
    raw: str, entries: tuple[VisibleEntry, ...], refused: str | None
) -> None:
    spec = parse_cuda_visible_devices(raw)
    assert spec is not None
    assert spec.entries == entries
    assert spec.refused_entry == refused
    assert (spec.refused_why is None) == (refused is None)


def test_legacy_mig_form_says_it_is_not_mapped() -> None:
    spec = parse_cuda_visible_devices("MIG-GPU-aaaa-0000/1/0")
    assert spec is not None and spec.refused_why is not None
    assert "legacy" in spec.refused_why


@pytest.mark.parametrize(
    ("raw", "targets", "note_names"),
    [
        ("2,0", (2, 0), None),
        ("1", (1,), None),
        ("GPU-cccc", (2,), None),
        ("GPU-aaab-1111", (1,), None),
        ("0,GPU-cccc-2222", (0, 2), None),
        ("MIG-77,0", ("MIG-77", 0), None),
        ("", (), None),
        ("0,7,1", (0,), "'7'"),
        ("3", (), "'3'"),
        ("1,1,2", (1,), "'1'"),
        ("0,GPU-aaaa-0000", (0,), "'GPU-aaaa-0000'"),
        ("GPU-aaa", (), "'GPU-aaa'"),
        ("GPU-ffff,0", (), "'GPU-ffff'"),
        ("1,-1,0", (1,), "'-1'"),
    ],
)
def test_resolve_visible_follows_cuda(
    raw: str, targets: tuple[int | str, ...], note_names: str | None
) -> None:
    selection = resolve_visible(parse_cuda_visible_devices(raw), UUIDS)
    assert selection.targets == targets
    if note_names is None and raw:
        assert selection.note is None
    elif note_names is not None:
        assert selection.note is not None
        assert note_names in selection.note
        assert "every entry after it" in selection.note


def test_empty_value_is_named_in_the_note() -> None:
    selection = resolve_visible(parse_cuda_visible_devices(""), UUIDS)
    assert selection == Selection(targets=(), note="CUDA_VISIBLE_DEVICES is empty")


def test_ambiguous_and_unknown_prefixes_say_why() -> None:
    ambiguous = resolve_visible(parse_cuda_visible_devices("GPU-aaa"), UUIDS)
    unknown = resolve_visible(parse_cuda_visible_devices("GPU-ffff"), UUIDS)
    assert ambiguous.note is not None and "matches 2 devices" in ambiguous.note
    assert unknown.note is not None and "matches no device" in unknown.note


def test_prefix_skips_devices_whose_uuid_nvml_refused() -> None:
    selection = resolve_visible(parse_cuda_visible_devices("GPU-aaa"), [None, "GPU-aaab-1111"])
    assert selection.targets == (1,)


@pytest.mark.parametrize(
    ("indices", "count", "targets", "note"),
    [
        ((0, 2), 3, (0, 2), None),
        ((2, 0, 2), 3, (2, 0), None),
        ((0, 5, 9), 3, (0,), "GPU indices from settings not found (NVML sees 3): 5, 9"),
        ((1,), 0, (), "GPU indices from settings not found (NVML sees 0): 1"),
    ],
)
def test_resolve_indices_skips_and_names_missing_ones(
    indices: tuple[int, ...], count: int, targets: tuple[int, ...], note: str | None
) -> None:
    assert resolve_indices(indices, count) == Selection(targets=targets, note=note)
