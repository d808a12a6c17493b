"""Quantization of built GNNs: A2Q, degree-aware (MEGA) and Degree-Quant methods, bit-packed storage,
the integer inference path (the golden model of hw/) and the accelerator export (`python -m quant.export`).

Methods (one call on a built FP32 model; the layer code is untouched)::

    from quant.api import QuantConfig, quantize_, quant_param_groups, quant_penalty, quant_summary
    quantize_(model, QuantConfig(method="a2q", target_bits=4.0), data)   # data=None for graph tasks

* `quant.config`      -- `QuantConfig` (methods "a2q" | "degree-aware" | "dq-int8" | "dq-int4"; bit conventions);
* `quant.quantizers`  -- pure math + autograd Functions (A2Q grid and estimators incl. Local Gradient; DQ affine);
* `quant.a2q`         -- `A2QQuantizer` module (per-node / NNS pool / degree table / channel / row / head params);
* `quant.nns`         -- Nearest Neighbor Strategy selection (range "code" = 2^(b-1)s default, "paper" = s(2^(b-1)-1));
* `quant.degree_aware`-- in-degree buckets of the MEGA-style table;
* `quant.degree_quant`-- `DQQuantizer` (percentile ranges, protective masking in training only);
* `quant.plan`        -- which quantizer replaces each `QuantPoint` of GCN / GAT / GIN / SAGE;
* `quant.graph_context` -- the per-call graph (in-degrees, batch, DQ mask) captured by a forward pre-hook;
* `quant.api`         -- `quantize_`, optimizer groups, the memory penalty a*relu(M - M_target)^2 (KB), summaries.

Bits: learned bitwidths are signed widths clamped to [1, 8]; post-ReLU tensors are reported without their sign
bit (``avg_bits``, A2Q's headline convention) and with it (``avg_bits_with_sign``).
"""
