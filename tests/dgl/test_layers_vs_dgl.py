"""Our GCN, GraphSAGE (mean), GIN (sum) and GAT layers against DGL's GraphConv, SAGEConv, GINConv and GATConv with
the same weights: forward and every gradient in float64, on a graph with self loops, isolated nodes and duplicate
edges. Runs in DGL's environment (``make test-dgl``); skipped elsewhere.

Conventions found (docs/dgl.md): our GCN and GAT drop a graph's own self loops and add one per node, DGL's
GraphConv and GATConv use the edges they are given (so DGL gets ``add_self_loop(remove_self_loop(g))``); our GCN
normalises an edge by the in-degrees of both ends (PyG's gcn_norm), DGL's norm="both" the source by its out-degree
(equal on undirected graphs);
GraphSAGE and GIN use the edges as given on both sides, an existing self loop being one more neighbour; duplicate
edges count once per copy everywhere (degrees, sums, means, attention softmax)."""

from __future__ import annotations

import pytest
import torch

dgl = pytest.importorskip("dgl", reason="DGL lives in its own environment: make test-dgl (torch 2.2.1, DGL 2.1)")
from dgl.nn import GATConv as DGLGAT  # noqa: E402
from dgl.nn import GINConv as DGLGIN  # noqa: E402
from dgl.nn import GraphConv  # noqa: E402
from dgl.nn import SAGEConv as DGLSAGE  # noqa: E402

from gnn.conv import GATConv, GCNConv, GINConv, SAGEConv  # noqa: E402
from gnn.conv.gin import gin_mlp  # noqa: E402

N, F_IN, F_OUT = 12, 7, 5


def awkward_graph() -> torch.Tensor:
    """(2, E): a self loop on node 0 and 3, a duplicated edge 1->2, nodes 10 and 11 without any edge."""
    g = torch.Generator().manual_seed(0)
    ei = torch.randint(0, 10, (2, 30), generator=g)
    extra = torch.tensor([[0, 3, 1, 1, 4], [0, 3, 2, 2, 5]])
    return torch.cat([ei, extra], dim=1)


def dgl_graph(edge_index: torch.Tensor, gcn_loops: bool = False):
    g = dgl.graph((edge_index[0], edge_index[1]), num_nodes=N)
    return dgl.add_self_loop(dgl.remove_self_loop(g)) if gcn_loops else g


def inputs() -> torch.Tensor:
    return torch.randn(N, F_IN, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def compare(ours, theirs, run_ours, run_theirs, pairs) -> None:
    """Forward outputs equal to 1e-10, and the gradients of a random projection of them w.r.t. the input and each
    (our parameter, their parameter, transform) pair."""
    x1, x2 = inputs().requires_grad_(), inputs().requires_grad_()
    out1, out2 = run_ours(x1), run_theirs(x2)
    torch.testing.assert_close(out1, out2, rtol=1e-10, atol=1e-10)
    probe = torch.randn(out1.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    (out1 * probe).sum().backward()
    (out2 * probe).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-10, atol=1e-10)
    for mine, theirs_param, view in pairs:
        torch.testing.assert_close(mine.grad, view(theirs_param.grad), rtol=1e-10, atol=1e-10)


def _gcn_pair():
    ours = GCNConv(F_IN, F_OUT, cached=False).double()
    theirs = GraphConv(F_IN, F_OUT, norm="both").double()
    with torch.no_grad():
        theirs.weight.copy_(ours.lin.weight.t())
        ours.bias.normal_()
        theirs.bias.copy_(ours.bias)
    return ours, theirs, [(ours.lin.weight, theirs.weight, lambda w: w.t()), (ours.bias, theirs.bias, lambda b: b)]


def test_gcn_equals_graphconv_on_undirected_graphs():
    ei = awkward_graph()
    ei = torch.cat([ei, ei.flip(0)], dim=1)  # every edge both ways (the duplicate too)
    ours, theirs, pairs = _gcn_pair()
    g = dgl_graph(ei, gcn_loops=True)
    compare(ours, theirs, lambda x: ours(x, ei), lambda x: theirs(g, x), pairs)


def test_gcn_on_directed_graphs_normalises_sources_by_in_degree():
    """Ours (as PyG's gcn_norm): ``1 / sqrt(d_in(src) d_in(dst))``; DGL's norm="both" takes the source's out-degree.
    With that weight given explicitly (norm="none"), GraphConv equals ours on a directed graph."""
    ei = awkward_graph()
    ours, theirs, pairs = _gcn_pair()
    theirs._norm = "none"
    g = dgl_graph(ei, gcn_loops=True)
    src, dst = g.edges()
    deg = g.in_degrees().double()
    weight = (deg[src] * deg[dst]).rsqrt()
    compare(ours, theirs, lambda x: ours(x, ei), lambda x: theirs(g, x, edge_weight=weight), pairs)


@pytest.mark.parametrize("f_out", [F_OUT, 9])  # DGL projects before the mean when F_in > F_out
def test_sage_mean_equals_sageconv(f_out):
    ei = awkward_graph()
    ours = SAGEConv(F_IN, f_out).double()
    theirs = DGLSAGE(F_IN, f_out, "mean").double()
    with torch.no_grad():
        ours.lin_neigh.bias.normal_()
        theirs.fc_neigh.weight.copy_(ours.lin_neigh.weight)
        theirs.fc_self.weight.copy_(ours.lin_root.weight)
        theirs.fc_self.bias.copy_(ours.lin_neigh.bias)  # DGL 2.1 keeps the layer's one bias in fc_self
    g = dgl_graph(ei)
    compare(ours, theirs, lambda x: ours(x, ei), lambda x: theirs(g, x),
            [(ours.lin_neigh.weight, theirs.fc_neigh.weight, lambda w: w),
             (ours.lin_root.weight, theirs.fc_self.weight, lambda w: w),
             (ours.lin_neigh.bias, theirs.fc_self.bias, lambda b: b)])


def test_gin_sum_equals_ginconv():
    ei = awkward_graph()
    ours = GINConv(F_IN, F_OUT, mlp=gin_mlp(F_IN, F_OUT, 8), train_eps=True).double()
    with torch.no_grad():
        ours.eps.fill_(0.3)
    ours.eval()  # the MLP's batch norm: running statistics on both sides
    theirs = DGLGIN(ours.mlp, "sum", init_eps=0.3, learn_eps=True).double()
    with torch.no_grad():
        theirs.eps.copy_(ours.eps.view_as(theirs.eps))  # DGL made it float32 0.3 before .double()
    g = dgl_graph(ei)
    compare(ours, theirs, lambda x: ours(x, ei), lambda x: theirs(g, x),
            [(ours.eps, theirs.eps, lambda e: e.view_as(ours.eps))])


@pytest.mark.parametrize("concat", [True, False])
def test_gat_equals_gatconv(concat):
    ei = awkward_graph()
    heads = 3
    ours = GATConv(F_IN, F_OUT, heads=heads, concat=concat).double()
    theirs = DGLGAT(F_IN, F_OUT, heads, negative_slope=0.2).double()
    with torch.no_grad():
        theirs.fc.weight.copy_(ours.lin.weight)
        theirs.attn_l.copy_(ours.att_src)
        theirs.attn_r.copy_(ours.att_dst)
        ours.bias.normal_()
        theirs.bias.copy_(ours.bias.repeat(1 if concat else heads))
    g = dgl_graph(ei, gcn_loops=True)

    def run_theirs(x):
        out = theirs(g, x)  # (N, H, F), DGL's bias per head
        return out.reshape(N, heads * F_OUT) if concat else out.mean(dim=1)

    pairs = [(ours.lin.weight, theirs.fc.weight, lambda w: w), (ours.att_src, theirs.attn_l, lambda a: a),
             (ours.att_dst, theirs.attn_r, lambda a: a)]
    compare(ours, theirs, lambda x: ours(x, ei), run_theirs, pairs)
