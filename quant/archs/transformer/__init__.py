"""The graph transformer (``graphtransformer``): its quantized tensors are exported, with no integer path."""

from quant.archs.spec import ArchSpec

SPEC = ArchSpec(name="graph-transformer", display_name="graph transformer", package=__name__)
