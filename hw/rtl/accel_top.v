// Accelerator top: one layer_engine, a controller that walks the tiles of one GCN layer from a memory image, and
// a 64-bit memory port (AXI4-like read bursts AR/R, ready/valid single-beat writes). hw/rtl/top.py writes the
// image; README.md ("The accelerator top") gives its layout. Word addresses throughout.
//
// Per layer (on `start`, image at `layer_addr`): read the 1-beat layer header; read the prologue (weight columns,
// written to the engine once per layer, the layer's bias, then the first tile's 2-beat header). Then two passes
// over tiles; each tile is LOAD -> RUN -> write (XW or WB), and a tile's write phase overlaps the next tile's LOAD
// (the writer has its own copy of the tile's header, a second copy-list bank and the XW rows captured as the
// engine wrote them; the next RUN waits for the writer), except that the first aggregation tile's LOAD waits for
// the last combination tile's XW writes (it reads what they write):
//   combination tiles (consecutive rows, each node once):
//     LOAD  read the body in bursts of BURST_BEATS (up to MAX_OUTSTANDING in flight): per row a record (bitmap row +
//           XW requant constants, written to the engine as its last beat arrives), the package boundary records,
//           the package words and the copy list into on-chip buffers, then the next tile's header;
//     RUN   stream the packages into the engine until every XW row is written (no aggregation);
//     XW    write each XW row to every place the copy list names: the XW block of each aggregation tile that reads
//           it (its own tile's and, as a halo source, others'), so no XW row is recomputed (Condense-Edge's idea);
//   aggregation tiles (consecutive destination rows):
//     LOAD  per local node (rows, then halo sources) its XW row, written to the engine's XW buffer; per row the
//           output-stage constants the layer uses (q_aggregate if agg_en, bias if it differs between rows, the
//           next-layer requant if out_en); the edge beats; the next tile's header;
//     RUN   stream the edges through aggregation and the output stage and keep the output rows;
//     WB    write the rows back, OUT_BEATS words per row, to the tile's output address.
// The engine is reset for one cycle when a tile's body read is issued (XW buffer, counters; weights and constants
// are memories and stay). An engine error stops the layer: `done` rises with `err`.
// Cycle counters (valid after `done`): total, load (header + prologue + bodies, memory latency included),
// combination (RUN of combination tiles), aggregation (RUN of aggregation tiles), XW writes, writeback (busy
// cycles of the writer; they overlap loads), wait (a loaded tile waiting for the writer); tiles.
// Cycle count: hw.timing.accel_top_layer_cycles.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module accel_top #(
    // Output channels (engine lanes). Must be 1..64.
    parameter LANES           = 4,
    // Local nodes of a tile (bitmap rows, XW rows). Must be 2..2^NODE_BITS.
    parameter MAX_NODES       = 16,
    // Width of local node IDs. Must be 1..16.
    parameter NODE_BITS       = 4,
    // Input features of the layer. Must be 2..2^FEAT_BITS.
    parameter MAX_FEATURES    = 8,
    // Width of feature indices. Must be 1..16 (the boundary record's first_value field).
    parameter FEAT_BITS       = 3,
    // Signed weight width. Must be 2..8.
    parameter W_BITS          = 4,
    // Aggregation partial-sum width. Must be 2..32.
    parameter PSUM_BITS       = 16,
    // Edge coefficient width. Must be 1..24.
    parameter COEF_BITS       = 16,
    // Fractional bits of the edge coefficients. Must be 0..23.
    parameter FRAC_BITS       = 8,
    // Destination rows of a tile (output row buffer). Must be 1..2^NODE_BITS.
    parameter MAX_ROWS        = 16,
    // Package boundary records of a tile. Must be >= 2.
    parameter MAX_PKGS        = 64,
    // Package words of a tile. Must be >= 2.
    parameter MAX_WORDS       = 128,
    // Edge beats of a tile (a zero-degree row is one beat). Must be >= 2.
    parameter MAX_EDGES       = 64,
    // Copy-list entries of a combination tile (XW rows written). Must be >= 2.
    parameter MAX_COPIES      = 64,
    // Word address width of the memory port. Must be 8..32.
    parameter ADDR_BITS       = 24,
    // Beats per read burst (hw/dram.py dram_access_bytes / 8). Must be 1..256.
    parameter BURST_BEATS     = 16,
    // Read bursts in flight. Must be 1..255.
    parameter MAX_OUTSTANDING = 16
) (
    input  wire                 clk,
    input  wire                 rst,

    input  wire                 start,
    input  wire [ADDR_BITS-1:0] layer_addr,
    output wire                 busy,
    output reg                  done,
    output wire                 err,
    output wire [1:0]           err_code,

    output wire                 m_ar_valid,
    input  wire                 m_ar_ready,
    output wire [ADDR_BITS-1:0] m_ar_addr,
    output wire [7:0]           m_ar_len,     // beats - 1
    input  wire                 m_r_valid,
    output wire                 m_r_ready,
    input  wire [63:0]          m_r_data,
    /* verilator lint_off UNUSEDSIGNAL */
    input  wire                 m_r_last,     // bursts are counted by the controller; used for outstanding only
    /* verilator lint_on UNUSEDSIGNAL */
    output wire                 m_w_valid,
    input  wire                 m_w_ready,
    output wire [ADDR_BITS-1:0] m_w_addr,
    output wire [63:0]          m_w_data,

    output reg  [31:0]          cnt_total,
    output reg  [31:0]          cnt_load,
    output reg  [31:0]          cnt_comb,
    output reg  [31:0]          cnt_agg,
    output reg  [31:0]          cnt_xw,
    output reg  [31:0]          cnt_wb,
    output reg  [31:0]          cnt_wait,
    output reg  [31:0]          cnt_tiles
);

    // record layouts (LSB first); hw/rtl/top.py packs the same
    localparam C_REC_W   = MAX_FEATURES + LANES * 41;       // combination row: bitmap row + XW requant constants
    localparam C_BEATS   = (C_REC_W + 63) / 64;
    localparam A_REC_W   = LANES * 37 + 4;                  // a requant's constants: mult, shift (per lane), bits
    localparam A_BEATS   = (A_REC_W + 63) / 64;             // (q_aggregate, next-layer requant)
    localparam B_BEATS   = (LANES * 32 + 63) / 64;          // a bias (32 bits per lane)
    localparam X_BEATS   = (LANES * 8 + 63) / 64;           // one XW row (8 bits per lane)
    localparam W_BEATS   = (LANES * W_BITS + 63) / 64;      // one weight column W[:, k]
    localparam OUT_BEATS = (LANES * 32 + 63) / 64;          // one output row
    localparam CX_BEATS  = (C_BEATS > X_BEATS) ? C_BEATS : X_BEATS;
    localparam AB_BEATS  = (A_BEATS > B_BEATS) ? A_BEATS : B_BEATS;
    localparam RM_BEATS  = (CX_BEATS > AB_BEATS) ? CX_BEATS : AB_BEATS;
    localparam REC_BEATS = (RM_BEATS > 1) ? RM_BEATS : 2;      // the shift register keeps >= 2 beats
    localparam REC_W     = REC_BEATS * 64;
    localparam C_OFF     = REC_W - C_BEATS * 64;            // where each record lands after its last beat
    localparam A_OFF     = REC_W - A_BEATS * 64;
    localparam B_OFF     = REC_W - B_BEATS * 64;
    localparam X_OFF     = REC_W - X_BEATS * 64;
    localparam PKG_BITS  = $clog2(MAX_PKGS + 1);
    localparam WORD_BITS = $clog2(MAX_WORDS + 1);
    localparam EDGE_BITS = $clog2(MAX_EDGES + 1);
    localparam CP_BITS   = $clog2(MAX_COPIES + 1);
    localparam ROW_BITS  = $clog2(MAX_ROWS + 1);
    localparam RB_BITS   = $clog2(REC_BEATS + 1);
    localparam PKG_IDX   = $clog2(MAX_PKGS);              // buffer addresses
    localparam WORD_IDX  = $clog2(MAX_WORDS);
    localparam EDGE_IDX  = $clog2(MAX_EDGES);
    localparam CP_IDX    = $clog2(MAX_COPIES);
    localparam ROW_IDX   = (MAX_ROWS > 1) ? $clog2(MAX_ROWS) : 1;

    initial begin
        if (LANES < 1 || LANES > 64 || FEAT_BITS > 16 || MAX_ROWS < 1 || MAX_ROWS > (1 << NODE_BITS) ||
            MAX_PKGS < 2 || MAX_WORDS < 2 || MAX_EDGES < 2 || MAX_COPIES < 2 || ADDR_BITS < 8 || ADDR_BITS > 32 ||
            BURST_BEATS < 1 || BURST_BEATS > 256 || MAX_OUTSTANDING < 1 || MAX_OUTSTANDING > 255) begin
            $error("Error: accel_top parameters out of range (instance %m)");
            $finish;
        end
    end

    localparam [2:0] S_IDLE = 3'd0, S_HDR = 3'd1, S_PRO = 3'd2, S_LOAD = 3'd3, S_RUN = 3'd4, S_WAIT = 3'd5,
                     S_DRAIN = 3'd6, S_FLUSH = 3'd7;

    reg [2:0]            state_reg, state_next;
    reg                  done_next;

    // ---- read DMA: one command (address, beats) at a time, cut into bursts ---------------------------------
    reg [ADDR_BITS-1:0]  rd_addr_reg;
    reg [31:0]           rd_left_reg;    // beats not yet requested
    reg [7:0]            rd_out_reg;     // bursts in flight
    reg                  cmd;            // issue a read command this cycle (from the FSM)
    reg [ADDR_BITS-1:0]  cmd_addr;
    reg [31:0]           cmd_beats;
    wire [31:0] burst = (rd_left_reg > BURST_BEATS) ? BURST_BEATS : rd_left_reg;
    assign m_ar_valid = (rd_left_reg != 32'd0) && (rd_out_reg != MAX_OUTSTANDING[7:0]);
    assign m_ar_addr  = rd_addr_reg;
    assign m_ar_len   = burst[7:0] - 8'd1;
    wire ar_fire = m_ar_valid && m_ar_ready;
    assign m_r_ready = (state_reg == S_HDR) || (state_reg == S_PRO) || (state_reg == S_LOAD);
    wire r_fire = m_r_valid && m_r_ready;

    // ---- layer and tile configuration -------------------------------------------------------------------------
    reg [15:0]           num_ctiles_reg, num_tiles_reg, num_feat_reg, tile_reg;
    reg                  agg_en_reg, relu_en_reg, out_en_reg, bias_row_reg;
    reg [63:0]           h0_reg, h1_reg;         // current tile header
    reg [63:0]           n0_reg, n1_reg;         // next tile header (last beats of the body)
    reg [ADDR_BITS-1:0]  ptr_reg;                // next word of the image to read
    reg [31:0]           k_reg;                  // beat index inside the current read
    /* verilator lint_off UNUSEDSIGNAL */
    wire [15:0] t_nodes = h0_reg[15:0];
    wire [15:0] t_rows  = h0_reg[31:16];
    wire [15:0] t_nz    = h0_reg[47:32];
    wire [15:0] t_pkgs  = h0_reg[63:48];
    wire [15:0] t_words = h1_reg[15:0];
    wire [15:0] t_list  = h1_reg[31:16];         // copy-list entries (combination) or edge beats (aggregation)
    wire [31:0] t_out   = h1_reg[63:32];
    /* verilator lint_on UNUSEDSIGNAL */
    wire        is_c    = (tile_reg < num_ctiles_reg);          // the current tile is a combination tile
    wire        more    = (tile_reg + 16'd1 < num_tiles_reg);   // a tile follows the current one
    wire        more2   = (tile_reg + 16'd2 < num_tiles_reg);   // a tile follows the next one
    wire        next_c  = (tile_reg + 16'd1 < num_ctiles_reg);  // the next tile is a combination tile

    // body beats of a tile with header (a0, a1); `comb`: a combination tile; `nxt`: a next header follows
    /* verilator lint_off UNUSEDSIGNAL */
    function [31:0] body_beats(input [63:0] a0, input [63:0] a1, input comb, input nxt, input [15:0] row_beats);
        body_beats = (comb ? {16'd0, a0[31:16]} * C_BEATS
                           : {16'd0, a0[15:0]} * X_BEATS + {16'd0, a0[31:16]} * {16'd0, row_beats})
                     + {16'd0, a0[63:48]} + {16'd0, a1[15:0]} + {16'd0, a1[31:16]} + (nxt ? 32'd2 : 32'd0);
    endfunction
    /* verilator lint_on UNUSEDSIGNAL */
    // output-stage record of a row: q_aggregate constants (agg_en), bias (bias_row), next-layer requant (out_en)
    wire [15:0] a_beats = agg_en_reg ? A_BEATS[15:0] : 16'd0;
    wire [15:0] b_beats = bias_row_reg ? B_BEATS[15:0] : 16'd0;
    wire [15:0] o_beats = a_beats + b_beats + (out_en_reg ? A_BEATS[15:0] : 16'd0);
    // regions of the current body: kind-1 records (combination rows / XW rows), output-stage records, package
    // boundary records, package words, copy list or edges, then the next header
    wire [31:0] b_rec1  = is_c ? {16'd0, t_rows} * C_BEATS : {16'd0, t_nodes} * X_BEATS;
    wire [31:0] b_rec2  = b_rec1 + (is_c ? 32'd0 : {16'd0, t_rows} * {16'd0, o_beats});
    wire [31:0] b_pkgs  = b_rec2 + {16'd0, t_pkgs};
    wire [31:0] b_words = b_pkgs + {16'd0, t_words};
    wire [31:0] b_list  = b_words + {16'd0, t_list};
    wire [31:0] pro_w     = {16'd0, num_feat_reg} * W_BEATS;      // weight beats of the prologue
    wire [31:0] pro_beats = pro_w + B_BEATS + 32'd2;

    // ---- records: beats shift in from the top, the last beat completes the record -----------------------------
    /* verilator lint_off UNUSEDSIGNAL */
    reg [REC_W-1:0]      rec_reg;                // its low beat is shifted out by the next beat
    /* verilator lint_on UNUSEDSIGNAL */
    wire [REC_W-1:0]     rec_full = {m_r_data, rec_reg[REC_W-1:64]};
    reg [RB_BITS-1:0]    rbeat_reg;              // beats of the current record so far
    reg [NODE_BITS:0]    node_w_reg;             // kind-1 records written
    reg [NODE_BITS:0]    orow_w_reg;             // output-stage records completed
    reg [15:0]           obeat_reg;              // beat inside the current output-stage record
    reg [A_REC_W-1:0]    agg_c_reg, out_c_reg;   // the row's q_aggregate / next-layer requant constants
    reg [LANES*32-1:0]   bias_reg, bias_layer_reg;
    reg                  o_we_reg;               // write the completed record into the engine (one cycle later)
    reg [NODE_BITS-1:0]  o_addr_reg;
    reg [FEAT_BITS:0]    wcol_reg;               // weight columns written
    reg [PKG_BITS-1:0]   pkg_w_reg, pkg_ptr_reg;
    reg [WORD_BITS-1:0]  word_w_reg, word_ptr_reg;
    reg [EDGE_BITS-1:0]  edge_w_reg, edge_ptr_reg;
    reg [CP_BITS-1:0]    cp_w_reg;
    reg                  cp_bank_reg;            // copy-list bank the loading combination tile fills
    reg [ROW_BITS-1:0]   row_reg;                // output rows received

    reg [39:0]           pkg_mem  [0:MAX_PKGS-1];
    reg [63:0]           word_mem [0:MAX_WORDS-1];
    reg [48:0]           edge_mem [0:MAX_EDGES-1];
    reg [ADDR_BITS+NODE_BITS-1:0] cp_mem [0:(2 << CP_IDX)-1];  // {XW row address, local row}, two banks
    reg [LANES*8-1:0]    xwo_mem [0:MAX_NODES-1];  // XW rows of the last combination tile, as the engine wrote them
    reg [MAX_NODES-1:0]  xwo_valid_reg;             // rows written (the others are XW = 0)
    reg [OUT_BEATS*64-1:0] out_mem [0:MAX_ROWS-1];

    wire in_pro_w  = (state_reg == S_PRO) && (k_reg < pro_w);
    wire bias_end  = r_fire && (state_reg == S_PRO) && (k_reg == pro_w + B_BEATS - 32'd1);
    wire in_rec1   = (state_reg == S_LOAD) && (k_reg < b_rec1);
    wire in_rec2   = (state_reg == S_LOAD) && (k_reg >= b_rec1) && (k_reg < b_rec2);
    wire w_rec_end = r_fire && in_pro_w && (rbeat_reg == W_BEATS[RB_BITS-1:0] - 1'b1);
    wire rec1_end  = r_fire && in_rec1 && (rbeat_reg == (is_c ? C_BEATS[RB_BITS-1:0] : X_BEATS[RB_BITS-1:0]) - 1'b1);
    wire rec2_end  = r_fire && in_rec2 && (obeat_reg == o_beats - 16'd1);
    wire agg_end   = r_fire && in_rec2 && agg_en_reg && (obeat_reg == a_beats - 16'd1);
    wire brow_end  = r_fire && in_rec2 && bias_row_reg && (obeat_reg == a_beats + b_beats - 16'd1);
    wire out_end   = rec2_end && out_en_reg;
    wire [C_REC_W-1:0] c_rec = rec_full[C_OFF +: C_REC_W];

    // ---- the engine -------------------------------------------------------------------------------------------
    reg                  eng_rst_reg;
    wire                 e_pkg_ready, e_word_ready, e_edge_ready, e_m_valid;
    wire [NODE_BITS:0]   e_xw_rows;
    wire [LANES*32-1:0]  e_out;
    wire                 e_xw_w_valid;
    wire [NODE_BITS-1:0] e_xw_w_node;
    wire [LANES*8-1:0]   e_xw_w_data;
    /* verilator lint_off UNUSEDSIGNAL */
    wire [LANES*PSUM_BITS-1:0] e_psum;
    /* verilator lint_on UNUSEDSIGNAL */
    wire                 running = (state_reg == S_RUN);
    wire                 e_pkg_valid  = running && ({{(16-PKG_BITS){1'b0}}, pkg_ptr_reg} < t_pkgs);
    wire                 e_word_valid = running && ({{(16-WORD_BITS){1'b0}}, word_ptr_reg} < t_words);
    wire                 e_edge_valid = running && !is_c && ({{(16-EDGE_BITS){1'b0}}, edge_ptr_reg} < t_list);
    /* verilator lint_off UNUSEDSIGNAL */
    wire [39:0]          pkg_cur  = pkg_mem[pkg_ptr_reg[PKG_IDX-1:0]];    // unused bits: spare field bits
    wire [48:0]          edge_cur = edge_mem[edge_ptr_reg[EDGE_IDX-1:0]];
    /* verilator lint_on UNUSEDSIGNAL */

    layer_engine #(.LANES(LANES), .MAX_NODES(MAX_NODES), .NODE_BITS(NODE_BITS), .MAX_FEATURES(MAX_FEATURES),
                   .FEAT_BITS(FEAT_BITS), .W_BITS(W_BITS), .PSUM_BITS(PSUM_BITS), .COEF_BITS(COEF_BITS),
                   .FRAC_BITS(FRAC_BITS))
    u_eng (
        .clk(clk), .rst(rst || eng_rst_reg),
        .bm_we(rec1_end && is_c), .bm_addr(node_w_reg[NODE_BITS-1:0]), .bm_row(c_rec[MAX_FEATURES-1:0]),
        .num_nodes(t_nodes[NODE_BITS:0]),
        .w_we(w_rec_end), .w_addr(wcol_reg[FEAT_BITS-1:0]), .w_col(rec_full[REC_W-W_BEATS*64 +: LANES*W_BITS]),
        .q_we(rec1_end && is_c), .o_we(o_we_reg), .q_addr(is_c ? node_w_reg[NODE_BITS-1:0] : o_addr_reg),
        .q_mult(c_rec[MAX_FEATURES +: LANES*31]), .q_shift(c_rec[MAX_FEATURES + LANES*31 +: LANES*6]),
        .q_bits(c_rec[MAX_FEATURES + LANES*37 +: LANES*4]),
        .q_agg_mult(agg_c_reg[0 +: LANES*31]), .q_agg_shift(agg_c_reg[LANES*31 +: LANES*6]),
        .q_agg_bits(agg_c_reg[LANES*37 +: 4]), .q_bias(bias_reg),
        .bias_per_row(bias_row_reg), .bias_layer(bias_layer_reg),
        .q_out_mult(out_c_reg[0 +: LANES*31]), .q_out_shift(out_c_reg[LANES*31 +: LANES*6]),
        .q_out_bits(out_c_reg[LANES*37 +: 4]),
        .num_rows(t_nz[NODE_BITS:0]), .agg_en(agg_en_reg), .relu_en(relu_en_reg), .out_en(out_en_reg),
        .s_pkg_valid(e_pkg_valid), .s_pkg_ready(e_pkg_ready), .s_pkg_first_node(pkg_cur[NODE_BITS-1:0]),
        .s_pkg_first_value(pkg_cur[16 +: FEAT_BITS]), .s_pkg_num_values(pkg_cur[39:32]),
        .s_word_valid(e_word_valid), .s_word_ready(e_word_ready), .s_word(word_mem[word_ptr_reg[WORD_IDX-1:0]]),
        .xw_rows(e_xw_rows),
        .xw_we(rec1_end && !is_c), .xw_waddr(node_w_reg[NODE_BITS-1:0]), .xw_wdata(rec_full[X_OFF +: LANES*8]),
        .xw_w_valid(e_xw_w_valid), .xw_w_node(e_xw_w_node), .xw_w_data(e_xw_w_data),
        .s_edge_valid(e_edge_valid), .s_edge_ready(e_edge_ready), .s_edge_coef(edge_cur[COEF_BITS-1:0]),
        .s_edge_src(edge_cur[32 +: NODE_BITS]), .s_edge_last(edge_cur[48]),
        .m_valid(e_m_valid), .m_ready(running), .m_out(e_out), .m_psum(e_psum),
        .err(err), .err_code(err_code)
    );

    wire row_fire  = running && e_m_valid;
    wire last_row  = row_fire && ({{(16-ROW_BITS){1'b0}}, row_reg} == t_rows - 16'd1);
    wire xw_done   = (e_xw_rows == t_nz[NODE_BITS:0]);
    wire run_end   = running && !err && (is_c ? xw_done : last_row);   // the engine is done with the tile

    // ---- the writer: a finished tile's XW rows (to the places its copy list names) or output rows (WB) --------
    reg                  wr_busy_reg, wr_xw_reg, wr_bank_reg;
    reg [15:0]           wr_n_reg;               // copy-list entries or rows to write
    reg [15:0]           wr_i_reg;               // entry / row being written
    reg [7:0]            wr_beat_reg;            // its word
    reg [ADDR_BITS-1:0]  wr_addr_reg;            // next output word (WB)
    /* verilator lint_off UNUSEDSIGNAL */
    wire [ADDR_BITS+NODE_BITS-1:0] cp_cur = cp_mem[{wr_bank_reg, wr_i_reg[CP_IDX-1:0]}];
    /* verilator lint_on UNUSEDSIGNAL */
    wire [NODE_BITS-1:0]    xw_node = cp_cur[NODE_BITS-1:0];
    wire [X_BEATS*64-1:0]   xw_row  = {{(X_BEATS*64-LANES*8){1'b0}},
                                       xwo_valid_reg[xw_node] ? xwo_mem[xw_node] : {(LANES*8){1'b0}}};
    wire [OUT_BEATS*64-1:0] wb_row  = out_mem[wr_i_reg[ROW_IDX-1:0]];
    wire [7:0]           wr_beats = wr_xw_reg ? X_BEATS[7:0] : OUT_BEATS[7:0];
    assign m_w_valid = wr_busy_reg;
    assign m_w_addr  = wr_xw_reg ? cp_cur[NODE_BITS +: ADDR_BITS] + {{(ADDR_BITS-8){1'b0}}, wr_beat_reg}
                                 : wr_addr_reg;
    assign m_w_data  = wr_xw_reg ? xw_row[wr_beat_reg * 64 +: 64] : wb_row[wr_beat_reg * 64 +: 64];
    wire w_fire   = m_w_valid && m_w_ready;
    wire wr_last  = w_fire && (wr_beat_reg == wr_beats - 8'd1) && (wr_i_reg == wr_n_reg - 16'd1);
    wire wr_free  = !wr_busy_reg || wr_last;     // the writer is idle from the next cycle on
    wire load_end = (state_reg == S_LOAD) && r_fire && (k_reg + 32'd1 == b_list + (more ? 32'd2 : 32'd0));
    assign busy = (state_reg != S_IDLE);

    // ---- controller -------------------------------------------------------------------------------------------
    always @* begin
        state_next = state_reg;
        done_next = done;
        cmd = 1'b0;
        cmd_addr = ptr_reg;
        cmd_beats = 32'd0;
        case (state_reg)
            S_IDLE: begin
                if (start) begin
                    cmd = 1'b1;
                    cmd_addr = layer_addr;
                    cmd_beats = 32'd1;
                    done_next = 1'b0;
                    state_next = S_HDR;
                end
            end
            S_HDR: begin
                if (r_fire) begin
                    cmd = 1'b1;
                    cmd_beats = {16'd0, m_r_data[31:16]} * W_BEATS + B_BEATS + 32'd2;
                    state_next = S_PRO;
                end
            end
            S_PRO: begin
                if (r_fire && k_reg == pro_beats - 32'd1) begin
                    cmd = 1'b1;
                    cmd_beats = body_beats(h0_reg, m_r_data, num_ctiles_reg != 16'd0, num_tiles_reg > 16'd1,
                                           o_beats);
                    state_next = S_LOAD;
                end
            end
            S_LOAD: begin
                if (load_end) begin
                    state_next = wr_free ? S_RUN : S_WAIT;
                end
            end
            S_WAIT: begin
                if (wr_free) begin
                    state_next = S_RUN;
                end
            end
            S_RUN: begin
                if (err) begin
                    done_next = 1'b1;
                    state_next = S_IDLE;
                end else if (run_end) begin
                    if (more && (next_c || !is_c)) begin
                        cmd = 1'b1;
                        cmd_beats = body_beats(n0_reg, n1_reg, next_c, more2, o_beats);
                        state_next = S_LOAD;
                    end else begin
                        state_next = more ? S_FLUSH : S_DRAIN;
                    end
                end
            end
            S_FLUSH: begin  // the first aggregation tile reads XW rows the last combination tile is writing
                if (wr_last) begin
                    cmd = 1'b1;
                    cmd_beats = body_beats(h0_reg, h1_reg, 1'b0, more, o_beats);
                    state_next = S_LOAD;
                end
            end
            S_DRAIN: begin
                if (wr_last) begin
                    done_next = 1'b1;
                    state_next = S_IDLE;
                end
            end
            default: begin
                state_next = S_IDLE;
            end
        endcase
    end

    integer i;
    always @(posedge clk) begin
        state_reg <= state_next;
        done <= done_next;
        eng_rst_reg <= cmd && (state_next == S_LOAD);
        // DMA
        if (cmd) begin
            rd_addr_reg <= cmd_addr;
            rd_left_reg <= cmd_beats;
            ptr_reg <= cmd_addr + cmd_beats[ADDR_BITS-1:0];
            k_reg <= 32'd0;
        end else begin
            if (ar_fire) begin
                rd_addr_reg <= rd_addr_reg + burst[ADDR_BITS-1:0];
                rd_left_reg <= rd_left_reg - burst;
            end
            if (r_fire) begin
                k_reg <= k_reg + 32'd1;
            end
        end
        rd_out_reg <= rd_out_reg + {7'd0, ar_fire} - {7'd0, m_r_valid && m_r_ready && m_r_last};
        // records
        if (r_fire) begin
            rec_reg <= rec_full;
            rbeat_reg <= (w_rec_end || rec1_end) ? {RB_BITS{1'b0}} : rbeat_reg + 1'b1;
        end
        if (w_rec_end) begin
            wcol_reg <= wcol_reg + 1'b1;
        end
        if (rec1_end) begin
            node_w_reg <= node_w_reg + 1'b1;
        end
        if (r_fire && in_rec2) begin
            obeat_reg <= rec2_end ? 16'd0 : obeat_reg + 16'd1;
        end
        if (agg_end) agg_c_reg <= rec_full[A_OFF +: A_REC_W];
        if (brow_end) bias_reg <= rec_full[B_OFF +: LANES*32];
        if (out_end) out_c_reg <= rec_full[A_OFF +: A_REC_W];
        if (bias_end) bias_layer_reg <= rec_full[B_OFF +: LANES*32];
        o_we_reg <= rec2_end;
        if (rec2_end) begin
            o_addr_reg <= orow_w_reg[NODE_BITS-1:0];
            orow_w_reg <= orow_w_reg + 1'b1;
        end
        case (state_reg)
            S_HDR: begin
                if (r_fire) begin
                    num_ctiles_reg <= m_r_data[15:0];
                    num_tiles_reg <= m_r_data[15:0] + m_r_data[63:48];
                    num_feat_reg <= m_r_data[31:16];
                    agg_en_reg <= m_r_data[32];
                    relu_en_reg <= m_r_data[33];
                    out_en_reg <= m_r_data[34];
                    bias_row_reg <= m_r_data[35];
                    wcol_reg <= {(FEAT_BITS+1){1'b0}};
                    rbeat_reg <= {RB_BITS{1'b0}};
                    tile_reg <= 16'd0;
                    cp_bank_reg <= 1'b0;
                end
            end
            S_PRO: begin
                if (r_fire && k_reg == pro_beats - 32'd2) h0_reg <= m_r_data;
                if (r_fire && k_reg == pro_beats - 32'd1) h1_reg <= m_r_data;
            end
            S_LOAD: begin
                if (r_fire && k_reg >= b_rec2) begin
                    if (k_reg < b_pkgs) begin
                        pkg_mem[pkg_w_reg[PKG_IDX-1:0]] <= m_r_data[39:0];
                        pkg_w_reg <= pkg_w_reg + 1'b1;
                    end else if (k_reg < b_words) begin
                        word_mem[word_w_reg[WORD_IDX-1:0]] <= m_r_data;
                        word_w_reg <= word_w_reg + 1'b1;
                    end else if (k_reg < b_list && is_c) begin
                        cp_mem[{cp_bank_reg, cp_w_reg[CP_IDX-1:0]}] <= {m_r_data[32 +: ADDR_BITS],
                                                                       m_r_data[NODE_BITS-1:0]};
                        cp_w_reg <= cp_w_reg + 1'b1;
                    end else if (k_reg < b_list) begin
                        edge_mem[edge_w_reg[EDGE_IDX-1:0]] <= m_r_data[48:0];
                        edge_w_reg <= edge_w_reg + 1'b1;
                    end else if (k_reg == b_list) begin
                        n0_reg <= m_r_data;
                    end else begin
                        n1_reg <= m_r_data;
                    end
                end
            end
            S_RUN: begin
                if (e_pkg_valid && e_pkg_ready) pkg_ptr_reg <= pkg_ptr_reg + 1'b1;
                if (e_word_valid && e_word_ready) word_ptr_reg <= word_ptr_reg + 1'b1;
                if (e_edge_valid && e_edge_ready) edge_ptr_reg <= edge_ptr_reg + 1'b1;
                if (row_fire) begin
                    out_mem[row_reg[ROW_IDX-1:0]] <= {{(OUT_BEATS*64-LANES*32){1'b0}}, e_out};
                    row_reg <= row_reg + 1'b1;
                end
                if (is_c && e_xw_w_valid) begin
                    xwo_mem[e_xw_w_node] <= e_xw_w_data;
                    xwo_valid_reg[e_xw_w_node] <= 1'b1;
                end
            end
            default: begin end
        endcase
        if (state_reg != S_RUN && state_next == S_RUN) begin
            xwo_valid_reg <= {MAX_NODES{1'b0}};  // the writer has finished with the previous tile's rows
        end
        // the writer
        if (w_fire) begin
            wr_addr_reg <= wr_addr_reg + 1'b1;
            if (wr_beat_reg == wr_beats - 8'd1) begin
                wr_beat_reg <= 8'd0;
                wr_i_reg <= wr_i_reg + 16'd1;
            end else begin
                wr_beat_reg <= wr_beat_reg + 8'd1;
            end
        end
        if (wr_last) begin
            wr_busy_reg <= 1'b0;
        end
        if (run_end) begin  // hand the tile to the writer (idle: the run waited for it)
            wr_busy_reg <= 1'b1;
            wr_xw_reg <= is_c;
            wr_bank_reg <= cp_bank_reg;
            wr_n_reg <= is_c ? t_list : t_rows;
            wr_i_reg <= 16'd0;
            wr_beat_reg <= 8'd0;
            wr_addr_reg <= t_out[ADDR_BITS-1:0];
        end
        if (run_end && more) begin
            h0_reg <= n0_reg;
            h1_reg <= n1_reg;
            tile_reg <= tile_reg + 16'd1;
            if (is_c) cp_bank_reg <= ~cp_bank_reg;
        end
        if (cmd && state_next == S_LOAD) begin  // a tile starts: empty every buffer
            node_w_reg <= {(NODE_BITS+1){1'b0}};
            orow_w_reg <= {(NODE_BITS+1){1'b0}};
            obeat_reg <= 16'd0;
            rbeat_reg <= {RB_BITS{1'b0}};
            pkg_w_reg <= {PKG_BITS{1'b0}};
            word_w_reg <= {WORD_BITS{1'b0}};
            edge_w_reg <= {EDGE_BITS{1'b0}};
            cp_w_reg <= {CP_BITS{1'b0}};
            pkg_ptr_reg <= {PKG_BITS{1'b0}};
            word_ptr_reg <= {WORD_BITS{1'b0}};
            edge_ptr_reg <= {EDGE_BITS{1'b0}};
            row_reg <= {ROW_BITS{1'b0}};
        end
        // cycle counters
        if (state_reg == S_IDLE && start) begin
            cnt_total <= 32'd0;
            cnt_load <= 32'd0;
            cnt_comb <= 32'd0;
            cnt_agg <= 32'd0;
            cnt_xw <= 32'd0;
            cnt_wb <= 32'd0;
            cnt_wait <= 32'd0;
            cnt_tiles <= 32'd0;
        end else if (state_reg != S_IDLE) begin
            cnt_total <= cnt_total + 32'd1;
            if (state_reg == S_HDR || state_reg == S_PRO || state_reg == S_LOAD) cnt_load <= cnt_load + 32'd1;
            if (running && is_c) cnt_comb <= cnt_comb + 32'd1;
            if (running && !is_c) cnt_agg <= cnt_agg + 32'd1;
            if (wr_busy_reg && wr_xw_reg) cnt_xw <= cnt_xw + 32'd1;
            if (wr_busy_reg && !wr_xw_reg) cnt_wb <= cnt_wb + 32'd1;
            if (state_reg == S_WAIT) cnt_wait <= cnt_wait + 32'd1;
            if (wr_last) cnt_tiles <= cnt_tiles + 32'd1;
        end
        if (rst) begin
            state_reg <= S_IDLE;
            done <= 1'b0;
            eng_rst_reg <= 1'b0;
            o_we_reg <= 1'b0;
            wr_busy_reg <= 1'b0;
            rd_left_reg <= 32'd0;
            rd_out_reg <= 8'd0;
            k_reg <= 32'd0;
            cnt_total <= 32'd0;
            cnt_load <= 32'd0;
            cnt_comb <= 32'd0;
            cnt_agg <= 32'd0;
            cnt_xw <= 32'd0;
            cnt_wb <= 32'd0;
            cnt_wait <= 32'd0;
            cnt_tiles <= 32'd0;
            for (i = 0; i < MAX_ROWS; i = i + 1) begin
                out_mem[i] <= {(OUT_BEATS*64){1'b0}};
            end
        end
    end

endmodule

`resetall
