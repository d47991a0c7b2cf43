"""Object collectives: every rank gets PyTorch's objects, in functional and timing-only
mode alike, after the copies and tensor collectives PyTorch makes (checked call by
call with the bytes each moves)."""

from __future__ import annotations

import pickle
import warnings

import pytest

import kernbench
import kernbench.torch.distributed as dist
from kernbench.errors import CollectiveMismatchError, DistributedError, RankError

SIZE_WORDS = 8  # an int64 size


def _program() -> dict:
    dist.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    out: dict = {}
    gathered = [None] * n
    dist.all_gather_object(gathered, {"rank": r, "pad": "x" * (37 * r)})
    out["all_gather"] = gathered
    listed = [{"seed": 1234}, [1, 2, 3], "hi"] if r == 1 else [None, None, None]
    dist.broadcast_object_list(listed, src=1)
    out["broadcast"] = listed
    at_two = [None] * n if r == 2 else None
    dist.gather_object(("g", r), at_two, dst=2)
    out["gather"] = at_two
    mine = [None]
    dist.scatter_object_list(mine, [f"o{i}" * (i + 1) for i in range(n)] if r == 0 else None, 0)
    out["scatter"] = mine[0]
    if r == 0:
        dist.send_object_list([{"a": 1}, "b"], dst=3)
    elif r == 3:
        box = [None, None]
        out["sender"] = dist.recv_object_list(box)
        out["received"] = box
    return out


def _expected(r: int, n: int) -> dict:
    out = {
        "all_gather": [{"rank": i, "pad": "x" * (37 * i)} for i in range(n)],
        "broadcast": [{"seed": 1234}, [1, 2, 3], "hi"],
        "gather": [("g", i) for i in range(n)] if r == 2 else None,
        "scatter": f"o{r}" * (r + 1),
    }
    if r == 3:
        out |= {"sender": 0, "received": [{"a": 1}, "b"]}
    return out


def _size(obj) -> int:
    return len(pickle.dumps(obj))


def test_objects_arrive_in_both_modes_after_the_same_collectives():
    n = 4
    runs = [
        kernbench.simulate(_program, topology="ring8", world_size=n, timing_only=timing_only)
        for timing_only in (False, True)
    ]
    for run in runs:
        assert run.returns == [_expected(r, n) for r in range(n)]
    functional, timing = runs
    assert functional.per_rank_ps == timing.per_rank_ps
    assert functional.elapsed_ps == timing.elapsed_ps
    gathered = max(_size({"rank": i, "pad": "x" * (37 * i)}) for i in range(n))
    listed = [{"seed": 1234}, [1, 2, 3], "hi"]
    scattered = max(_size(f"o{i}" * (i + 1)) for i in range(n))
    sent = [{"a": 1}, "b"]
    expected = [
        ("all_gather", n * SIZE_WORDS),  # the sizes
        ("all_gather", n * gathered),  # the bytes, padded to the largest
        ("broadcast", len(listed) * SIZE_WORDS),
        ("broadcast", sum(map(_size, listed))),
        ("all_gather", n * SIZE_WORDS),
        ("gather", n * max(_size(("g", i)) for i in range(n))),
        ("broadcast", SIZE_WORDS),  # the largest size
        ("scatter", n * scattered),
        ("scatter", n * SIZE_WORDS),
        ("send_recv", len(sent) * SIZE_WORDS),
        ("send_recv", sum(map(_size, sent))),
    ]
    for run in runs:
        calls = [(c["op"], c["bytes"]) for c in run.report["collectives"]]
        assert calls == expected


def _subgroup() -> list:
    dist.init_process_group()
    group = dist.new_group([0, 2])
    got = [None, None]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        returned = dist.all_gather_object(got, dist.get_rank() * 10, group=group)
    return [returned, got, [str(w.message) for w in seen]]


def test_a_subgroup_gathers_its_members_and_others_are_skipped_with_a_warning():
    run = kernbench.simulate(_subgroup, topology="ring8", world_size=3)
    skipped = "Running all_gather_object on global rank 1 which does not belong to the given group."
    assert run.returns == [
        [None, [0, 20], []],
        [None, [None, None], [skipped]],
        [None, [0, 20], []],
    ]


def _raises(body, world_size: int = 2, timing_only: bool = False) -> str:
    with pytest.raises((DistributedError, RankError)) as info:
        kernbench.simulate(body, topology="ring8", world_size=world_size, timing_only=timing_only)
    return str(info.value)


def _short_list():
    dist.init_process_group()
    dist.all_gather_object([None], 1)


def _unpicklable():
    dist.init_process_group()
    dist.broadcast_object_list([lambda: 0] if dist.get_rank() == 0 else [None], src=0)


def _list_off_the_destination():
    dist.init_process_group()
    dist.gather_object(1, [None, None], dst=0)


def _no_inputs_at_the_source():
    dist.init_process_group()
    dist.scatter_object_list([None], None, src=0)


def _send_to_itself():
    dist.init_process_group()
    dist.send_object_list([1], dst=dist.get_rank())


def _receive_from_itself():
    dist.init_process_group()
    dist.recv_object_list([None], src=dist.get_rank())


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            _short_list,
            "all_gather_object: object_list on rank 0 must be a list of 2 entries, one per "
            "rank of the group (got a list of 1); make it [None] * dist.get_world_size(group)",
        ),
        # these named send and recv, calls the program did not make
        (_send_to_itself, "send_object_list: rank 0 cannot send to itself (dst=0)"),
        (_receive_from_itself, "recv_object_list: rank 0 cannot receive from itself (src=0)"),
        (_unpicklable, "broadcast_object_list: rank 0 cannot pickle its object"),
        (_list_off_the_destination, "object_gather_list must NOT be specified on non-dest"),
        (_no_inputs_at_the_source, "the source rank 0 must pass scatter_object_input_list"),
    ],
)
def test_misuse_names_the_call_and_what_to_pass(body, message):
    assert message in _raises(body)


def _output_list_of(call: str, length: int):
    dist.init_process_group()
    out = [None] * length
    if call == "all_gather_object":
        dist.all_gather_object(out, dist.get_rank())
    else:
        dist.gather_object(dist.get_rank(), out if dist.get_rank() == 1 else None, dst=1)


@pytest.mark.parametrize("call", ["all_gather_object", "gather_object"])
@pytest.mark.parametrize("length", [2, 4])
def test_an_output_list_must_hold_one_entry_per_rank_as_torch_requires(call, length):
    arg = "object_list" if call == "all_gather_object" else "object_gather_list"
    rank = 0 if call == "all_gather_object" else 1
    with pytest.raises(RankError) as info:
        kernbench.simulate(_output_list_of, topology="ring8", world_size=3, args=(call, length))
    assert info.value.rank == rank
    assert isinstance(info.value.original, DistributedError)
    assert str(info.value.original) == (
        f"{call}: {arg} on rank {rank} must be a list of 3 entries, one per rank of the "
        f"group (got a list of {length}); make it [None] * dist.get_world_size(group)"
    )


def _mismatched_objects(case: str):
    dist.init_process_group()
    r = dist.get_rank()
    if case == "lengths":  # the source's list of 3, the others' lists of 2
        dist.broadcast_object_list([1, 2, 3] if r == 1 else [None, None], src=1)
    elif case == "calls":
        if r == 0:
            dist.broadcast_object_list([1], src=0)
        else:
            dist.all_gather_object([None] * 3, r)
    elif case == "roots":
        dist.scatter_object_list([None], [1, 2, 3], src=r)  # every rank its own source
    else:
        dist.gather_object(r, [None] * 3, dst=r)


@pytest.mark.parametrize("timing_only", [False, True], ids=["functional", "timing-only"])
@pytest.mark.parametrize(
    ("case", "says"),
    [
        (
            "lengths",
            [
                "object_list differs: a list of 2 objects on ranks [0, 2], a list of 3 objects "
                "on ranks [1]; every rank must pass a list of the same length",
                "rank 0 called broadcast_object_list(object_list=a list of 2 objects, src=1)",
                "rank 1 called broadcast_object_list(object_list=a list of 3 objects, src=1)",
            ],
        ),
        (
            "calls",
            [
                "the collective differs: 'broadcast_object_list' on ranks [0], "
                "'all_gather_object' on ranks [1, 2]",
                "rank 0 called broadcast_object_list(object_list=a list of 1 object, src=0)",
                "rank 1 called all_gather_object()",
            ],
        ),
        (
            "roots",
            [
                "src differs: 0 on ranks [0], 1 on ranks [1], 2 on ranks [2]",
                "rank 2 called scatter_object_list(src=2)",
            ],
        ),
        (
            "destinations",
            [
                "dst differs: 0 on ranks [0], 1 on ranks [1], 2 on ranks [2]",
                "rank 1 called gather_object(dst=1)",
            ],
        ),
    ],
)
def test_object_calls_that_do_not_match_are_named_in_object_terms(case, says, timing_only):
    with pytest.raises(CollectiveMismatchError) as info:
        kernbench.simulate(
            _mismatched_objects,
            topology="ring8",
            world_size=3,
            args=(case,),
            timing_only=timing_only,
        )
    text = str(info.value)
    assert text.startswith(
        "collective #0 on ProcessGroup(WORLD, ranks=[0, 1, 2]) does not match across ranks:"
    )
    for line in says:
        assert f"\n    {line}\n" in text
    for tensor_terms in ("dtype", "shape", "int32", "uint8", "tensor"):
        assert tensor_terms not in text  # nothing about the byte tensors beneath
    assert set(info.value.blocked) == {0, 1, 2}


def test_object_calls_are_no_longer_refused():
    for name in ("all_gather_object", "broadcast_object_list", "gather_object"):
        assert callable(getattr(dist, name))
    for name in ("scatter_object_list", "send_object_list", "recv_object_list"):
        assert name in dist.__all__


def _both_roots():
    dist.init_process_group()
    dist.broadcast_object_list([1], src=0, group_src=0)


def test_a_root_given_twice_is_refused_as_torch_does():
    assert "give the root as a global rank or as a group rank, not both" in _raises(_both_roots)


def _tensors_in_objects(read: bool) -> list:
    import kernbench.torch as torch

    dist.init_process_group()
    r, n = dist.get_rank(), dist.get_world_size()
    gathered = [None] * n
    mine = {"loss": torch.tensor([1.5 * r]).to(torch.bfloat16), "w": torch.ones(2, 3).T * r}
    dist.all_gather_object(gathered, mine)
    config = [torch.arange(3)] if r == 0 else [None]
    dist.broadcast_object_list(config, src=0)
    got = [
        [(o["loss"].dtype, o["w"].shape, o["w"].device) for o in gathered],
        config[0].device,
    ]
    if read:
        got.append([(o["loss"].item(), o["w"].tolist()) for o in gathered] + [config[0].tolist()])
    return got


def test_tensors_in_objects_arrive_on_the_receivers_device_in_both_modes():
    # pickling a tensor raised TypeError ("cannot pickle 'generator' object")
    import kernbench.torch as torch

    functional = kernbench.simulate(
        lambda: _tensors_in_objects(read=False), topology="ring8", world_size=2
    )
    timing = kernbench.simulate(
        lambda: _tensors_in_objects(read=False), topology="ring8", world_size=2, timing_only=True
    )
    assert functional.returns == timing.returns
    assert functional.elapsed_ps == timing.elapsed_ps
    for r in range(2):
        here = torch.device("ahbm", r)
        assert functional.returns[r] == [[(torch.bfloat16, (3, 2), here)] * 2, here]
    values = kernbench.simulate(
        lambda: _tensors_in_objects(read=True), topology="ring8", world_size=2
    ).returns
    for r in range(2):
        assert values[r][2] == [
            (0.0, [[0.0, 0.0]] * 3),
            (1.5, [[1.0, 1.0]] * 3),
            [0, 1, 2],
        ]


def test_deepcopy_copies_on_the_device_and_copy_shares_memory():
    import copy

    import kernbench.torch as torch
    from kernbench.runtime import RuntimeContext, use_context

    with use_context(RuntimeContext("tiny")):
        t = torch.arange(4, dtype=torch.float32).requires_grad_()
        t.grad = torch.ones(4)
        deep = copy.deepcopy(t)
        shallow = copy.copy(t)
        back = pickle.loads(pickle.dumps(t[1:3]))
        whole = pickle.loads(pickle.dumps(t))
        t.data.add_(10)
        assert deep.tolist() == [0.0, 1.0, 2.0, 3.0] and deep.requires_grad
        assert deep.grad is not t.grad and deep.grad.tolist() == [1.0] * 4
        assert shallow.tolist() == [10.0, 11.0, 12.0, 13.0] and shallow.requires_grad
        assert back.tolist() == [1.0, 2.0]
        assert whole.tolist() == [0.0, 1.0, 2.0, 3.0] and whole.requires_grad
