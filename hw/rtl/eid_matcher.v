// Condense-Edge eID FIFO matcher: NUM_FIFOS FIFOs of sorted source IDs (one per destination subgraph); every
// produced XW row ID is compared with all FIFO heads at once, and each FIFO whose head matches pops it.
//
// Output beat per input ID: the ID and a NUM_FIFOS-bit hit mask (bit k = "copy this row contiguously into
// subgraph k's Sparse-Buffer region"). One ID per cycle, registered output (hw/timing.py: eid_match_cycles).
// The FIFOs are filled through the ld_* port (offline plan of quant/hw side); a push and a pop of the same
// FIFO in one cycle are both honoured.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module eid_matcher #(
    // Number of eID FIFOs (active destination subgraphs; MEGA: 16). Must be 1..32.
    parameter NUM_FIFOS = 16,
    // Entries per FIFO (MEGA: 8). Must be a power of two, 2..256.
    parameter DEPTH     = 8,
    // Width of node IDs. Must be 1..32.
    parameter ID_BITS   = 16
) (
    input  wire                  clk,
    input  wire                  rst,

    /* FIFO fill port */
    input  wire                  ld_valid,
    output wire                  ld_ready,
    input  wire [4:0]            ld_fifo,      // 0..NUM_FIFOS-1
    input  wire [ID_BITS-1:0]    ld_id,

    /* produced row IDs */
    input  wire                  s_valid,
    output wire                  s_ready,
    input  wire [ID_BITS-1:0]    s_id,

    /* match results */
    output wire                  m_valid,
    input  wire                  m_ready,
    output wire [ID_BITS-1:0]    m_id,
    output wire [NUM_FIFOS-1:0]  m_hit,

    /* status: FIFOs holding entries */
    output wire [NUM_FIFOS-1:0]  nonempty
);

    localparam PTR_BITS = $clog2(DEPTH);
    localparam [PTR_BITS:0] ONE = 1, ZERO = 0;

    initial begin
        if (NUM_FIFOS < 1 || NUM_FIFOS > 32) begin
            $error("Error: NUM_FIFOS=%0d must lie in 1..32 (instance %m)", NUM_FIFOS);
            $finish;
        end
        if (DEPTH < 2 || DEPTH > 256 || (1 << PTR_BITS) != DEPTH) begin
            $error("Error: DEPTH=%0d must be a power of two in 2..256 (instance %m)", DEPTH);
            $finish;
        end
        if (ID_BITS < 1 || ID_BITS > 32) begin
            $error("Error: ID_BITS=%0d must lie in 1..32 (instance %m)", ID_BITS);
            $finish;
        end
    end

    reg [ID_BITS-1:0]    mem [0:NUM_FIFOS*DEPTH-1];
    reg [PTR_BITS-1:0]   rd_reg [0:NUM_FIFOS-1];
    reg [PTR_BITS-1:0]   wr_reg [0:NUM_FIFOS-1];
    reg [PTR_BITS:0]     cnt_reg [0:NUM_FIFOS-1];
    reg                  out_valid_reg;
    reg [ID_BITS-1:0]    out_id_reg;
    reg [NUM_FIFOS-1:0]  out_hit_reg;

    wire take = s_valid && s_ready;
    wire push = ld_valid && ld_ready;
    assign s_ready = !out_valid_reg || m_ready;
    assign m_valid = out_valid_reg;
    assign m_id = out_id_reg;
    assign m_hit = out_hit_reg;

    reg [NUM_FIFOS-1:0] hit;
    reg [NUM_FIFOS-1:0] ne;
    reg                 sel_full;
    integer k;
    always @* begin
        sel_full = 1'b1;
        for (k = 0; k < NUM_FIFOS; k = k + 1) begin
            ne[k] = cnt_reg[k] != 0;
            hit[k] = ne[k] && (mem[k*DEPTH + {{(32-PTR_BITS){1'b0}}, rd_reg[k]}] == s_id);
            if (ld_fifo == k[4:0]) begin
                sel_full = cnt_reg[k] == DEPTH[PTR_BITS:0];
            end
        end
    end
    assign ld_ready = !sel_full;   // an out-of-range ld_fifo is never accepted
    assign nonempty = ne;

    integer j;
    always @(posedge clk) begin
        if (take || (out_valid_reg && m_ready)) begin
            out_valid_reg <= take;
        end
        if (take) begin
            out_id_reg <= s_id;
            out_hit_reg <= hit;
        end
        for (j = 0; j < NUM_FIFOS; j = j + 1) begin
            if (take && hit[j]) begin
                rd_reg[j] <= rd_reg[j] + 1'b1;
            end
            if (push && ld_fifo == j[4:0]) begin
                mem[j*DEPTH + {{(32-PTR_BITS){1'b0}}, wr_reg[j]}] <= ld_id;
                wr_reg[j] <= wr_reg[j] + 1'b1;
            end
            cnt_reg[j] <= cnt_reg[j] + ((push && ld_fifo == j[4:0]) ? ONE : ZERO) - ((take && hit[j]) ? ONE : ZERO);
            if (rst) begin
                rd_reg[j] <= {PTR_BITS{1'b0}};
                wr_reg[j] <= {PTR_BITS{1'b0}};
                cnt_reg[j] <= {(PTR_BITS+1){1'b0}};
            end
        end
        if (rst) begin
            out_valid_reg <= 1'b0;
        end
    end

endmodule

`resetall
