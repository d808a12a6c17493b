// Aggregation unit (AU): saturating weighted-sum of source feature codes into one destination row.
//
// Bit-exact with quant/formats/fixed_point.aggregate_int (on_overflow "saturate"): for the edge beats of one destination
// row in stored CSR order, psum = sat_W(... sat_W(sat_W(c_0 x_0) + c_1 x_1) ...), W = PSUM_BITS, for LANES
// features in parallel (one lane = one feature of the row slice). One edge beat per cycle; s_last marks the last
// edge of a row, whose partial sums appear on the output 1 cycle later (hw/timing.py: aggregation_cycles).
// A zero-degree row is sent as a single beat with coefficient 0 (it yields 0, as aggregate_int does).
`resetall
`timescale 1ns / 1ps
`default_nettype none

module aggregation_unit #(
    // Features processed in parallel (lanes). Must be >= 1.
    parameter LANES      = 4,
    // Width of a signed source feature code (XW code). Must be 2..8.
    parameter CODE_BITS  = 8,
    // Width of the unsigned per-edge fixed-point coefficient c_e. Must be 1..24.
    parameter COEF_BITS  = 16,
    // Width of the signed saturating partial sum (MEGA's AU: 16). Must be 2..32.
    parameter PSUM_BITS  = 16
) (
    input  wire                        clk,
    input  wire                        rst,

    /* edge beats: one source row slice and its coefficient */
    input  wire                        s_valid,
    output wire                        s_ready,
    input  wire [COEF_BITS-1:0]        s_coef,
    input  wire [LANES*CODE_BITS-1:0]  s_x,       // lane i = bits [i*CODE_BITS +: CODE_BITS], signed
    input  wire                        s_last,    // last edge of the destination row

    /* finished rows */
    output wire                        m_valid,
    input  wire                        m_ready,
    output wire [LANES*PSUM_BITS-1:0]  m_psum     // lane i = bits [i*PSUM_BITS +: PSUM_BITS], signed
);

    localparam PROD_BITS = COEF_BITS + CODE_BITS + 1;
    localparam SUM_BITS  = (PROD_BITS > PSUM_BITS ? PROD_BITS : PSUM_BITS) + 1;

    initial begin
        if (LANES < 1) begin
            $error("Error: LANES=%0d must be >= 1 (instance %m)", LANES);
            $finish;
        end
        if (CODE_BITS < 2 || CODE_BITS > 8) begin
            $error("Error: CODE_BITS=%0d must lie in 2..8 (instance %m)", CODE_BITS);
            $finish;
        end
        if (COEF_BITS < 1 || COEF_BITS > 24) begin
            $error("Error: COEF_BITS=%0d must lie in 1..24 (instance %m)", COEF_BITS);
            $finish;
        end
        if (PSUM_BITS < 2 || PSUM_BITS > 32) begin
            $error("Error: PSUM_BITS=%0d must lie in 2..32 (instance %m)", PSUM_BITS);
            $finish;
        end
    end

    reg                        first_reg, first_next;   // next beat starts a new row
    reg [LANES*PSUM_BITS-1:0]  acc_reg, acc_next;
    reg                        out_valid_reg, out_valid_next;
    reg [LANES*PSUM_BITS-1:0]  out_reg, out_next;

    // a row can only finish when the output register is free (or being read this cycle)
    wire out_free = !out_valid_reg || m_ready;
    assign s_ready = out_free;
    assign m_valid = out_valid_reg;
    assign m_psum  = out_reg;

    localparam signed [SUM_BITS-1:0] PSUM_MAX = (1 <<< (PSUM_BITS - 1)) - 1;
    localparam signed [SUM_BITS-1:0] PSUM_MIN = -(1 <<< (PSUM_BITS - 1));

    integer i;
    reg signed [PROD_BITS-1:0] prod;
    reg signed [SUM_BITS-1:0]  base;
    reg signed [SUM_BITS-1:0]  sum;

    always @* begin
        first_next = first_reg;
        acc_next = acc_reg;
        out_valid_next = out_valid_reg && !m_ready;
        out_next = out_reg;
        prod = {PROD_BITS{1'b0}};
        base = {SUM_BITS{1'b0}};
        sum = {SUM_BITS{1'b0}};
        if (s_valid && s_ready) begin
            for (i = 0; i < LANES; i = i + 1) begin
                prod = $signed({1'b0, s_coef}) * $signed(s_x[i*CODE_BITS +: CODE_BITS]);
                base = first_reg ? {SUM_BITS{1'b0}} : {{(SUM_BITS-PSUM_BITS){acc_reg[(i+1)*PSUM_BITS-1]}},
                                                        acc_reg[i*PSUM_BITS +: PSUM_BITS]};
                sum = base + {{(SUM_BITS-PROD_BITS){prod[PROD_BITS-1]}}, prod};
                if (sum > PSUM_MAX) begin
                    sum = PSUM_MAX;
                end else if (sum < PSUM_MIN) begin
                    sum = PSUM_MIN;
                end
                acc_next[i*PSUM_BITS +: PSUM_BITS] = sum[PSUM_BITS-1:0];
            end
            first_next = s_last;
            if (s_last) begin
                out_valid_next = 1'b1;
                out_next = acc_next;
            end
        end
    end

    always @(posedge clk) begin
        first_reg <= first_next;
        acc_reg <= acc_next;
        out_valid_reg <= out_valid_next;
        out_reg <= out_next;
        if (rst) begin
            first_reg <= 1'b1;
            out_valid_reg <= 1'b0;
        end
    end

endmodule

`resetall
