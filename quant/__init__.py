"""Quantization of built GNNs: A2Q, degree-aware (MEGA) and Degree-Quant methods, bit-packed storage,
the integer inference path (the golden model of hw/) and the accelerator export (`python -m quant.export`)."""
