// Simulation top: accel_top + the behavioural mem_model (simulation only). The testbench drives clk, rst, start
// and layer_addr, waits for `done` and reads the counters; the memory is preloaded with +MEMFILE and the output
// region is dumped with $writememh on the rising edge after `done` rises (+DUMPFILE, +DUMP_LO, +DUMP_HI).
// Only the ports are public to VPI (metacomments; hw/rtl/sim.py builds this top without --public-flat-rw, so
// the simulator need not compute every internal wire on every evaluation).
`resetall
`timescale 1ns / 1ps
`default_nettype none

module accel_sim #(
    // accel_top parameters (accel_top.v)
    parameter LANES           = 4,
    parameter MAX_NODES       = 16,
    parameter NODE_BITS       = 4,
    parameter MAX_FEATURES    = 8,
    parameter FEAT_BITS       = 3,
    parameter W_BITS          = 4,
    parameter PSUM_BITS       = 16,
    parameter COEF_BITS       = 16,
    parameter FRAC_BITS       = 8,
    parameter MAX_ROWS        = 16,
    parameter MAX_PKGS        = 64,
    parameter MAX_WORDS       = 128,
    parameter MAX_EDGES       = 64,
    parameter MAX_COPIES      = 64,
    parameter ADDR_BITS       = 16,
    parameter BURST_BEATS     = 16,
    parameter MAX_OUTSTANDING = 16,
    // mem_model parameters (mem_model.v)
    parameter MEM_WORDS       = 1 << 16,
    parameter LATENCY         = 100,
    parameter BEAT_INTERVAL   = 1
) (
    input  wire                 clk /*verilator public_flat_rw*/,
    input  wire                 rst /*verilator public_flat_rw*/,
    input  wire                 start /*verilator public_flat_rw*/,
    input  wire [ADDR_BITS-1:0] layer_addr /*verilator public_flat_rw*/,
    output wire                 busy /*verilator public_flat_rw*/,
    output wire                 done /*verilator public_flat_rw*/,
    output wire                 err /*verilator public_flat_rw*/,
    output wire [1:0]           err_code /*verilator public_flat_rw*/,
    output wire [31:0]          cnt_total /*verilator public_flat_rw*/,
    output wire [31:0]          cnt_load /*verilator public_flat_rw*/,
    output wire [31:0]          cnt_comb /*verilator public_flat_rw*/,
    output wire [31:0]          cnt_agg /*verilator public_flat_rw*/,
    output wire [31:0]          cnt_xw /*verilator public_flat_rw*/,
    output wire [31:0]          cnt_wb /*verilator public_flat_rw*/,
    output wire [31:0]          cnt_wait /*verilator public_flat_rw*/,
    output wire [31:0]          cnt_tiles /*verilator public_flat_rw*/
);

    wire                 ar_valid, ar_ready, r_valid, r_ready, r_last, w_valid, w_ready;
    wire [ADDR_BITS-1:0] ar_addr, w_addr;
    wire [7:0]           ar_len;
    wire [63:0]          r_data, w_data;
    reg                  done_d;

    always @(posedge clk) begin
        done_d <= done;
        if (rst) done_d <= 1'b0;
    end

    accel_top #(.LANES(LANES), .MAX_NODES(MAX_NODES), .NODE_BITS(NODE_BITS), .MAX_FEATURES(MAX_FEATURES),
                .FEAT_BITS(FEAT_BITS), .W_BITS(W_BITS), .PSUM_BITS(PSUM_BITS), .COEF_BITS(COEF_BITS),
                .FRAC_BITS(FRAC_BITS), .MAX_ROWS(MAX_ROWS), .MAX_PKGS(MAX_PKGS), .MAX_WORDS(MAX_WORDS),
                .MAX_EDGES(MAX_EDGES), .MAX_COPIES(MAX_COPIES), .ADDR_BITS(ADDR_BITS), .BURST_BEATS(BURST_BEATS),
                .MAX_OUTSTANDING(MAX_OUTSTANDING))
    u_top (
        .clk(clk), .rst(rst), .start(start), .layer_addr(layer_addr), .busy(busy), .done(done), .err(err),
        .err_code(err_code),
        .m_ar_valid(ar_valid), .m_ar_ready(ar_ready), .m_ar_addr(ar_addr), .m_ar_len(ar_len),
        .m_r_valid(r_valid), .m_r_ready(r_ready), .m_r_data(r_data), .m_r_last(r_last),
        .m_w_valid(w_valid), .m_w_ready(w_ready), .m_w_addr(w_addr), .m_w_data(w_data),
        .cnt_total(cnt_total), .cnt_load(cnt_load), .cnt_comb(cnt_comb), .cnt_agg(cnt_agg), .cnt_xw(cnt_xw),
        .cnt_wb(cnt_wb), .cnt_wait(cnt_wait),
        .cnt_tiles(cnt_tiles)
    );

    mem_model #(.ADDR_BITS(ADDR_BITS), .WORDS(MEM_WORDS), .LATENCY(LATENCY), .BEAT_INTERVAL(BEAT_INTERVAL))
    u_mem (
        .clk(clk), .rst(rst),
        .ar_valid(ar_valid), .ar_ready(ar_ready), .ar_addr(ar_addr), .ar_len(ar_len),
        .r_valid(r_valid), .r_ready(r_ready), .r_data(r_data), .r_last(r_last),
        .w_valid(w_valid), .w_ready(w_ready), .w_addr(w_addr), .w_data(w_data),
        .dump(done && !done_d)
    );

endmodule

`resetall
