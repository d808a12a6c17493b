// Output stage of a GCN layer tile: steps 4-5 of quant.archs.gcn.integer.gcn_layer_trace after the aggregation:
//   acc  = agg_en ? requantize(psum, agg_mult, agg_shift, agg_bits) << FRAC_BITS : psum   (q_aggregate, optional)
//   acc  = sat32(acc + bias)                                                               (bias, 0 if none)
//   acc  = relu_en ? max(acc, 0) : acc
//   out  = out_en ? requantize(acc, out_mult, out_shift, out_bits) : acc       (next layer's codes | last layer)
// requantize = sat_sym(round_half_away(acc * M / 2^shift), bits), exactly as requant.v / quant.formats.fixed_point.
// One row (LANES lanes) per cycle; a rigid 5-stage pipeline (agg multiply | agg round | bias + ReLU | out
// multiply | out round), so LATENCY = 5 cycles from the input handshake to m_valid (hw/timing.py:
// OUTPUT_STAGE_LATENCY_CYCLES). All stages advance together when the output register is empty or taken.
// m_psum carries the input partial sums to the output (for bit-exact checks of the aggregation).
`resetall
`timescale 1ns / 1ps
`default_nettype none

module output_stage #(
    // Lanes (output channels). Must be >= 1.
    parameter LANES     = 4,
    // Width of the signed partial sums at the input. Must be 2..32.
    parameter PSUM_BITS = 16,
    // Fractional bits of the edge coefficients (the agg-requant output is shifted left by them). Must be 0..23.
    parameter FRAC_BITS = 8
) (
    input  wire                        clk,
    input  wire                        rst,

    /* static configuration of the layer */
    input  wire                        agg_en,     // q_aggregate requant present
    input  wire                        relu_en,
    input  wire                        out_en,     // requant to the next layer's codes (0: last layer)

    /* input rows with their per-row constants (lane o = bits [o*W +: W]) */
    input  wire                        s_valid,
    output wire                        s_ready,
    input  wire [LANES*PSUM_BITS-1:0]  s_psum,
    input  wire [LANES*31-1:0]         s_agg_mult,
    input  wire [LANES*6-1:0]          s_agg_shift,
    input  wire [3:0]                  s_agg_bits,
    input  wire [LANES*32-1:0]         s_bias,     // signed, in accumulator units
    input  wire [LANES*31-1:0]         s_out_mult,
    input  wire [LANES*6-1:0]          s_out_shift,
    input  wire [3:0]                  s_out_bits,

    /* output rows */
    output wire                        m_valid,
    input  wire                        m_ready,
    output wire [LANES*32-1:0]         m_out,      // codes sign-extended (out_en) or the 32-bit accumulator
    output wire [LANES*PSUM_BITS-1:0]  m_psum
);

    initial begin
        if (LANES < 1 || PSUM_BITS < 2 || PSUM_BITS > 32 || FRAC_BITS < 0 || FRAC_BITS > 23) begin
            $error("Error: LANES=%0d (>= 1), PSUM_BITS=%0d (2..32), FRAC_BITS=%0d (0..23) out of range (instance %m)",
                   LANES, PSUM_BITS, FRAC_BITS);
            $finish;
        end
    end

    reg [4:0] v_reg;                     // valid bit of stages 1..5
    wire en = !v_reg[4] || m_ready;      // the whole pipeline advances
    assign s_ready = en;
    assign m_valid = v_reg[4];

    // per-row fields carried down the pipeline
    reg [3:0] agg_bits1_reg, out_bits1_reg, out_bits2_reg, out_bits3_reg, out_bits4_reg;
    reg [LANES*PSUM_BITS-1:0] psum1_reg, psum2_reg, psum3_reg, psum4_reg, psum5_reg;
    assign m_psum = psum5_reg;

    always @(posedge clk) begin
        if (en) begin
            v_reg <= {v_reg[3:0], s_valid};
            agg_bits1_reg <= s_agg_bits;
            out_bits1_reg <= s_out_bits;
            out_bits2_reg <= out_bits1_reg;
            out_bits3_reg <= out_bits2_reg;
            out_bits4_reg <= out_bits3_reg;
            psum1_reg <= s_psum;
            psum2_reg <= psum1_reg;
            psum3_reg <= psum2_reg;
            psum4_reg <= psum3_reg;
            psum5_reg <= psum4_reg;
        end
        if (rst) begin
            v_reg <= 5'd0;
        end
    end

    // The magnitude of a requantized code: |round_half_away(mag / 2^shift)| (0 for shift > 62), clamped to the
    // largest magnitude of a b-bit signed code, 2^(b-1) - 1 (0 for b <= 1): requant.v's rounding and saturation.
    function [7:0] code_magnitude;
        input [63:0] mag;
        input [5:0]  shift;
        input [3:0]  bits;
        reg   [64:0] rounded;
        reg   [7:0]  qmax;
        begin
            rounded = ({1'b0, mag} + ((shift == 6'd0) ? 65'd0 : (65'd1 << (shift - 6'd1)))) >> shift;
            if (shift > 6'd62) rounded = 65'd0;
            qmax = (bits <= 4'd1) ? 8'd0 : ((8'd1 << (bits - 4'd1)) - 8'd1);
            code_magnitude = (rounded > {57'd0, qmax}) ? qmax : rounded[7:0];
        end
    endfunction

    genvar o;
    generate
        for (o = 0; o < LANES; o = o + 1) begin : lane
            wire signed [31:0] psum_in = {{(32-PSUM_BITS){s_psum[o*PSUM_BITS+PSUM_BITS-1]}},
                                          s_psum[o*PSUM_BITS +: PSUM_BITS]};
            wire signed [63:0] agg_prod = psum_in * $signed({1'b0, s_agg_mult[o*31 +: 31]});

            // stage 1: |psum * agg_mult|
            reg [63:0] amag1_reg;
            reg        aneg1_reg;
            reg [5:0]  ashift1_reg, oshift1_reg, oshift2_reg, oshift3_reg, oshift4_reg;
            reg [30:0] omult1_reg, omult2_reg, omult3_reg;
            reg signed [31:0] bias1_reg, bias2_reg;
            reg signed [31:0] acc1_reg, acc2_reg, acc3_reg, acc4_reg, out5_reg;
            // stage 4: |acc * out_mult|
            reg [63:0] omag4_reg;
            reg        oneg4_reg;

            wire signed [63:0] out_prod = acc3_reg * $signed({1'b0, omult3_reg});

            // stage 2: rounded, saturated agg code -> accumulator
            reg [7:0]  amag_sat;
            reg signed [31:0] acc2_next;
            // stage 3: bias add with 32-bit saturation, ReLU
            reg signed [32:0] biased;
            reg signed [31:0] acc3_next;
            // stage 5: rounded, saturated output code
            reg [7:0]  omag_sat;
            reg signed [31:0] out5_next;
            always @* begin
                amag_sat = code_magnitude(amag1_reg, ashift1_reg, agg_bits1_reg);
                if (agg_en) begin
                    acc2_next = (aneg1_reg ? -$signed({24'd0, amag_sat}) : $signed({24'd0, amag_sat})) <<< FRAC_BITS;
                end else begin
                    acc2_next = acc1_reg;
                end

                biased = {acc2_reg[31], acc2_reg} + {bias2_reg[31], bias2_reg};
                if (biased > 33'sh0_7FFF_FFFF) acc3_next = 32'sh7FFF_FFFF;
                else if (biased < -33'sh0_8000_0000) acc3_next = -32'sh8000_0000;
                else acc3_next = biased[31:0];
                if (relu_en && acc3_next[31]) acc3_next = 32'sd0;

                omag_sat = code_magnitude(omag4_reg, oshift4_reg, out_bits4_reg);
                if (out_en) begin
                    out5_next = oneg4_reg ? -$signed({24'd0, omag_sat}) : $signed({24'd0, omag_sat});
                end else begin
                    out5_next = acc4_reg;
                end
            end

            always @(posedge clk) begin
                if (en) begin
                    // stage 1
                    aneg1_reg <= agg_prod[63];
                    amag1_reg <= agg_prod[63] ? (~agg_prod + 64'd1) : agg_prod;
                    ashift1_reg <= s_agg_shift[o*6 +: 6];
                    acc1_reg <= psum_in;   // the accumulator when agg_en = 0
                    bias1_reg <= s_bias[o*32 +: 32];
                    omult1_reg <= s_out_mult[o*31 +: 31];
                    oshift1_reg <= s_out_shift[o*6 +: 6];
                    // stage 2
                    acc2_reg <= acc2_next;
                    bias2_reg <= bias1_reg;
                    omult2_reg <= omult1_reg;
                    oshift2_reg <= oshift1_reg;
                    // stage 3
                    acc3_reg <= acc3_next;
                    omult3_reg <= omult2_reg;
                    oshift3_reg <= oshift2_reg;
                    // stage 4
                    oneg4_reg <= out_prod[63];
                    omag4_reg <= out_prod[63] ? (~out_prod + 64'd1) : out_prod;
                    oshift4_reg <= oshift3_reg;
                    acc4_reg <= acc3_reg;
                    // stage 5
                    out5_reg <= out5_next;
                end
            end
            assign m_out[o*32 +: 32] = out5_reg;
        end
    endgenerate

endmodule

`resetall
