"""Message-passing layers, one per file, each exposing named quantization points (see quant_point.py)."""

from gnn.conv.gat import GATConv
from gnn.conv.gcn import GCNConv
from gnn.conv.gin import GINConv
from gnn.conv.linear import Linear
from gnn.conv.quant_point import QuantPoint
from gnn.conv.sage import SAGEConv

__all__ = ["GATConv", "GCNConv", "GINConv", "Linear", "QuantPoint", "SAGEConv"]
