"""The kernel language computes what compiled Triton computes: types, rounding, NaN.

Each expected value is computed with NumPy the way Triton's ``semantic.py``
types the operation (both operands cast to the computation type first).
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.kernels.language as tl
from kernbench.errors import KernelError


def block(values, dtype):
    """A block of ``values`` in ``dtype`` (bf16 rounded, as a load would give it)."""
    return tl.cast(tl.Block(np.asarray(values, dtype=np.float64)), dtype)


# ----------------------------------------------------------------------------- dtypes


def test_dtype_predicates_follow_triton_names():
    assert tl.float16.is_fp16() and not tl.float16.is_bf16()
    assert tl.bfloat16.is_bf16() and tl.float32.is_fp32() and tl.float64.is_fp64()
    assert tl.int8.is_int8() and tl.uint32.is_uint32() and tl.int1.is_int1()
    assert not tl.int32.is_int64()
    # Triton counts int1 as an unsigned integer
    assert tl.int1.is_int() and tl.int1.is_int_unsigned() and not tl.int1.is_int_signed()
    assert tl.uint8.is_int_unsigned() and tl.int8.is_int_signed()
    assert not tl.float32.is_int() and not tl.float32.is_int_unsigned()
    assert (tl.int1.int_bitwidth, tl.int16.int_bitwidth, tl.uint64.int_bitwidth) == (1, 16, 64)
    with pytest.raises(KernelError, match=r"tl.float32 is not an integer type"):
        _ = tl.float32.int_bitwidth
