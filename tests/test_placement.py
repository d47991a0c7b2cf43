"""Tests for kernbench.placement: DP policies planned into per-PE shards, and host I/O."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernbench.errors import KernBenchError, PlacementError
from kernbench.placement import (
    MODES,
    DPPolicy,
    ShardSpec,
    gather,
    plan_shards,
    scatter,
    shards_by_pe,
    unique_blocks,
)

# 2 SIPs x 4 cubes x 2 PEs.
MACHINE = {"num_sips": 2, "cubes_per_sip": 4, "pes_per_cube": 2}
LEVEL_NAMES = ("sip", "cube", "pe")
ALL_POLICIES = [DPPolicy(sip=s, cube=c, pe=p) for s, c, p in itertools.product(MODES, repeat=3)]


def _table(shards: list[ShardSpec]) -> dict[tuple[int, int, int], tuple]:
    """coord -> ((start, stop) per dim, replica), the form hand-computed tables use."""
    return {s.coord: (tuple((sl.start, sl.stop) for sl in s.index), s.replica) for s in shards}


def _reference(
    policy: DPPolicy,
    shape: tuple[int, ...],
    counts: tuple[int, int, int],
    bases: tuple[int, int, int],
) -> dict[tuple[int, int, int], tuple]:
    """Closed-form placement: a block's position along a dimension is the mixed-radix
    number of the member indices of the levels that split that dimension (outer level
    most significant); the replica is the same over the replicate levels."""
    ndim = len(shape)
    split_dim = {"row_wise": 0, "column_wise": ndim - 1, "replicate": None}
    modes = (policy.sip, policy.cube, policy.pe)
    table = {}
    for members in itertools.product(*(range(k) for k in counts)):
        bounds = []
        for d in range(ndim):
            position, parts = 0, 1
            for mode, member, count in zip(modes, members, counts, strict=True):
                if split_dim[mode] == d:
                    position = position * count + member
                    parts *= count
            size = shape[d] // parts
            bounds.append((position * size, (position + 1) * size))
        replica = 0
        for mode, member, count in zip(modes, members, counts, strict=True):
            if mode == "replicate":
                replica = replica * count + member
        coord = tuple(b + m for b, m in zip(bases, members, strict=True))
        table[coord] = (tuple(bounds), replica)
    return table


def _copies(policy: DPPolicy, counts: tuple[int, int, int]) -> int:
    modes = (policy.sip, policy.cube, policy.pe)
    return math.prod(k for m, k in zip(modes, counts, strict=True) if m == "replicate")


# --- hand-computed maps -------------------------------------------------------------


def test_sip_row_cube_column_pe_replicate_on_8x16() -> None:
    shards = plan_shards(
        DPPolicy(sip="row_wise", cube="column_wise", pe="replicate"), (8, 16), 4, **MACHINE
    )
    # SIP s holds rows 4s:4s+4; cube c of it holds columns 4c:4c+4; both PEs hold a copy.
    expected = {}
    for sip, cube, pe in itertools.product(range(2), range(4), range(2)):
        expected[(sip, cube, pe)] = (((4 * sip, 4 * sip + 4), (4 * cube, 4 * cube + 4)), pe)
    assert _table(shards) == expected
    assert _table(shards)[(1, 2, 1)] == (((4, 8), (8, 12)), 1)
    assert all(s.shape == (4, 4) and s.nbytes == 64 for s in shards)
    assert [s.coord for s in shards] == sorted(s.coord for s in shards)


def test_column_wise_at_every_level_nests_outer_to_inner() -> None:
    shards = plan_shards(
        DPPolicy("column_wise", "column_wise", "column_wise"), (2, 32), 2, **MACHINE
    )
    table = _table(shards)
    assert len(table) == 16
    assert table[(0, 0, 0)] == (((0, 2), (0, 2)), 0)
    assert table[(0, 0, 1)] == (((0, 2), (2, 4)), 0)
    assert table[(0, 3, 1)] == (((0, 2), (14, 16)), 0)
    assert table[(1, 0, 0)] == (((0, 2), (16, 18)), 0)
    assert table[(1, 3, 1)] == (((0, 2), (30, 32)), 0)


def test_replicated_sips_number_copies_sip_major() -> None:
    shards = plan_shards(DPPolicy("replicate", "row_wise", "replicate"), (4, 3), 1, **MACHINE)
    table = _table(shards)
    # Block of cube c is rows c:c+1; copies across (sip, pe) are numbered sip-major.
    assert table[(0, 2, 0)] == (((2, 3), (0, 3)), 0)
    assert table[(0, 2, 1)] == (((2, 3), (0, 3)), 1)
    assert table[(1, 2, 0)] == (((2, 3), (0, 3)), 2)
    assert table[(1, 2, 1)] == (((2, 3), (0, 3)), 3)


@pytest.mark.parametrize("policy", ALL_POLICIES, ids=lambda p: f"{p.sip}-{p.cube}-{p.pe}")
@pytest.mark.parametrize("shape", [(16, 16), (16,), (16, 3, 32)])
def test_every_mode_combination_matches_closed_form(policy: DPPolicy, shape: tuple) -> None:
    shards = plan_shards(policy, shape, 2, **MACHINE)
    assert _table(shards) == _reference(policy, shape, (2, 4, 2), (0, 0, 0))
    assert [s.coord for s in shards] == sorted(_table(shards))
    copies = _copies(policy, (2, 4, 2))
    assert sum(s.nbytes for s in shards) == math.prod(shape) * 2 * copies
    # Each block has replicas 0..copies-1 exactly once.
    by_block: dict = {}
    for s in shards:
        by_block.setdefault(tuple((sl.start, sl.stop) for sl in s.index), []).append(s.replica)
    assert all(sorted(r) == list(range(copies)) for r in by_block.values())


# --- rank decisions -----------------------------------------------------------------


def test_1d_row_wise_and_column_wise_both_split_the_only_dimension() -> None:
    row = plan_shards(DPPolicy(sip="row_wise", cube="column_wise"), (24,), 4, **MACHINE)
    column = plan_shards(DPPolicy(sip="column_wise", cube="row_wise"), (24,), 4, **MACHINE)
    assert _table(row) == _table(column)
    assert _table(row)[(1, 1, 0)] == (((15, 18),), 0)


def test_0d_tensor_replicates_to_every_pe() -> None:
    shards = plan_shards(DPPolicy(), (), 8, **MACHINE)
    assert len(shards) == 16
    assert all(s.index == () and s.shape == () and s.nbytes == 8 for s in shards)
    assert sorted(s.replica for s in shards) == list(range(16))
    pieces = scatter(np.float64(2.5), shards)
    assert gather(shards, pieces, (), np.float64) == np.float64(2.5)


@pytest.mark.parametrize("level", LEVEL_NAMES)
@pytest.mark.parametrize("mode", ["row_wise", "column_wise"])
def test_0d_tensor_cannot_be_split_even_over_one_member(level: str, mode: str) -> None:
    policy = DPPolicy(**{level: mode, f"num_{level}s": 1})
    with pytest.raises(PlacementError, match=rf"0-d tensor with {level}='{mode}'.*replicate"):
        plan_shards(policy, (), 4, **MACHINE)


# --- counts and bases ---------------------------------------------------------------


def test_counts_select_the_first_members_from_each_base() -> None:
    policy = DPPolicy(sip="row_wise", cube="replicate", pe="column_wise", num_cubes=2, num_pes=1)
    shards = plan_shards(policy, (4, 6), 4, **MACHINE, cube_base=1, pe_base=1)
    assert sorted(_table(shards)) == [(0, 1, 1), (0, 2, 1), (1, 1, 1), (1, 2, 1)]
    assert _table(shards) == _reference(policy, (4, 6), (2, 2, 1), (0, 1, 1))


def test_default_counts_take_every_member_from_the_base() -> None:
    shards = plan_shards(DPPolicy(pe="row_wise"), (4, 2), 4, **MACHINE, sip_base=1, cube_base=3)
    assert sorted(_table(shards)) == [(1, 3, 0), (1, 3, 1)]


def test_num_sips_one_keeps_the_tensor_on_one_sip() -> None:
    shards = plan_shards(DPPolicy(cube="row_wise", num_sips=1), (8, 2), 4, **MACHINE, sip_base=1)
    assert {s.sip for s in shards} == {1}
    assert len(unique_blocks(shards)) == 4


@pytest.mark.parametrize(
    ("policy", "bases", "pattern"),
    [
        (DPPolicy(num_sips=3), {}, r"num_sips=3 exceeds.*at most 2 SIPs.*num_sips=2"),
        (DPPolicy(num_cubes=5), {}, r"num_cubes=5 exceeds.*at most 4 cubes.*cubes_per_sip=4"),
        (DPPolicy(num_pes=2), {"pe_base": 1}, r"num_pes=2 exceeds.*at most 1 PEs.*pe_base=1"),
        (DPPolicy(), {"cube_base": 4}, r"cube_base=4 is outside.*cubes_per_sip=4.*at most 3"),
    ],
)
def test_counts_beyond_the_machine_are_rejected(policy, bases, pattern) -> None:
    with pytest.raises(PlacementError, match=pattern):
        plan_shards(policy, (8, 8), 4, **MACHINE, **bases)


# --- errors -------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVEL_NAMES)
def test_bad_mode_names_level_value_and_valid_modes(level: str) -> None:
    with pytest.raises(PlacementError) as err:
        DPPolicy(**{level: "rowwise"})
    message = str(err.value)
    assert f"{level}='rowwise'" in message
    assert all(repr(mode) in message for mode in MODES)


@pytest.mark.parametrize("value", [0, -2, True, 1.5, "2"])
def test_bad_count_is_rejected(value) -> None:
    with pytest.raises(PlacementError, match=r"num_cubes must be a positive int or None"):
        DPPolicy(num_cubes=value)


def test_numpy_integer_counts_are_normalised() -> None:
    policy = DPPolicy(num_pes=np.int64(2))
    assert type(policy.num_pes) is int
    assert policy == DPPolicy(num_pes=2) and hash(policy) == hash(DPPolicy(num_pes=2))
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.pe = "row_wise"  # type: ignore[misc]


def test_indivisible_dimension_names_everything_needed_to_fix_it() -> None:
    with pytest.raises(PlacementError) as err:
        plan_shards(DPPolicy(sip="row_wise", cube="row_wise", num_cubes=3), (8, 16), 4, **MACHINE)
    message = str(err.value)
    assert "shape (8, 16)" in message
    assert "cube='row_wise' over 3 cubes" in message
    assert "dimension 0 has size 8" in message
    assert "4 per block after sip='row_wise' x2" in message
    assert "Valid num_cubes for this shape: 1, 2, 4" in message
    assert "multiple of 6" in message
    assert isinstance(err.value, KernBenchError)


def test_indivisible_last_dimension_lists_divisors_that_fit_the_machine() -> None:
    with pytest.raises(PlacementError) as err:
        plan_shards(DPPolicy(cube="column_wise"), (2, 6), 4, **MACHINE)
    message = str(err.value)
    assert "dimension 1 has size 6" in message
    assert "over 4 cubes" in message
    # 6 is also a divisor, but only 4 cubes exist.
    assert "Valid num_cubes for this shape: 1, 2, 3 (at most 4 available)" in message
    assert "multiple of 4" in message


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"num_sips": 0}, r"num_sips must be a positive int"),
        ({"pes_per_cube": -1}, r"pes_per_cube must be a positive int"),
        ({"sip_base": -1}, r"sip_base must be a non-negative int"),
    ],
)
def test_bad_machine_arguments_are_rejected(kwargs, pattern) -> None:
    with pytest.raises(PlacementError, match=pattern):
        plan_shards(DPPolicy(), (4,), 4, **{**MACHINE, **kwargs})


def test_bad_shape_and_itemsize_are_rejected() -> None:
    with pytest.raises(PlacementError, match="shape entry must be a non-negative int"):
        plan_shards(DPPolicy(), (4, -1), 4, **MACHINE)
    with pytest.raises(PlacementError, match="itemsize must be a positive int"):
        plan_shards(DPPolicy(), (4,), 0, **MACHINE)
    with pytest.raises(PlacementError, match="policy must be a DPPolicy"):
        plan_shards("row_wise", (4,), 4, **MACHINE)  # type: ignore[arg-type]


# --- shard records and helpers ------------------------------------------------------


def test_contiguous_offset_is_given_only_for_single_runs() -> None:
    rows = plan_shards(DPPolicy(sip="row_wise", cube="row_wise"), (16, 4), 2, **MACHINE)
    assert [s.contiguous_offset_bytes for s in rows if s.pe == 0] == [
        r * 2 * 4 * 2 for r in range(8)
    ]
    columns = plan_shards(DPPolicy(cube="column_wise"), (4, 8), 2, **MACHINE)
    assert all(s.contiguous_offset_bytes is None for s in columns)
    # One row split by columns is still one run per shard.
    row_vector = plan_shards(DPPolicy(cube="column_wise"), (1, 8), 2, **MACHINE)
    assert [s.contiguous_offset_bytes for s in row_vector if s.sip == 0 and s.pe == 0] == [
        0,
        4,
        8,
        12,
    ]


def test_shards_are_hashable_and_resolution_is_deterministic() -> None:
    policy = DPPolicy(sip="row_wise", pe="column_wise")
    first = plan_shards(policy, (4, 4), 4, **MACHINE)
    assert first == plan_shards(policy, (4, 4), 4, **MACHINE)
    assert len(set(first)) == len(first)


def test_shards_by_pe_rejects_two_shards_on_one_pe() -> None:
    shards = plan_shards(DPPolicy(pe="row_wise"), (4, 4), 4, **MACHINE)
    assert set(shards_by_pe(shards)) == {s.coord for s in shards}
    with pytest.raises(PlacementError, match=r"two shards of one tensor on PE .*\(0, 0, 0\)"):
        shards_by_pe(shards + shards[:1])


def test_unique_blocks_tile_the_tensor_once() -> None:
    shards = plan_shards(DPPolicy(sip="column_wise", pe="row_wise"), (4, 4), 4, **MACHINE)
    unique = unique_blocks(shards)
    assert [s.coord for s in unique] == [(0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1)]
    covered = np.zeros((4, 4), dtype=int)
    for s in unique:
        covered[s.index] += 1
    assert (covered == 1).all()


@pytest.mark.parametrize("policy", ALL_POLICIES, ids=lambda p: f"{p.sip}-{p.cube}-{p.pe}")
def test_scatter_gather_round_trip_for_every_mode_dtype_and_shape(policy: DPPolicy) -> None:
    rng = np.random.default_rng(7)
    for dtype, shape in itertools.product(
        (np.float32, np.int8, np.uint16), [(32,), (16, 16), (16, 3, 16)]
    ):
        array = rng.integers(0, 100, size=shape).astype(dtype)
        shards = plan_shards(policy, shape, array.itemsize, **MACHINE)
        pieces = scatter(array, shards)
        assert set(pieces) == {s.coord for s in shards}
        for s in shards:
            local = pieces[s.coord]
            assert local.shape == s.shape and local.nbytes == s.nbytes
            assert local.flags.c_contiguous and local.dtype == array.dtype
            np.testing.assert_array_equal(local, array[s.index])
        assert sum(p.nbytes for p in pieces.values()) == array.nbytes * _copies(policy, (2, 4, 2))
        result = gather(shards, pieces, shape, dtype)
        assert result.dtype == array.dtype
        np.testing.assert_array_equal(result, array)


def test_scattered_pieces_are_independent_copies() -> None:
    array = np.arange(16, dtype=np.int32).reshape(4, 4)
    shards = plan_shards(DPPolicy(), (4, 4), 4, **MACHINE)
    pieces = scatter(array, shards)
    pieces[(0, 0, 0)][0, 0] = -1
    assert array[0, 0] == 0 and pieces[(0, 0, 1)][0, 0] == 0


def test_gather_reads_replica_zero_and_accepts_flat_pieces() -> None:
    array = np.arange(32, dtype=np.uint16).reshape(4, 8)
    shards = plan_shards(DPPolicy(cube="column_wise"), (4, 8), 2, **MACHINE)
    pieces = {coord: piece.ravel() for coord, piece in scatter(array, shards).items()}
    pieces[(1, 0, 1)] = np.zeros_like(pieces[(1, 0, 1)])  # a replica: ignored
    del pieces[(0, 3, 1)]
    np.testing.assert_array_equal(gather(shards, pieces, (4, 8), np.uint16), array)


def test_gather_and_scatter_reject_mismatches() -> None:
    array = np.zeros((4, 8), dtype=np.float32)
    shards = plan_shards(DPPolicy(cube="row_wise"), (4, 8), 4, **MACHINE)
    pieces = scatter(array, shards)
    with pytest.raises(PlacementError, match=r"array of shape \(8, 4\).*shape \(4, 8\)"):
        scatter(array.T, shards)
    with pytest.raises(PlacementError, match="float64 .8 bytes per element"):
        scatter(array.astype(np.float64), shards)
    with pytest.raises(PlacementError, match=r"into shape \(32,\)"):
        gather(shards, pieces, (32,), np.float32)
    with pytest.raises(PlacementError, match="as int16"):
        gather(shards, pieces, (4, 8), np.int16)
    with pytest.raises(PlacementError, match=r"cover 16 of the 32 elements"):
        gather(unique_blocks(shards)[:2], pieces, (4, 8), np.float32)
    with pytest.raises(PlacementError, match=r"no piece for PE .*\(0, 2, 0\)"):
        gather(shards, {c: p for c, p in pieces.items() if c != (0, 2, 0)}, (4, 8), np.float32)
    with pytest.raises(PlacementError, match=r"piece for PE \(0, 0, 0\) has 3 elements"):
        gather(shards, {**pieces, (0, 0, 0): np.zeros(3)}, (4, 8), np.float32)


def test_zero_sized_dimension_round_trips() -> None:
    array = np.zeros((0, 4), dtype=np.int8)
    shards = plan_shards(DPPolicy(sip="row_wise", cube="column_wise"), (0, 4), 1, **MACHINE)
    assert all(s.nbytes == 0 for s in shards)
    assert gather(shards, scatter(array, shards), (0, 4), np.int8).shape == (0, 4)


# --- randomized round trip ----------------------------------------------------------


@st.composite
def placements(draw):
    machine = {
        "num_sips": draw(st.integers(1, 3)),
        "cubes_per_sip": draw(st.integers(1, 4)),
        "pes_per_cube": draw(st.integers(1, 3)),
    }
    available = (machine["num_sips"], machine["cubes_per_sip"], machine["pes_per_cube"])
    bases = tuple(draw(st.integers(0, n - 1)) for n in available)
    counts = tuple(draw(st.integers(1, n - b)) for n, b in zip(available, bases, strict=True))
    explicit = tuple(draw(st.booleans()) for _ in LEVEL_NAMES)
    ndim = draw(st.integers(0, 3))
    mode_choice = st.sampled_from(MODES if ndim else ("replicate",))
    modes = tuple(draw(mode_choice) for _ in LEVEL_NAMES)
    policy = DPPolicy(
        *modes,
        *(k if e else None for k, e, b, n in zip(counts, explicit, bases, available, strict=True)),
    )
    # A level without an explicit count takes every member from its base.
    counts = tuple(
        k if e else n - b for k, e, b, n in zip(counts, explicit, bases, available, strict=True)
    )
    split = [1] * ndim
    for mode, k in zip(modes, counts, strict=True):
        if mode != "replicate":
            split[0 if mode == "row_wise" else ndim - 1] *= k
    shape = tuple(f * draw(st.integers(1, 3)) for f in split)
    dtype = draw(st.sampled_from([np.float32, np.int8, np.uint16, np.float64]))
    return policy, shape, dtype, machine, counts, bases


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placements(), st.integers(0, 2**32 - 1))
def test_random_placements_round_trip(placement, seed: int) -> None:
    policy, shape, dtype, machine, counts, bases = placement
    array = np.random.default_rng(seed).integers(0, 120, size=shape).astype(dtype)
    base_args = dict(zip(("sip_base", "cube_base", "pe_base"), bases, strict=True))
    shards = plan_shards(policy, shape, array.itemsize, **machine, **base_args)
    assert _table(shards) == _reference(policy, shape, counts, bases)
    pieces = scatter(array, shards)
    assert sum(s.nbytes for s in shards) == array.nbytes * _copies(policy, counts)
    np.testing.assert_array_equal(gather(shards, pieces, shape, dtype), array)
