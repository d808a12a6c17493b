// Requantization unit: out = sat_sym(round_haz(acc * multiplier / 2^shift), out_bits).
//
// Bit-exact with quant/formats/fixed_point.requantize (rounding "half_away_from_zero", on_overflow "saturate"):
//   p   = acc * M                                  (exact: |acc| <= 2^31, M < 2^31 => |p| <= 2^62)
//   q   = sign(p) * ((|p| + 2^(shift-1)) >> shift) (shift = 0: q = p; shift > 62: q = 0)
//   out = clamp(q, -(2^(b-1)-1), 2^(b-1)-1)         (b <= 1: out = 0)
// Two-stage pipeline (multiply | round + saturate), one element per cycle, LATENCY = 2 cycles from the input
// handshake to m_valid (hw/timing.py: requant_latency_cycles). Valid/ready on both sides; each stage advances
// when the stage after it is empty or being drained, so back-pressure never drops or duplicates an element.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module requant #(
    // Width of the signed accumulator input; the golden model checks |acc| fits 32 bits. Must be 2..32.
    parameter ACC_BITS   = 32,
    // Width of the unsigned normalised multiplier (quantize_multiplier bits=31). Must be 2..31.
    parameter MULT_BITS  = 31,
    // Width of the output code register (two's complement); out_bits inputs above it are rejected. Must be 2..8.
    parameter OUT_BITS   = 8
) (
    input  wire                   clk,
    input  wire                   rst,

    /* input stream: one accumulator with its per-element constants */
    input  wire                   s_valid,
    output wire                   s_ready,
    input  wire [ACC_BITS-1:0]    s_acc,       // signed accumulator
    input  wire [MULT_BITS-1:0]   s_mult,      // unsigned multiplier M
    input  wire [5:0]             s_shift,     // right shift 0..63 (> 62 gives 0, like the golden model)
    input  wire [3:0]             s_bits,      // output bitwidth b 0..OUT_BITS

    /* output stream */
    output wire                   m_valid,
    input  wire                   m_ready,
    output wire [OUT_BITS-1:0]    m_code       // signed code, |code| <= 2^(b-1)-1
);

    localparam PROD_BITS = ACC_BITS + MULT_BITS + 1;  // signed product, exact

    initial begin
        if (ACC_BITS < 2 || ACC_BITS > 32) begin
            $error("Error: ACC_BITS=%0d must lie in 2..32 (instance %m)", ACC_BITS);
            $finish;
        end
        if (MULT_BITS < 2 || MULT_BITS > 31) begin
            $error("Error: MULT_BITS=%0d must lie in 2..31 (instance %m)", MULT_BITS);
            $finish;
        end
        if (OUT_BITS < 2 || OUT_BITS > 8) begin
            $error("Error: OUT_BITS=%0d must lie in 2..8 (instance %m)", OUT_BITS);
            $finish;
        end
    end

    // stage 1: product |p|, sign, shift, bits
    reg                   v1_reg, v1_next;
    reg [PROD_BITS-1:0]   mag1_reg, mag1_next;
    reg                   neg1_reg, neg1_next;
    reg [5:0]             shift1_reg, shift1_next;
    reg [3:0]             bits1_reg, bits1_next;
    // stage 2: output register
    reg                   v2_reg, v2_next;
    reg [OUT_BITS-1:0]    code2_reg, code2_next;

    wire stage2_free = !v2_reg || m_ready;
    wire stage1_free = !v1_reg || stage2_free;
    assign s_ready = stage1_free;
    assign m_valid = v2_reg;
    assign m_code  = code2_reg;

    // stage-1 datapath
    wire signed [PROD_BITS-1:0] prod = $signed(s_acc) * $signed({1'b0, s_mult});
    // stage-2 datapath: rounding shift then symmetric saturation
    reg [PROD_BITS:0]     rounded;
    reg [PROD_BITS:0]     half;
    reg [OUT_BITS-1:0]    qmax;
    reg [OUT_BITS-1:0]    mag_sat;

    always @* begin
        v1_next = v1_reg;
        mag1_next = mag1_reg;
        neg1_next = neg1_reg;
        shift1_next = shift1_reg;
        bits1_next = bits1_reg;
        v2_next = v2_reg;
        code2_next = code2_reg;

        half = (shift1_reg == 6'd0) ? {(PROD_BITS+1){1'b0}} : ({{PROD_BITS{1'b0}}, 1'b1} << (shift1_reg - 6'd1));
        rounded = ({1'b0, mag1_reg} + half) >> shift1_reg;
        if (shift1_reg > 6'd62) begin
            rounded = 0;
        end
        qmax = (bits1_reg <= 4'd1) ? {OUT_BITS{1'b0}} : (({{(OUT_BITS-1){1'b0}}, 1'b1} << (bits1_reg - 4'd1)) - 1'b1);
        mag_sat = (rounded > {{(PROD_BITS+1-OUT_BITS){1'b0}}, qmax}) ? qmax : rounded[OUT_BITS-1:0];

        if (stage2_free) begin
            v2_next = v1_reg;
            if (v1_reg) begin
                code2_next = neg1_reg ? (~mag_sat + 1'b1) : mag_sat;
            end
        end
        if (stage1_free) begin
            v1_next = s_valid;
            if (s_valid) begin
                neg1_next = prod[PROD_BITS-1];
                mag1_next = prod[PROD_BITS-1] ? (~prod + 1'b1) : prod;
                shift1_next = s_shift;
                bits1_next = s_bits;
            end
        end
    end

    always @(posedge clk) begin
        v1_reg <= v1_next;
        mag1_reg <= mag1_next;
        neg1_reg <= neg1_next;
        shift1_reg <= shift1_next;
        bits1_reg <= bits1_next;
        v2_reg <= v2_next;
        code2_reg <= code2_next;
        if (rst) begin
            v1_reg <= 1'b0;
            v2_reg <= 1'b0;
        end
    end

endmodule

`resetall
