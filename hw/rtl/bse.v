// Bit-serial engine (BSE): one lane of the combination PE. Multiplies a bit-serial activation by a parallel
// 4-bit signed weight and accumulates: per cycle acc += bit * (w << shift), except on the activation's MSB (its
// two's-complement sign bit), where the term is subtracted. Streaming the b bits of a b-bit code LSB first
// (shift = 0..b-1, neg on shift = b-1) adds exactly code * w. "clear" restarts the accumulation at this bit.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module bse #(
    // Width of the signed weight (MEGA: 4). Must be 2..8.
    parameter W_BITS   = 4,
    // Width of the signed accumulator; the instantiating PE checks that it cannot overflow. Must be 8..32.
    parameter ACC_BITS = 32
) (
    input  wire                 clk,
    input  wire                 rst,

    input  wire                 en,       // process one activation bit this cycle
    input  wire                 clear,    // start a new dot product with this bit
    input  wire                 bit_in,   // activation bit
    input  wire                 neg,      // this bit is the activation's sign bit (weight -2^shift)
    input  wire [2:0]           shift,    // bit position 0..7
    input  wire [W_BITS-1:0]    w,        // signed weight

    output wire [ACC_BITS-1:0]  acc,      // signed accumulator (registered)
    output reg  [ACC_BITS-1:0]  acc_next  // value acc takes at the next edge (for a zero-latency hand-off)
);

    initial begin
        if (W_BITS < 2 || W_BITS > 8) begin
            $error("Error: W_BITS=%0d must lie in 2..8 (instance %m)", W_BITS);
            $finish;
        end
        if (ACC_BITS < 8 || ACC_BITS > 32) begin
            $error("Error: ACC_BITS=%0d must lie in 8..32 (instance %m)", ACC_BITS);
            $finish;
        end
    end

    reg [ACC_BITS-1:0] acc_reg;
    reg [ACC_BITS-1:0] term;
    assign acc = acc_reg;

    always @* begin
        term = {{(ACC_BITS-W_BITS){w[W_BITS-1]}}, w} << shift;
        if (neg) begin
            term = ~term + 1'b1;
        end
        if (!bit_in) begin
            term = {ACC_BITS{1'b0}};
        end
        acc_next = acc_reg;
        if (en) begin
            acc_next = (clear ? {ACC_BITS{1'b0}} : acc_reg) + term;
        end
    end

    always @(posedge clk) begin
        acc_reg <= acc_next;
        if (rst) begin
            acc_reg <= {ACC_BITS{1'b0}};
        end
    end

endmodule

`resetall
