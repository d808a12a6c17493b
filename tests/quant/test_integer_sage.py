"""Integer GraphSAGE (quant.archs.sage.integer): bit-exactness on power-of-two scales, a node without in-edges and a
repeated edge included. What every architecture's integer model must satisfy (the float64 reference equals the
project's quantized GraphSAGE run in float64, the converter's degree tables, saturation, bad layers and models, the
slow Cora accuracy) is test_integer_archs.py."""

import numpy as np
from arch_cases import exact_on_pow2, lone_node_edges, sage_pow2_layer

from quant.archs.sage.integer import sage_graph, sage_layer_trace


def test_integer_path_is_bit_exact_on_power_of_two_scales():
    """Snapped constants + power-of-two steps: the integer layer equals the float64 fake-quant layer exactly,
    including a node without in-edges (mean 0) and a repeated edge (counted twice, as PyG's mean)."""
    rng = np.random.default_rng(0)
    n, ei = 30, lone_node_edges(rng, 30)  # node n-1 has no in-edges
    first = sage_pow2_layer(rng, n, 12, 6, last=False)
    second = sage_pow2_layer(rng, n, 6, 3, last=True)  # its input is the first layer's output quantizer
    x_codes, outs = exact_on_pow2("sage", rng, first, second, 12, ei)
    trace = sage_layer_trace(first, x_codes, sage_graph(ei, n))
    assert not trace["agg"][n - 1].any() and np.count_nonzero(outs[0]) > 0.2 * outs[0].size
