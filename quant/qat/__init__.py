"""Quantization-aware training: ``QuantConfig`` (``config``), ``quantize_`` and summaries (``api``), the pure math
and autograd functions (``quantizers``), the A2Q and Degree-Quant modules (``a2q``, ``nns``, ``degree_aware``,
``degree_quant``), which quantizer replaces each ``QuantPoint`` (``plan``), the bit budget (``budget``), the per-call
graph context (``graph_context``) and the hooks that plug it into ``gnn.trainer`` (``training_hooks``)."""
