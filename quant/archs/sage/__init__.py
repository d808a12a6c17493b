"""GraphSAGE (mean aggregator): ``X' = relu(mean_j x_j Wn + x_i Wr + b)``; aggregation-first on the accelerator
(the golden model aggregates the quantized input)."""

from quant.archs.sage.integer import sage_graph
from quant.archs.spec import AGGREGATION_FIRST, ArchSpec

SPEC = ArchSpec(
    name="sage", display_name="GraphSAGE", package=__name__,
    point_schemes={"input": "feature", "aggregate": "feature"},
    converter="to_quantized_sage", dataflow=AGGREGATION_FIRST, graph=sage_graph, slot_array="graph.mean_weight",
    layer_meta={"in_dim": "dim", "out_dim": "dim", "w_bits": "bits", "relu": bool, "has_bias": bool},
    layer_weights=(("wn_codes", "w_bits", lambda m: (m["out_dim"], m["in_dim"])),
                   ("wr_codes", "w_bits", lambda m: (m["out_dim"], m["in_dim"]))))
