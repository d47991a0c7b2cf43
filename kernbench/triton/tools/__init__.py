"""``triton.tools``: only ``tensor_descriptor``, which refuses (TMA is not modelled)."""
