"""Storage formats of quantized tensors, numpy only (``hw/`` reads them): fixed-point arithmetic (``fixed_point``,
specified in ``quant/FIXED_POINT.md``), bit-packed rows (``packing``), MEGA's Adaptive-Package stream
(``adaptive_package``) and the measured storage of an export (``storage``)."""
