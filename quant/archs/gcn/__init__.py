"""GCN (Kipf & Welling): ``X' = relu(Â (X W) + b)`` with A2Q's quantization points; the integer path may run in
either order on the accelerator (A (X W) and (A X) W are the same integers)."""

from quant.archs.gcn.integer import gcn_graph
from quant.archs.spec import CONFIG_ORDER, ArchSpec

SPEC = ArchSpec(
    name="gcn", display_name="GCN", package=__name__,
    point_schemes={"input": "feature", "xw": "channel", "aggregate": None},
    converter="to_quantized_gcn", dataflow=CONFIG_ORDER, graph=gcn_graph, slot_array="graph.gcn_weight",
    layer_meta={"in_dim": "dim", "out_dim": "dim", "w_bits": "bits", "relu": bool, "has_aggregate_quantizer": bool,
                "has_bias": bool, "xw_scheme": str},
    layer_weights=(("w_codes", "w_bits", lambda m: (m["out_dim"], m["in_dim"])),))
