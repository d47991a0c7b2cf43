"""``torch.isin``: whether each element is among the test elements, by a sort and a
binary search on the device.

The test elements are flattened and sorted (the sorting kernels), each element's place
among them is found by ``searchsorted`` (one binary-search kernel), and the sorted value
there is compared with the element (a gather and one comparison kernel), so it costs
about a sort of the test elements and a few passes over the elements (floats one more
over the sorted ones: their NaNs, sorted last, are searched as +inf, as torch's bisection
gives no order beside a NaN, and the sorted value found is still the NaN), whatever
``assume_unique`` says (torch uses it only to pick an algorithm).  Values compare in the
dtype torch promotes the two to; NaN is in nothing.  A number as ``test_elements`` is one
comparison (``eq``, or ``ne`` with ``invert``); a number as ``elements`` gives a 0-d result.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS, python_scalar, scalar_dtype
from kernbench.torch.searching import searchsorted
from kernbench.torch.shapes import flag_argument
from kernbench.torch.tensor import Tensor

__all__ = ["isin"]

_WHAT = "torch.isin"


def isin(
    elements: Any,
    test_elements: Any,
    *,
    assume_unique: bool = False,
    invert: bool = False,
) -> Tensor:
    """``torch.isin``: a bool tensor of ``elements``' shape, True where the element is one of
    ``test_elements`` (False with ``invert``)."""
    flag_argument(assume_unique, _WHAT, "assume_unique")
    invert = flag_argument(invert, _WHAT, "invert")
    given = [isinstance(v, Tensor) for v in (elements, test_elements)]
    if not any(given):
        raise TensorError(
            f"{_WHAT}: elements and test_elements cannot both be numbers; one must be a Tensor"
        )
    for value, is_tensor, name in zip(
        (elements, test_elements), given, ("elements", "test_elements"), strict=True
    ):
        if not is_tensor and python_scalar(value) is None:
            raise TensorError(f"{_WHAT}: {name} must be a Tensor or a number, got {value!r}")
    if not given[1]:  # a single test element: one comparison
        return elements.ne(test_elements) if invert else elements.eq(test_elements)
    test = test_elements
    if not given[0]:
        elements = test.new_full((), elements, dtype=scalar_dtype(elements))
    if not test.numel() or not elements.numel():
        return elements.new_full(tuple(elements.shape), invert, dtype=BOOL)
    as_numbers = DTYPE_OBJECTS["uint8"]  # searchsorted takes no bools
    dense = test.dense()
    made = [dense] if dense is not test else []
    flat = dense.view(-1)
    if flat.dtype is BOOL:
        flat = flat.to(as_numbers)
        made.append(flat)
    probe = elements.to(as_numbers) if elements.dtype is BOOL else elements
    if probe is not elements:
        made.append(probe)
    ordered = flat.sort().values
    sequence = ordered
    if ordered.dtype.is_floating_point:  # NaNs sort last; searched as +inf, never equal
        inf = float("inf")
        sequence = ordered.nan_to_num(nan=inf, posinf=inf, neginf=-inf)
        made.append(sequence)
    place = searchsorted(sequence, probe).clamp_max_(flat.numel() - 1)
    found = ordered.take(place)
    result = found.ne(probe) if invert else found.eq(probe)
    for t in (*made, ordered, place, found):
        t.free()
    return result
