"""GAT (Veličković et al.): attention over in-edges with a self loop per node; integer path in fixed point (no
accelerator dataflow: ``hw/`` does not simulate its layers)."""

from quant.archs.gat.integer import gat_graph
from quant.archs.spec import ArchSpec

SPEC = ArchSpec(
    name="gat", display_name="GAT", package=__name__,
    point_schemes={"input": "feature", "xw": "feature", "aggregate": None},
    converter="to_quantized_gat", graph=gat_graph,
    layer_meta={"in_dim": "dim", "heads": "dim", "channels": "dim", "w_bits": "bits", "att_bits": "bits",
                "score_bits": "bits", "concat": bool, "negative_slope": "number", "has_bias": bool,
                "next_layer_codes": bool},
    layer_weights=(("w_codes", "w_bits", lambda m: (m["heads"] * m["channels"], m["in_dim"])),
                   ("att_src_codes", "att_bits", lambda m: (m["heads"], m["channels"])),
                   ("att_dst_codes", "att_bits", lambda m: (m["heads"], m["channels"]))))
