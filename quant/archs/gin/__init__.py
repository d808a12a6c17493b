"""GIN (Xu et al.): ``X' = MLP((1 + eps) x_i + sum_j x_j)``; aggregation-first on the accelerator."""

from quant.archs.gin.integer import gin_graph
from quant.archs.spec import AGGREGATION_FIRST, ArchSpec

SPEC = ArchSpec(
    name="gin", display_name="GIN", package=__name__,
    point_schemes={"input": "channel", "aggregate": "feature"},
    converter="to_quantized_gin", dataflow=AGGREGATION_FIRST, graph=gin_graph, slot_array="graph.self_loop",
    layer_meta={"in_dim": "dim", "hidden_dim": "dim", "out_dim": "dim", "w_bits": "bits", "relu": bool,
                "has_b1": bool, "has_b2": bool, "x_step_scheme": "step_scheme", "hid_scheme": str},
    layer_weights=(("w1_codes", "w_bits", lambda m: (m["hidden_dim"], m["in_dim"])),
                   ("w2_codes", "w_bits", lambda m: (m["out_dim"], m["hidden_dim"]))))
