"""Graph transformers over whole graphs as one node sequence: dense, sparse and cluster-blocked attention,
dual-interleaved schedules, and sequence parallelism (Ulysses, ring, 2D) (`-m graphtransformer.train`)."""
