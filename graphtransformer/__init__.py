"""Graph transformers over whole graphs as one node sequence: dense, sparse and cluster-blocked attention,
dual-interleaved schedules, and sequence parallelism (Ulysses, ring, 2D) (`-m graphtransformer.train`).

Layout (one idea per file):

* ``attention.py``  kernels returning ``(out, lse)``: dense (explicit masked softmax), fused flash (all-pairs, CPU
  and CUDA), edge-list sparse (plain autograd); the LSE merge.
* ``edge_attention.py`` edge-list sparse with recompute backward (no per-edge tensor kept).
* ``flex.py``       FlexAttention block-sparse topology attention (METIS order, bitmask per tile, LSE merge).
* ``cluster.py``    METIS reordering + dense tiles for dense cluster pairs + edge-list remainder (exact topology).
* ``positional.py`` degree index, Laplacian eigenvector PE, random-walk PE.
* ``model.py``      single-device reference model; per-layer schedule and per-step dense switching.
* ``comm.py``       Ulysses all-to-all pair, ring attention (LSE merge, recompute backward), halo exchange; bytes.
* ``parallel.py``   ``parallelize_graph_transformer(model, mesh, cfg)`` over a ("cp", "hp") DeviceMesh; DDP sums
  replicated gradients.
* ``sharding.py``   selective activation checkpointing and FSDP2 (``fully_shard``), applied by ``parallelize``.
* ``quantize.py``   ``quant.quantize_`` on a graph transformer (QuantPoints on layer inputs, Q/K/V, weights).
* ``equivalence.py`` spawn-based check that a layout equals the single-process model (outputs and gradients).
* ``training.py`` / ``train.py``  full-graph node classification, single process or ``torchrun``.

GPU: ``edge_attention.py`` (edge-list softmax with recompute backward, the ``sparse`` kind on every device) and
``flex.py`` (FlexAttention block-sparse tiles with the graph's bitmask, the ``flex`` kind); single-process training
takes ``--device cuda``.

Not yet: a distributed global token, attention dropout in the
distributed kernels, quantized sequence-parallel training.
"""
