"""Re-export of :mod:`hw.rtl.rtl_tb` (the verification components live with the RTL so the demo step can use them)."""

from hw.rtl.rtl_tb import (  # noqa: F401
    TB,
    StreamDriver,
    StreamMonitor,
    check_in_order,
    pack_lanes,
    pause_pattern,
    unpack_lanes,
)
