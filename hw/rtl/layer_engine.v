// Layer engine for one tile: Adaptive-Package decoder -> combination PE -> requantization -> XW buffer ->
// aggregation unit -> output stage. Computes quant.archs.gcn.integer.gcn_layer_trace for a tile of MAX_NODES nodes,
// MAX_FEATURES input features and LANES output channels:
//   xw   = requantize(sat32(x @ w^T), M[node, o], shift[node, o], xw_bits[node, o])   (combination phase)
//   psum = aggregate_int(indptr, indices, xw, coef, PSUM_BITS)                         (aggregation phase)
//   out  = output_stage(psum): optional q_aggregate requant, bias, ReLU, next-layer requant (or the accumulator)
// Phases do not overlap: the edge stream is held (s_edge_ready low) until xw_rows reached num_rows, the number of
// nodes with a non-zero input (the others keep XW = 0, which is requantize(0)); the host may present the first
// edge at any time. Output row r uses the per-node constants at address r (destination rows are nodes 0..R-1).
// Cycle count: hw/timing.py layer_engine_cycles (first package word to last output row, no stalls).
// Constants are written through the *_we ports before the tile starts: q_we the bitmap-independent XW constants of
// node q_addr, o_we the output-stage constants of row q_addr. The XW buffer also has a write port (xw_we: a row
// computed elsewhere, for a tile without a combination phase, num_rows = 0), and each row the requant units write
// is also presented on xw_w_* (so a combination-only tile's rows can be kept outside the engine).
`resetall
`timescale 1ns / 1ps
`default_nettype none

module layer_engine #(
    // Output channels = C-PE lanes = requant units = aggregation lanes. Must be >= 1.
    parameter LANES        = 4,
    // Nodes of the tile (bitmap rows, XW buffer rows). Must be 2..2^NODE_BITS.
    parameter MAX_NODES    = 16,
    // Width of node IDs. Must be 1..16.
    parameter NODE_BITS    = 4,
    // Input features of the tile. Must be 2..2^FEAT_BITS.
    parameter MAX_FEATURES = 8,
    // Width of feature indices. Must be 1..16.
    parameter FEAT_BITS    = 3,
    // Signed weight width (MEGA: 4; the quantized presets: 8). Must be 2..8 (checked by cpe / bse).
    parameter W_BITS       = 4,
    // Aggregation partial-sum width (MEGA: 16). Must be 2..32.
    parameter PSUM_BITS    = 16,
    // Edge coefficient width. Must be 1..24.
    parameter COEF_BITS    = 16,
    // Fractional bits of the edge coefficients (used by the optional q_aggregate requant). Must be 0..23.
    parameter FRAC_BITS    = 8
) (
    input  wire                        clk,
    input  wire                        rst,

    /* constants: bitmap rows, weight columns W[:, k], per-node requant constants */
    input  wire                        bm_we,
    input  wire [NODE_BITS-1:0]        bm_addr,
    input  wire [MAX_FEATURES-1:0]     bm_row,
    input  wire [NODE_BITS:0]          num_nodes,
    input  wire                        w_we,
    input  wire [FEAT_BITS-1:0]        w_addr,
    input  wire [LANES*W_BITS-1:0]     w_col,       // lane o = W[o, k], W_BITS-bit signed
    input  wire                        q_we,        // XW constants of node q_addr
    input  wire                        o_we,        // output-stage constants of row q_addr
    input  wire [NODE_BITS-1:0]        q_addr,
    input  wire [LANES*31-1:0]         q_mult,      // lane o = M[node, o]
    input  wire [LANES*6-1:0]          q_shift,     // lane o = shift[node, o]
    input  wire [LANES*4-1:0]          q_bits,      // lane o = xw_bits[node, o]
    input  wire [LANES*31-1:0]         q_agg_mult,  // output stage constants of row q_addr (output_stage.v)
    input  wire [LANES*6-1:0]          q_agg_shift,
    input  wire [3:0]                  q_agg_bits,
    input  wire [LANES*32-1:0]         q_bias,
    input  wire                        bias_per_row, // 1: row r's bias is the one written with o_we; 0: bias_layer
    input  wire [LANES*32-1:0]         bias_layer,
    input  wire [LANES*31-1:0]         q_out_mult,
    input  wire [LANES*6-1:0]          q_out_shift,
    input  wire [3:0]                  q_out_bits,
    input  wire [NODE_BITS:0]          num_rows,    // nodes with a non-zero input (XW rows the C-PE produces)
    input  wire                        agg_en,      // layer configuration (output_stage.v)
    input  wire                        relu_en,
    input  wire                        out_en,

    /* combination phase input: Adaptive-Package stream */
    input  wire                        s_pkg_valid,
    output wire                        s_pkg_ready,
    input  wire [NODE_BITS-1:0]        s_pkg_first_node,
    input  wire [FEAT_BITS-1:0]        s_pkg_first_value,
    input  wire [7:0]                  s_pkg_num_values,
    input  wire                        s_word_valid,
    output wire                        s_word_ready,
    input  wire [63:0]                 s_word,
    output reg  [NODE_BITS:0]          xw_rows,     // XW rows written so far by the requant units

    /* XW buffer ports: rows computed by an earlier combination pass in, rows written by the requant units out */
    input  wire                        xw_we,
    input  wire [NODE_BITS-1:0]        xw_waddr,
    input  wire [LANES*8-1:0]          xw_wdata,    // lane o = XW code, 8-bit signed
    output wire                        xw_w_valid,  // the requant units write row xw_w_node this cycle
    output wire [NODE_BITS-1:0]        xw_w_node,
    output wire [LANES*8-1:0]          xw_w_data,

    /* aggregation phase input: destination-major CSR edge stream */
    input  wire                        s_edge_valid,
    output wire                        s_edge_ready,
    input  wire [COEF_BITS-1:0]        s_edge_coef,
    input  wire [NODE_BITS-1:0]        s_edge_src,
    input  wire                        s_edge_last,

    /* output rows: layer output (codes sign-extended, or the last layer's accumulator) and partial sums */
    output wire                        m_valid,
    input  wire                        m_ready,
    output wire [LANES*32-1:0]         m_out,
    output wire [LANES*PSUM_BITS-1:0]  m_psum,

    output wire                        err,
    output wire [1:0]                  err_code
);

    // parameter ranges are checked by the sub-units (ap_decoder, cpe, requant, aggregation_unit)
    initial begin
        if (LANES < 1) begin
            $error("Error: LANES=%0d must be >= 1 (instance %m)", LANES);
            $finish;
        end
    end

    reg [LANES*W_BITS-1:0] wmem [0:MAX_FEATURES-1];
    reg [LANES*31-1:0]  qmult [0:MAX_NODES-1];
    reg [LANES*6-1:0]   qshift [0:MAX_NODES-1];
    reg [LANES*4-1:0]   qbits [0:MAX_NODES-1];
    reg [LANES*8-1:0]   xw [0:MAX_NODES-1];
    reg [LANES*31-1:0]  eaggm [0:MAX_NODES-1];
    reg [LANES*6-1:0]   eaggs [0:MAX_NODES-1];
    reg [3:0]           eaggb [0:MAX_NODES-1];
    reg [LANES*32-1:0]  ebias [0:MAX_NODES-1];
    reg [LANES*31-1:0]  eoutm [0:MAX_NODES-1];
    reg [LANES*6-1:0]   eouts [0:MAX_NODES-1];
    reg [3:0]           eoutb [0:MAX_NODES-1];
    reg [NODE_BITS-1:0] row_reg;    // output row entering the output stage
    integer i;

    // decoder -> C-PE
    wire                  d_valid, d_ready, d_node_last;
    wire [NODE_BITS-1:0]  d_node;
    wire [FEAT_BITS-1:0]  d_feat;
    wire [7:0]            d_code;
    wire [3:0]            d_bits;
    ap_decoder #(.MAX_NODES(MAX_NODES), .NODE_BITS(NODE_BITS), .MAX_FEATURES(MAX_FEATURES), .FEAT_BITS(FEAT_BITS))
    u_dec (
        .clk(clk), .rst(rst), .bm_we(bm_we), .bm_addr(bm_addr), .bm_row(bm_row), .num_nodes(num_nodes),
        .s_pkg_valid(s_pkg_valid), .s_pkg_ready(s_pkg_ready), .s_pkg_first_node(s_pkg_first_node),
        .s_pkg_first_value(s_pkg_first_value), .s_pkg_num_values(s_pkg_num_values),
        .s_word_valid(s_word_valid), .s_word_ready(s_word_ready), .s_word(s_word),
        .m_valid(d_valid), .m_ready(d_ready), .m_node(d_node), .m_feat(d_feat), .m_code(d_code),
        .m_bits(d_bits), .m_node_last(d_node_last), .err(err), .err_code(err_code)
    );

    // C-PE -> requant (LANES units in lockstep)
    wire                      c_valid, c_ready;
    wire [LANES*32-1:0]       c_acc;
    wire [NODE_BITS-1:0]      c_node;
    cpe #(.LANES(LANES), .W_BITS(W_BITS), .ACC_BITS(32), .MAX_ROW_VALUES(MAX_FEATURES), .TAG_BITS(NODE_BITS)) u_cpe (
        .clk(clk), .rst(rst),
        .s_valid(d_valid), .s_ready(d_ready), .s_code(d_code), .s_bits(d_bits), .s_w(wmem[d_feat]),
        .s_last(d_node_last), .s_tag(d_node),
        .m_valid(c_valid), .m_ready(c_ready), .m_acc(c_acc), .m_tag(c_node)
    );

    /* verilator lint_off UNUSEDSIGNAL */
    wire [LANES-1:0] r_ready, r_valid;    // lanes run in lockstep: lane 0 stands for all
    /* verilator lint_on UNUSEDSIGNAL */
    wire [LANES*8-1:0] r_code;
    genvar o;
    generate
        for (o = 0; o < LANES; o = o + 1) begin : rq
            requant #(.ACC_BITS(32), .MULT_BITS(31), .OUT_BITS(8)) u_rq (
                .clk(clk), .rst(rst),
                .s_valid(c_valid), .s_ready(r_ready[o]), .s_acc(c_acc[o*32 +: 32]),
                .s_mult(qmult[c_node][o*31 +: 31]), .s_shift(qshift[c_node][o*6 +: 6]), .s_bits(qbits[c_node][o*4 +: 4]),
                .m_valid(r_valid[o]), .m_ready(1'b1), .m_code(r_code[o*8 +: 8])
            );
        end
    endgenerate
    assign c_ready = r_ready[0];  // identical in every lane (same inputs, XW writes never stall)

    // node tags of the (at most 2) rows inside the requant pipeline
    reg [NODE_BITS-1:0] tag0_reg, tag1_reg;
    reg [1:0]           tags_reg;
    wire push = c_valid && c_ready;
    wire pop  = r_valid[0];

    always @(posedge clk) begin
        if (w_we) begin
            wmem[w_addr] <= w_col;
        end
        if (q_we) begin
            qmult[q_addr] <= q_mult;
            qshift[q_addr] <= q_shift;
            qbits[q_addr] <= q_bits;
        end
        if (o_we) begin
            eaggm[q_addr] <= q_agg_mult;
            eaggs[q_addr] <= q_agg_shift;
            eaggb[q_addr] <= q_agg_bits;
            ebias[q_addr] <= q_bias;
            eoutm[q_addr] <= q_out_mult;
            eouts[q_addr] <= q_out_shift;
            eoutb[q_addr] <= q_out_bits;
        end
        if (a_valid && a_ready) begin
            row_reg <= row_reg + 1'b1;
        end
        if (xw_we) begin
            xw[xw_waddr] <= xw_wdata;
        end
        if (pop) begin
            xw[tag0_reg] <= r_code;
            xw_rows <= xw_rows + 1'b1;
        end
        case ({push, pop})
            2'b10: begin
                if (tags_reg == 2'd0) tag0_reg <= c_node; else tag1_reg <= c_node;
                tags_reg <= tags_reg + 2'd1;
            end
            2'b01: begin
                tag0_reg <= tag1_reg;
                tags_reg <= tags_reg - 2'd1;
            end
            2'b11: begin
                if (tags_reg == 2'd1) tag0_reg <= c_node; else begin tag0_reg <= tag1_reg; tag1_reg <= c_node; end
            end
            default: begin end
        endcase
        if (rst) begin
            tags_reg <= 2'd0;
            xw_rows <= {(NODE_BITS+1){1'b0}};
            row_reg <= {NODE_BITS{1'b0}};
            for (i = 0; i < MAX_NODES; i = i + 1) begin
                xw[i] <= {(LANES*8){1'b0}};
            end
        end
    end

    assign xw_w_valid = pop;
    assign xw_w_node  = tag0_reg;
    assign xw_w_data  = r_code;

    // aggregation phase: the edge stream waits until every XW row of the tile is written
    wire xw_done = (xw_rows == num_rows);
    wire a_in_ready;
    assign s_edge_ready = a_in_ready && xw_done;
    wire                       a_valid, a_ready;
    wire [LANES*PSUM_BITS-1:0] a_psum;
    aggregation_unit #(.LANES(LANES), .CODE_BITS(8), .COEF_BITS(COEF_BITS), .PSUM_BITS(PSUM_BITS)) u_agg (
        .clk(clk), .rst(rst),
        .s_valid(s_edge_valid && xw_done), .s_ready(a_in_ready), .s_coef(s_edge_coef), .s_x(xw[s_edge_src]),
        .s_last(s_edge_last),
        .m_valid(a_valid), .m_ready(a_ready), .m_psum(a_psum)
    );

    output_stage #(.LANES(LANES), .PSUM_BITS(PSUM_BITS), .FRAC_BITS(FRAC_BITS)) u_out (
        .clk(clk), .rst(rst), .agg_en(agg_en), .relu_en(relu_en), .out_en(out_en),
        .s_valid(a_valid), .s_ready(a_ready), .s_psum(a_psum),
        .s_agg_mult(eaggm[row_reg]), .s_agg_shift(eaggs[row_reg]), .s_agg_bits(eaggb[row_reg]),
        .s_bias(bias_per_row ? ebias[row_reg] : bias_layer),
        .s_out_mult(eoutm[row_reg]), .s_out_shift(eouts[row_reg]),
        .s_out_bits(eoutb[row_reg]),
        .m_valid(m_valid), .m_ready(m_ready), .m_out(m_out), .m_psum(m_psum)
    );

endmodule

`resetall
