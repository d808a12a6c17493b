// Adaptive-Package decoder: 64/128/192-bit packages + bitmap + boundary records -> (node, feature, code) beats.
//
// Implements the layout of quant/formats/adaptive_package.py exactly and emits the beat sequence of its decode_beats():
// package by package, value by value; the node pointer starts at the package's first_node / first_value (the
// boundary record) and walks over nodes of the bitmap, the feature of each value being the next set bit of the
// node's bitmap row.
//   header: mode = bits[1:0] (0/1/2 = 64/128/192 bits, 3 illegal), bitwidth b = bits[4:2] + 1;
//   value j at package bits [5 + j*b, 5 + (j+1)*b), b-bit two's complement; words are LSB first.
// Errors (sticky, err_code; the unit then refuses all input and only rst recovers it, so it never hangs):
//   1 = illegal mode 0b11, 2 = num_values*b exceeds the package capacity, 3 = values beyond the last bitmap node.
// Timing (hw/timing.py: decoder_package_cycles): one word per cycle (L words), then one beat per cycle; every
// all-zero bitmap row walked over costs one cycle. The bitmap is written through bm_* before decoding.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module ap_decoder #(
    // Bitmap rows (nodes of the tile). Must be >= 2 and <= 2^NODE_BITS.
    parameter MAX_NODES    = 64,
    // Width of node IDs. Must be 1..16.
    parameter NODE_BITS    = 6,
    // Bitmap row width = features of the tile. Must be >= 2 and <= 2^FEAT_BITS.
    parameter MAX_FEATURES = 16,
    // Width of feature indices and of first_value. Must be 1..16.
    parameter FEAT_BITS    = 4
) (
    input  wire                     clk,
    input  wire                     rst,

    /* bitmap write port (row i: bit f = 1 iff feature f of node i is non-zero) */
    input  wire                     bm_we,
    input  wire [NODE_BITS-1:0]     bm_addr,
    input  wire [MAX_FEATURES-1:0]  bm_row,
    input  wire [NODE_BITS:0]       num_nodes,     // nodes in use, <= MAX_NODES

    /* boundary records, one per package */
    input  wire                     s_pkg_valid,
    output wire                     s_pkg_ready,
    input  wire [NODE_BITS-1:0]     s_pkg_first_node,
    input  wire [FEAT_BITS-1:0]     s_pkg_first_value,
    input  wire [7:0]               s_pkg_num_values,

    /* package words (64-bit, LSB first) */
    input  wire                     s_word_valid,
    output wire                     s_word_ready,
    input  wire [63:0]              s_word,

    /* decoded beats */
    output wire                     m_valid,
    input  wire                     m_ready,
    output wire [NODE_BITS-1:0]     m_node,
    output wire [FEAT_BITS-1:0]     m_feat,
    output wire [7:0]               m_code,        // signed, sign-extended from b bits
    output wire [3:0]               m_bits,        // bitwidth b of the package (1..8)
    output wire                     m_node_last,   // this is the node's last non-zero

    /* status */
    output wire                     err,
    output wire [1:0]               err_code
);

    initial begin
        if (MAX_NODES < 2 || NODE_BITS < 1 || NODE_BITS > 16 || MAX_NODES > (1 << NODE_BITS)) begin
            $error("Error: MAX_NODES=%0d must lie in 2..2^NODE_BITS (NODE_BITS=%0d in 1..16) (instance %m)",
                   MAX_NODES, NODE_BITS);
            $finish;
        end
        if (MAX_FEATURES < 2 || FEAT_BITS < 1 || FEAT_BITS > 16 || MAX_FEATURES > (1 << FEAT_BITS)) begin
            $error("Error: MAX_FEATURES=%0d must lie in 2..2^FEAT_BITS (FEAT_BITS=%0d in 1..16) (instance %m)",
                   MAX_FEATURES, FEAT_BITS);
            $finish;
        end
    end

    localparam [1:0] S_IDLE = 2'd0, S_LOAD = 2'd1, S_EMIT = 2'd2, S_ERR = 2'd3;

    reg [MAX_FEATURES-1:0] bm [0:MAX_NODES-1];

    reg [1:0]               state_reg, state_next;
    reg [1:0]               err_code_reg, err_code_next;
    reg [191:0]             buf_reg, buf_next;          // package bits
    reg [1:0]               widx_reg, widx_next;        // next word slot while loading
    reg [1:0]               nwords_reg, nwords_next;    // words of this package - 1
    reg [3:0]               bits_reg, bits_next;        // b
    reg [7:0]               pos_reg, pos_next;          // bit position of the next value
    reg [7:0]               count_reg, count_next;      // values left
    reg [NODE_BITS:0]       node_reg, node_next;
    reg [MAX_FEATURES-1:0]  mask_reg, mask_next;        // features of node_reg still to emit
    reg                     mask_upd;                   // mask_next differs from mask_reg
    // kept with mask_reg (computed when it is loaded, not every cycle): whether it has one set bit at most, whether
    // it is empty (and, below, its lowest set bit's index)
    reg                     last_reg, zero_reg;

    assign s_pkg_ready  = (state_reg == S_IDLE) && s_word_valid;
    assign s_word_ready = ((state_reg == S_IDLE) && s_pkg_valid) || (state_reg == S_LOAD);
    assign err = (state_reg == S_ERR);
    assign err_code = err_code_reg;

    // current value and its feature
    /* verilator lint_off UNUSEDSIGNAL */
    wire [191:0] shifted = buf_reg >> pos_reg;         // only the low 8 bits are a value
    /* verilator lint_on UNUSEDSIGNAL */
    wire [7:0]   vmask = (8'd1 << bits_reg) - 8'd1;     // bits_reg = 8 wraps to 0 - 1 = 0xFF
    wire [7:0]   raw = shifted[7:0] & vmask;
    wire [2:0]   msb_idx = bits_reg[2:0] - 3'd1;         // b - 1 (b = 8 -> 7)
    wire         vneg = raw[msb_idx];
    // feature of the current value = index of mask_reg's lowest set bit (0 when empty), found when mask_reg is
    // loaded (mask_upd) and kept in feat_reg: the first non-zero 64-bit word, then a 6-step search inside it. A
    // priority chain over MAX_FEATURES bits evaluated every cycle cost a simulator that many steps per cycle.
    localparam [MAX_FEATURES-1:0] ONE = {{(MAX_FEATURES-1){1'b0}}, 1'b1};
    localparam NWORDS = (MAX_FEATURES + 63) / 64;
    reg [FEAT_BITS-1:0] feat_reg;

    function [FEAT_BITS-1:0] lowest_index;
        input [MAX_FEATURES-1:0] mask;
        reg [NWORDS*64-1:0] padded;
        reg [63:0]          word;
        reg [31:0]          idx;
        reg                 found;
        integer             w;
        begin
            padded = {(NWORDS*64){1'b0}};
            padded[MAX_FEATURES-1:0] = mask;
            word = 64'd0;
            idx = 32'd0;
            found = 1'b0;
            for (w = 0; w < NWORDS; w = w + 1) begin
                if (!found && padded[w*64 +: 64] != 64'd0) begin
                    found = 1'b1;
                    word = padded[w*64 +: 64];
                    idx = w * 64;
                end
            end
            if (word[31:0] == 32'd0) begin idx = idx + 32'd32; word = word >> 32; end
            if (word[15:0] == 16'd0) begin idx = idx + 32'd16; word = word >> 16; end
            if (word[7:0] == 8'd0)   begin idx = idx + 32'd8;  word = word >> 8;  end
            if (word[3:0] == 4'd0)   begin idx = idx + 32'd4;  word = word >> 4;  end
            if (word[1:0] == 2'd0)   begin idx = idx + 32'd2;  word = word >> 2;  end
            if (word[0] == 1'b0)     begin idx = idx + 32'd1;                     end
            lowest_index = found ? idx[FEAT_BITS-1:0] : {FEAT_BITS{1'b0}};
        end
    endfunction

    wire emitting = (state_reg == S_EMIT) && !zero_reg;
    assign m_valid = emitting;
    assign m_node  = node_reg[NODE_BITS-1:0];
    assign m_feat  = feat_reg;
    assign m_code  = vneg ? (raw | ~vmask) : raw;
    assign m_bits  = bits_reg;
    assign m_node_last = last_reg;  // mask_reg without its lowest set bit is empty

    // header of the word at the input, the first node's row with the lowest first_value set bits cleared
    wire [1:0] in_mode = s_word[1:0];
    wire [3:0] in_bits = {1'b0, s_word[4:2]} + 4'd1;
    wire [11:0] in_need = {4'd0, s_pkg_num_values} * {8'd0, in_bits};
    wire [11:0] in_cap  = {4'd0, in_mode, 6'd0} + 12'd59;   // 64 * (mode + 1) - 5
    wire [MAX_FEATURES-1:0] first_row = bm[s_pkg_first_node[NODE_BITS-1:0]];

    // row without its lowest `skip` set bits: the package's first value is the first node's skip-th non-zero.
    // A function called only where a package is accepted, so a simulator runs its MAX_FEATURES-step loop once per
    // package instead of every cycle (a continuous assignment); synthesis builds the same logic either way.
    function [MAX_FEATURES-1:0] without_lowest_set_bits;
        input [MAX_FEATURES-1:0] row;
        input [FEAT_BITS-1:0]    skip;
        integer g;
        reg [FEAT_BITS:0] seen;
        begin
            seen = {(FEAT_BITS+1){1'b0}};
            without_lowest_set_bits = row;
            for (g = 0; g < MAX_FEATURES; g = g + 1) begin
                if (row[g]) begin
                    if (seen < {1'b0, skip}) begin
                        without_lowest_set_bits[g] = 1'b0;
                    end
                    seen = seen + 1'b1;
                end
            end
        end
    endfunction

    wire [NODE_BITS:0] node_inc = node_reg + 1'b1;

    always @* begin
        state_next = state_reg;
        err_code_next = err_code_reg;
        buf_next = buf_reg;
        widx_next = widx_reg;
        nwords_next = nwords_reg;
        bits_next = bits_reg;
        pos_next = pos_reg;
        count_next = count_reg;
        node_next = node_reg;
        mask_next = mask_reg;
        mask_upd = 1'b0;
        case (state_reg)
            S_IDLE: begin
                if (s_pkg_valid && s_word_valid) begin
                    buf_next = {128'd0, s_word};
                    widx_next = 2'd1;
                    nwords_next = in_mode;
                    bits_next = in_bits;
                    pos_next = 8'd5;
                    count_next = s_pkg_num_values;
                    node_next = {1'b0, s_pkg_first_node};
                    mask_next = without_lowest_set_bits(first_row, s_pkg_first_value);
                    mask_upd = 1'b1;
                    if (in_mode == 2'd3) begin
                        state_next = S_ERR;
                        err_code_next = 2'd1;
                    end else if (in_need > in_cap) begin
                        state_next = S_ERR;
                        err_code_next = 2'd2;
                    end else if (s_pkg_num_values != 8'd0 && {1'b0, s_pkg_first_node} >= num_nodes) begin
                        state_next = S_ERR;
                        err_code_next = 2'd3;
                    end else if (in_mode != 2'd0) begin
                        state_next = S_LOAD;
                    end else if (s_pkg_num_values != 8'd0) begin
                        state_next = S_EMIT;
                    end
                end
            end
            S_LOAD: begin
                if (s_word_valid) begin
                    if (widx_reg == 2'd1) begin
                        buf_next[127:64] = s_word;
                    end else begin
                        buf_next[191:128] = s_word;
                    end
                    widx_next = widx_reg + 2'd1;
                    if (widx_reg == nwords_reg) begin
                        state_next = (count_reg != 8'd0) ? S_EMIT : S_IDLE;
                    end
                end
            end
            S_EMIT: begin
                if (zero_reg) begin
                    // walk over a node without (remaining) non-zeros
                    if (node_reg >= num_nodes || node_inc >= num_nodes) begin
                        state_next = S_ERR;
                        err_code_next = 2'd3;
                    end else begin
                        node_next = node_inc;
                        mask_next = bm[node_inc[NODE_BITS-1:0]];
                        mask_upd = 1'b1;
                    end
                end else if (m_ready) begin
                    pos_next = pos_reg + {4'd0, bits_reg};
                    count_next = count_reg - 8'd1;
                    mask_next = mask_reg & (mask_reg - ONE);  // without its lowest set bit
                    mask_upd = 1'b1;
                    if (count_reg == 8'd1) begin
                        state_next = S_IDLE;
                    end else if (last_reg) begin
                        // the node is done: step to the next one in the same cycle
                        node_next = node_inc;
                        mask_next = (node_inc < num_nodes) ? bm[node_inc[NODE_BITS-1:0]]
                                                           : {MAX_FEATURES{1'b0}};
                    end
                end
            end
            default: begin
                state_next = S_ERR;
            end
        endcase
    end

    always @(posedge clk) begin
        if (bm_we) begin
            bm[bm_addr] <= bm_row;
        end
        state_reg <= state_next;
        err_code_reg <= err_code_next;
        buf_reg <= buf_next;
        widx_reg <= widx_next;
        nwords_reg <= nwords_next;
        bits_reg <= bits_next;
        pos_reg <= pos_next;
        count_reg <= count_next;
        node_reg <= node_next;
        if (mask_upd) begin
            mask_reg <= mask_next;
            feat_reg <= lowest_index(mask_next);
            last_reg <= (mask_next & (mask_next - ONE)) == {MAX_FEATURES{1'b0}};
            zero_reg <= (mask_next == {MAX_FEATURES{1'b0}});
        end
        if (rst) begin
            state_reg <= S_IDLE;
            err_code_reg <= 2'd0;
            mask_reg <= {MAX_FEATURES{1'b0}};
            feat_reg <= {FEAT_BITS{1'b0}};
            last_reg <= 1'b1;
            zero_reg <= 1'b1;
        end
    end

endmodule

`resetall
