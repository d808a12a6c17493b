"""What the simulator consumes: per-layer integer tensors of a quantized 2-layer GCN plus the graph.

Two sources:

* :func:`workload_from_export` — a quantized ``.qgraph`` export of a trained model, read with numpy only
  (:mod:`quant.qgraph`; no torch).
* :func:`workload_from_graph` — a dataset or synthetic topology with **bitwidths from a degree rule** (label:
  ``"degree-rule"``; not learned): ``bits_i = clip(2 + floor(log2(1 + indeg_i)), 2, 8)`` (higher in-degree ->
  more bits, the direction A2Q/MEGA report), random 4-bit weights (seeded), power-of-two steps calibrated on
  the float64 forward. Datasets without features (``pubmed`` topology) get seeded sparse binary features.

Power-of-two steps make the float64 fake-quant reference (:func:`quant.archs.gcn.integer.gcn_forward_reference` with
``exact_constants=False``) equal the integer golden path bit for bit when no partial sum saturates, so the
reference outputs of a graph workload come from the float64 path and the functional check (hw/functional.py)
runs the integer path against them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hw import aggregate_first
from hw.aggregate_first import golden_graph
from quant.archs import AGGREGATION_FIRST, ARCHS, archs_with_dataflow, reader
from quant.archs.gcn.integer import (
    QuantizedGCN,
    QuantizedGCNLayer,
    gcn_forward_reference,
    gcn_graph,
    layer_constants,
)
from quant.formats.fixed_point import code_limit
from quant.integer import fake_quant
from quant.qgraph import check_arch, load

BITS_RULE = "degree-rule: bits = clip(2 + floor(log2(1 + in_degree)), 2, 8)"
# export arch -> (display name, hw.aggregate_first.<arch>_layers) of every arch quant.archs.ARCHS runs
# aggregation-first
AGGREGATE_FIRST = {arch: (ARCHS[arch].display_name, getattr(aggregate_first, f"{arch}_layers"))
                   for arch in archs_with_dataflow(AGGREGATION_FIRST)}


@dataclass(frozen=True, kw_only=True)
class LayerTensors:
    """Integer tensors of one layer. x_codes (N, F_in) int8 input codes, x_bits (N,); xw_codes (N, F_out) int8,
    xw_bits (N,); out_codes (N, F_out) int64 (next-layer codes, or accumulator of the last layer).
    ``agg_requant`` / ``bias_per_row``: the output stage requantizes the aggregate / adds a bias that differs
    between rows (what ``AcceleratorConfig.requant_constants`` streams besides the XW and next-layer constants)."""

    x_codes: np.ndarray
    x_bits: np.ndarray
    xw_codes: np.ndarray
    xw_bits: np.ndarray
    out_codes: np.ndarray
    out_bits: np.ndarray | None
    w_bits: int
    agg_requant: bool = False
    bias_per_row: bool = False

    @property
    def dims(self) -> list[int]:
        """[N, F_in, F_out]."""
        return [*self.x_codes.shape, int(self.xw_codes.shape[1])]


@dataclass(frozen=True, kw_only=True)
class GraphReadout:
    """The readout of a graph classifier's export (:mod:`quant.readout`), run after the layers: ``readout``
    (``QuantizedReadout``), ``graph_ptr`` (G+1,) the batch's graphs, ``golden`` the architecture's
    ``GoldenForward``, ``logits`` (G, C) the exported integer logits."""

    readout: object
    graph_ptr: np.ndarray
    golden: object
    logits: np.ndarray

    def ops(self) -> dict[str, int]:
        """Integer operations: pooling adds (every readout value of every node) and head multiply-accumulates."""
        n = int(self.graph_ptr[-1])
        g = int(self.graph_ptr.size - 1)
        widths = [lin.w_codes.shape[1] for lin in self.readout.linears]
        pooled = sum(widths) if self.readout.head == "linear-sum" else widths[0]
        return {"pool_adds": n * pooled, "head_macs": g * sum(lin.w_codes.size for lin in self.readout.linears)}


@dataclass(frozen=True, kw_only=True)
class Workload:
    """A graph (destination-major CSR of the edges the layers aggregate: GCN and GIN with a self loop per node,
    GraphSAGE without) and its layers: :class:`LayerTensors` (GCN) or :class:`hw.aggregate_first.AggregateFirstLayer`
    (GIN, GraphSAGE); ``model`` is the integer golden model they come from."""

    name: str
    bits_source: str
    indptr: np.ndarray
    indices: np.ndarray
    model: object
    edge_index: np.ndarray
    layers: tuple
    self_loops: bool = True  # the CSR holds one self loop per node (GCN, GIN; GraphSAGE's mean does not)
    readout: GraphReadout | None = None  # a graph classifier's export: its pooling and head after the layers

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])


def degree_bits(indeg: np.ndarray) -> np.ndarray:
    """The degree rule (see module docstring). (N,) int -> (N,) int64 in 2..8."""
    return np.clip(2 + np.floor(np.log2(1.0 + indeg)).astype(np.int64), 2, 8)


def _pow2_steps(absmax: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Per-row power-of-two step >= absmax / qmax (1.0 for all-zero rows)."""
    q = np.maximum(code_limit(bits), 1).astype(np.float64)
    ratio = np.where(absmax > 0, absmax / q, 1.0)
    return 2.0 ** np.ceil(np.log2(ratio))


def build_gcn(x: np.ndarray, edge_index: np.ndarray, dims: tuple[int, ...], seed: int = 0,
              frac_bits: int = 6) -> QuantizedGCN:
    """Quantized GCN with degree-rule bits, seeded 4-bit weights and power-of-two steps. x (N, F_in) float."""
    rng = np.random.default_rng(seed)
    n = x.shape[0]
    graph = gcn_graph(edge_index, n)
    bits = degree_bits(np.diff(graph[0]) - 1)  # in-degree without the self loop
    steps = _pow2_steps(np.abs(x).max(axis=1), bits)
    h = fake_quant(x, steps[:, None], bits[:, None])  # codes
    x_codes = h.astype(np.int8)
    layers, h_real = [], h * steps[:, None]
    for i, (f_in, f_out) in enumerate(zip(dims[:-1], dims[1:], strict=False)):
        w = rng.standard_normal((f_out, f_in)) * np.sqrt(2.0 / (f_in + f_out))
        w_steps = _pow2_steps(np.abs(w).max(axis=1), np.full(f_out, 4))
        w_codes = fake_quant(w, w_steps[:, None], 4).astype(np.int8)
        xw = h_real @ (w_codes * w_steps[:, None]).T
        xw_steps = _pow2_steps(np.abs(xw).max(axis=1), bits)
        last = i == len(dims) - 2
        lay = QuantizedGCNLayer(x_steps=steps, x_bits=bits, w_codes=w_codes, w_steps=w_steps, w_bits=4,
                                xw_steps=xw_steps, xw_bits=bits, relu=not last, frac_bits=frac_bits)
        out, _ = _layer_ref(lay, h, graph)
        if not last:
            out_steps = _pow2_steps(np.abs(out).max(axis=1), bits)
            lay = QuantizedGCNLayer(**{**lay.__dict__, "out_steps": out_steps, "out_bits": bits})
            h = fake_quant(out, out_steps[:, None], bits[:, None])
            h_real, steps = h * out_steps[:, None], out_steps
        layers.append(lay)
    return QuantizedGCN(x_codes=x_codes, layers=tuple(layers))


def _layer_ref(layer: QuantizedGCNLayer, codes: np.ndarray, graph: tuple) -> tuple[np.ndarray, np.ndarray]:
    from quant.archs.gcn.integer import gcn_layer_reference
    return gcn_layer_reference(layer, codes, graph, exact_constants=False)


def output_stage_flags(lay: QuantizedGCNLayer, graph: tuple) -> dict[str, bool]:
    """``LayerTensors``' ``agg_requant`` and ``bias_per_row`` of a GCN layer (what its output stage needs per row)."""
    bias = layer_constants(lay, graph).bias_int
    per_row = bias is not None and np.ndim(bias) == 2 and bool((bias != bias[:1]).any())
    return {"agg_requant": lay.agg_steps is not None, "bias_per_row": per_row}


def workload_from_model(name: str, model: QuantizedGCN, edge_index: np.ndarray, bits_source: str) -> Workload:
    """Reference tensors of every layer from the float64 fake-quant path (equal to the integer path, see above)."""
    n = model.x_codes.shape[0]
    graph = gcn_graph(edge_index, n)
    indptr, indices, _ = graph
    outs, _ = gcn_forward_reference(model, edge_index, exact_constants=False)
    h, layers = model.x_codes, []
    for lay, out in zip(model.layers, outs, strict=False):
        if lay.out_steps is None:  # last layer: real values -> accumulator units U 2^-frac (exact, see above)
            out = np.rint(out / (lay.ref_scale * 2.0**-lay.frac_bits)).astype(np.int64)
        xr = h.astype(np.float64) * lay.x_steps[:, None]
        xw = xr @ (lay.w_codes.astype(np.float64) * lay.w_steps[:, None]).T
        xw_codes = fake_quant(xw, lay.xw_steps[:, None], lay.xw_bits[:, None]).astype(np.int8)
        layers.append(LayerTensors(x_codes=np.asarray(h, dtype=np.int8), x_bits=np.asarray(lay.x_bits),
                                   xw_codes=xw_codes, xw_bits=np.asarray(lay.xw_bits), out_codes=np.asarray(out),
                                   out_bits=lay.out_bits, w_bits=lay.w_bits, **output_stage_flags(lay, graph)))
        h = out
    return Workload(name=name, bits_source=bits_source, indptr=indptr, indices=indices, model=model,
                    edge_index=np.asarray(edge_index), layers=tuple(layers))


def _graph_features(name: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(x (N, F) float64, edge_index (2, E)) of a dataset name, ``rmat-<scale>`` or ``sbm-<nodes>``."""
    if name.startswith("rmat-"):
        from gnn.data.synthetic import powerlaw_graph
        g = powerlaw_graph(int(name.split("-")[1]), edge_factor=16, num_features=64, seed=seed)
    elif name.startswith("sbm-"):
        from gnn.data.synthetic import sbm_graph
        g = sbm_graph(int(name.split("-")[1]), num_features=64, seed=seed)
    else:
        from gnn.data.loaders import load_dataset
        g = load_dataset(name)
        if g.task == "graph":  # a graph-classification dataset: all its graphs as one block-diagonal graph
            return _block_diagonal(g.graphs)
    ei = g.data.edge_index.numpy()
    n = int(g.data.num_nodes)
    if getattr(g.data, "x", None) is None:  # topology only: seeded sparse binary bag-of-words, 500 features
        rng = np.random.default_rng(seed)
        x = (rng.random((n, 500)) < 0.1).astype(np.float64)
    else:
        x = g.data.x.numpy().astype(np.float64)
    return x, ei


def _block_diagonal(graphs) -> tuple[np.ndarray, np.ndarray]:
    """(x (N, F) float64, edge_index (2, E)) of the disjoint union of ``graphs`` (each a PyG ``Data``), in order:
    how a batch of graphs runs on the accelerator (and how ``quant.export`` exports a graph classifier's test
    graphs)."""
    xs, eis, offset = [], [], 0
    for d in graphs:
        xs.append(d.x.numpy().astype(np.float64))
        eis.append(d.edge_index.numpy() + offset)
        offset += int(d.num_nodes)
    return np.concatenate(xs), np.concatenate(eis, axis=1)


ORDERS = ("natural", "metis")


def metis_order(edge_index: np.ndarray, num_nodes: int, part_nodes: int = 256, seed: int = 0) -> np.ndarray:
    """A node order that keeps METIS parts of about ``part_nodes`` nodes contiguous: ``order[new_id] = old_id``.

    The accelerator's subgraphs are runs of consecutive node IDs (``hw.scheduler.tile_nodes``: 256 nodes for a
    128-wide layer of the ``mega`` preset, 2048 for a 16-wide one); MEGA partitions with METIS first. Renumbering
    by part gives tiles that approximately coincide with (or are unions of) METIS parts; part sizes are balanced,
    not exact, so tile and part boundaries drift by a few nodes.
    """
    from gnn.data.metis import metis_parts

    num_parts = max(1, -(-num_nodes // part_nodes))
    parts = np.zeros(num_nodes, dtype=np.int64) if num_parts == 1 else metis_parts(edge_index, num_nodes, num_parts,
                                                                                   seed)
    return np.lexsort((np.arange(num_nodes), parts))  # by part, then by original ID


def reorder_graph(x: np.ndarray, edge_index: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Renumber nodes so that new node i is old node ``order[i]``. x: (N, F), edge_index: (2, E)."""
    new_id = np.empty_like(order)
    new_id[order] = np.arange(order.size)
    return x[order], new_id[edge_index]


def workload_name(name: str, order: str = "natural") -> str:
    """The name of a dataset workload: the dataset's (a graph file's: its file name without folders and suffix),
    with ``+metis`` when its nodes are METIS-ordered."""
    if "/" in name or "\\" in name or Path(name).exists():
        name = Path(name).stem or Path(name).name
    return name if order == "natural" else f"{name}+{order}"


def workload_from_graph(name: str, hidden: int = 128, num_classes: int = 16, seed: int = 0,
                        order: str = "natural") -> Workload:
    """2-layer GCN workload (F_in -> hidden -> num_classes) on a dataset/synthetic graph, degree-rule bits.

    ``order``: ``"natural"`` (the dataset's node IDs) or ``"metis"`` (renumbered by `metis_order`, so the
    accelerator's consecutive-ID subgraphs follow a METIS partition).
    """
    if order not in ORDERS:
        raise ValueError(f"workload_from_graph: unknown order {order!r}; valid: {', '.join(ORDERS)}")
    x, ei = _graph_features(name, seed)
    if order == "metis":
        x, ei = reorder_graph(x, ei, metis_order(ei, x.shape[0], seed=seed))
    model = build_gcn(x, ei, (x.shape[1], hidden, num_classes), seed=seed)
    return workload_from_model(workload_name(name, order), model, ei, BITS_RULE)


def workload_from_export(source) -> Workload:
    """Workload of a quantized ``.qgraph`` export (a path, read with ``quant.qgraph.load``, or an already loaded
    ``QGraph``; learned bits). Reference outputs are the exported ``layer<l>.out`` arrays; XW codes the exported
    ``layer<l>.xw_codes``. Per-channel XW bitwidths are widened to per-node rows (see ``node_xw_bits``). GIN and
    GraphSAGE exports give aggregation-first layers (:mod:`hw.aggregate_first`); GAT and graph-transformer exports
    are refused."""
    if isinstance(source, str | Path):
        q, path = load(source), Path(source)
    else:
        q, path = source, Path(source.path)
    check_arch(q.arch, f"hw.workload: {path}")  # an unknown arch is never simulated as a GCN
    wl = _layers_workload(q, str(q.manifest.get("name", Path(path).stem)))
    if not q.is_graph_level:
        return wl
    readout = GraphReadout(readout=q.readout(), graph_ptr=np.asarray(q["graph.graph_ptr"]),
                           golden=ARCHS[q.arch].module("integer").GOLDEN, logits=np.asarray(q["logits"]))
    return dataclasses.replace(wl, readout=readout)


def _layers_workload(q, name: str) -> Workload:
    """The layers of an export as a workload (GCN; GIN and GraphSAGE aggregation-first)."""
    if q.arch in AGGREGATE_FIRST:
        return _aggregate_first_workload(q, name)
    model = q.to_quantized_gcn()
    n = model.x_codes.shape[0]

    def node_xw_bits(lay: QuantizedGCNLayer) -> np.ndarray:
        # Trained A2Q exports step XW per output channel; the accelerator stores XW rows per node, so a row is
        # packed at the widest channel bitwidth (all channels share A2Q's fixed XW bitwidth, so this is exact).
        bits = np.asarray(lay.xw_bits)
        return bits if getattr(lay, "xw_scheme", "node") == "node" else np.full(n, int(bits.max()))

    ei = np.asarray(q["graph.edge_index"], dtype=np.int64)
    graph = gcn_graph(ei, model.x_codes.shape[0])
    indptr, indices, _ = graph
    layers = tuple(LayerTensors(x_codes=np.asarray(q[f"layer{li}.x_codes"], dtype=np.int8),
                                x_bits=np.asarray(lay.x_bits),
                                xw_codes=np.asarray(q[f"layer{li}.xw_codes"], dtype=np.int8),
                                xw_bits=node_xw_bits(lay), out_codes=np.asarray(q[f"layer{li}.out"], np.int64),
                                out_bits=lay.out_bits, w_bits=lay.w_bits, **output_stage_flags(lay, graph))
                   for li, lay in enumerate(model.layers))
    return Workload(name=name, bits_source="export (learned bits)",
                    indptr=indptr, indices=indices, model=model, edge_index=ei, layers=layers)


def _aggregate_first_workload(q, name: str) -> Workload:
    """A GIN or GraphSAGE export's workload (:mod:`hw.aggregate_first`)."""
    label, layers_of = AGGREGATE_FIRST[q.arch]
    model = reader(q.arch).integer_model(q)  # numpy only (quant.archs.gin.reader / quant.archs.sage.reader)
    ei = np.asarray(q["graph.edge_index"], dtype=np.int64)
    indptr, indices, _ = golden_graph(q.arch, ei, model.x_codes.shape[0])
    if any(meta.get("hid_scheme") == "fixed" for meta in q.manifest.get("layers", [])):
        label += " with a 16-bit fixed-point hidden activation"
    return Workload(name=name, bits_source=f"export (learned bits, {label}, aggregation-first)", indptr=indptr,
                    indices=indices, model=model, edge_index=ei, layers=layers_of(q, model),
                    self_loops=q.arch != "sage")
