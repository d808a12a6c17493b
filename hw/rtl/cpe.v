// Combination PE (C-PE): LANES bit-serial engines computing one node row of X*W^T in row-product order.
//
// Each input beat is one (non-zero) activation code x[i,k] of node i with its node bitwidth b and the LANES
// weights W[o,k] of input feature k (one per output channel o). The code is streamed LSB first over b cycles and
// all lanes share that bit stream (bse.v). s_last marks the node's last value; one cycle after its last bit the
// row acc[o] = sum_k x[i,k] W[o,k] appears on m_acc, equal to quant.archs.gcn.integer's sat32(x @ w^T) (exact: the
// accumulator cannot overflow for rows of up to MAX_ROW_VALUES values, checked at elaboration).
// Timing (hw/timing.py: cpe_row_cycles / cpe_stream_cycles): load 1 cycle, b cycles per value, 1 cycle out;
// the next value loads during the current value's last bit, so back-to-back values have no bubble.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module cpe #(
    // Output channels (bit-serial engines) in parallel. Must be >= 1.
    parameter LANES          = 8,
    // Signed weight width (MEGA: 4). Must be 2..8.
    parameter W_BITS         = 4,
    // Signed accumulator width. Must be 8..32 and hold MAX_ROW_VALUES * 127 * 2^(W_BITS-1).
    parameter ACC_BITS       = 32,
    // Largest number of values (input features) of one row, for the overflow check only. Must be >= 1.
    parameter MAX_ROW_VALUES = 4096,
    // Width of the row tag carried from the last value to the output (e.g. the node ID). Must be >= 1.
    parameter TAG_BITS       = 1
) (
    input  wire                       clk,
    input  wire                       rst,

    /* activation values with their weight column */
    input  wire                       s_valid,
    output wire                       s_ready,
    input  wire [7:0]                 s_code,   // signed code, low s_bits bits used (two's complement)
    input  wire [3:0]                 s_bits,   // node bitwidth b, 1..8
    input  wire [LANES*W_BITS-1:0]    s_w,      // lane o = bits [o*W_BITS +: W_BITS], signed
    input  wire                       s_last,   // last value of the node row
    input  wire [TAG_BITS-1:0]        s_tag,    // row tag, taken from the row's last value

    /* finished rows */
    output wire                       m_valid,
    input  wire                       m_ready,
    output wire [LANES*ACC_BITS-1:0]  m_acc,    // lane o = bits [o*ACC_BITS +: ACC_BITS], signed
    output wire [TAG_BITS-1:0]        m_tag
);

    initial begin
        if (LANES < 1) begin
            $error("Error: LANES=%0d must be >= 1 (instance %m)", LANES);
            $finish;
        end
        if (MAX_ROW_VALUES < 1 || ACC_BITS < 8 || ACC_BITS > 32 ||
            $clog2(MAX_ROW_VALUES) + 7 + W_BITS - 1 > ACC_BITS - 1) begin
            $error("Error: ACC_BITS=%0d cannot hold %0d values of 127 x 2^%0d; widen ACC_BITS or lower MAX_ROW_VALUES (instance %m)",
                   ACC_BITS, MAX_ROW_VALUES, W_BITS - 1);
            $finish;
        end
    end

    reg                       busy_reg, busy_next;
    reg [7:0]                 code_reg, code_next;
    reg [3:0]                 bits_reg, bits_next;
    reg [LANES*W_BITS-1:0]    w_reg, w_next;
    reg                       last_reg, last_next;
    reg [2:0]                 t_reg, t_next;          // bit being processed
    reg                       clear_reg, clear_next;  // the next processed bit starts a new row
    reg                       out_valid_reg, out_valid_next;
    reg [LANES*ACC_BITS-1:0]  out_reg, out_next;
    reg [TAG_BITS-1:0]        tag_reg, tag_next;
    reg [TAG_BITS-1:0]        out_tag_reg, out_tag_next;

    wire final_bit = busy_reg && ({1'b0, t_reg} == bits_reg - 4'd1);
    wire stall = final_bit && last_reg && out_valid_reg && !m_ready;
    wire step = busy_reg && !stall;
    assign s_ready = !busy_reg || (final_bit && !stall);
    assign m_valid = out_valid_reg;
    assign m_acc = out_reg;
    assign m_tag = out_tag_reg;

    wire [LANES*ACC_BITS-1:0] lane_acc_next;

    genvar o;
    generate
        for (o = 0; o < LANES; o = o + 1) begin : lane
            bse #(.W_BITS(W_BITS), .ACC_BITS(ACC_BITS)) u_bse (
                .clk(clk), .rst(rst),
                .en(step), .clear(clear_reg), .bit_in(code_reg[t_reg]), .neg(final_bit), .shift(t_reg),
                .w(w_reg[o*W_BITS +: W_BITS]),
                /* verilator lint_off PINCONNECTEMPTY */
                .acc(),
                /* verilator lint_on PINCONNECTEMPTY */
                .acc_next(lane_acc_next[o*ACC_BITS +: ACC_BITS])
            );
        end
    endgenerate

    always @* begin
        busy_next = busy_reg;
        code_next = code_reg;
        bits_next = bits_reg;
        w_next = w_reg;
        last_next = last_reg;
        t_next = t_reg;
        clear_next = clear_reg;
        out_valid_next = out_valid_reg && !m_ready;
        out_next = out_reg;
        tag_next = tag_reg;
        out_tag_next = out_tag_reg;

        if (step) begin
            t_next = t_reg + 3'd1;
            clear_next = 1'b0;
            if (final_bit) begin
                busy_next = 1'b0;
                if (last_reg) begin
                    out_valid_next = 1'b1;
                    out_next = lane_acc_next;
                    out_tag_next = tag_reg;
                    clear_next = 1'b1;
                end
            end
        end
        if (s_valid && s_ready) begin
            busy_next = 1'b1;
            code_next = s_code;
            bits_next = s_bits;
            w_next = s_w;
            last_next = s_last;
            tag_next = s_tag;
            t_next = 3'd0;
        end
    end

    always @(posedge clk) begin
        busy_reg <= busy_next;
        code_reg <= code_next;
        bits_reg <= bits_next;
        w_reg <= w_next;
        last_reg <= last_next;
        t_reg <= t_next;
        clear_reg <= clear_next;
        out_valid_reg <= out_valid_next;
        out_reg <= out_next;
        tag_reg <= tag_next;
        out_tag_reg <= out_tag_next;
        if (rst) begin
            busy_reg <= 1'b0;
            clear_reg <= 1'b1;
            out_valid_reg <= 1'b0;
        end
    end

endmodule

`resetall
