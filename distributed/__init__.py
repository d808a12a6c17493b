"""Distributed full-graph GNN training on torch.distributed: partitioning, halo exchange with compressed
(down to one-bit) codecs, pipelining and bounded staleness (`torchrun ... -m distributed.train`)."""
