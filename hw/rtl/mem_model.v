// Behavioural off-chip memory for simulation only (not synthesizable: $readmemh/$writememh, plusargs).
// 64-bit words, word addresses. Read bursts (AXI4-like AR/R, in order): a request accepted on the rising edge at
// cycle t is queued with ready time t + LATENCY; the head request's beats leave one every BEAT_INTERVAL cycles
// once its ready time has come (bandwidth = 8 bytes / BEAT_INTERVAL per cycle); up to QUEUE requests wait
// (ar_ready low when full). Writes: one beat per cycle (address + data, always ready, posted).
// Timing constants follow hw/dram.py's config: LATENCY = dram_latency_cycles; the 64-bit port (8 B/cycle) is
// narrower than dram_bandwidth_gbs / clock_ghz on every preset, so BEAT_INTERVAL = 1. Banks and open rows are not
// modelled (hw.timing.accel_top_* charges the same rule).
// Preload: +MEMFILE=<hex file> ($readmemh). Dump: on `dump`, +DUMPFILE=<file> gets words DUMP_LO..DUMP_HI
// (+DUMP_LO=, +DUMP_HI=, decimal) with $writememh.
`resetall
`timescale 1ns / 1ps
`default_nettype none

module mem_model #(
    // Address width (word address). Must be 4..30.
    parameter ADDR_BITS     = 20,
    // Words of storage. Must be 16..2^ADDR_BITS.
    parameter WORDS         = 1 << 20,
    // Cycles from an accepted read request to its first beat. Must be >= 1.
    parameter LATENCY       = 100,
    // Cycles between two read beats. Must be >= 1.
    parameter BEAT_INTERVAL = 1,
    // Queued read requests, as log2. Must be 1..8.
    parameter QUEUE_BITS    = 4
) (
    input  wire                 clk,
    input  wire                 rst,

    input  wire                 ar_valid,
    output wire                 ar_ready,
    input  wire [ADDR_BITS-1:0] ar_addr,
    input  wire [7:0]           ar_len,     // beats - 1

    output wire                 r_valid,
    input  wire                 r_ready,
    output wire [63:0]          r_data,
    output wire                 r_last,

    input  wire                 w_valid,
    output wire                 w_ready,
    input  wire [ADDR_BITS-1:0] w_addr,
    input  wire [63:0]          w_data,

    input  wire                 dump
);

    initial begin
        if (ADDR_BITS < 4 || ADDR_BITS > 30 || WORDS < 16 || WORDS > (1 << ADDR_BITS) || LATENCY < 1 ||
            BEAT_INTERVAL < 1 || QUEUE_BITS < 1 || QUEUE_BITS > 8) begin
            $error("Error: mem_model parameters out of range (instance %m)");
            $finish;
        end
    end

    localparam QUEUE = 1 << QUEUE_BITS;

    reg [63:0]          mem [0:WORDS-1];
    reg [ADDR_BITS-1:0] q_addr [0:QUEUE-1];
    reg [7:0]           q_len  [0:QUEUE-1];
    reg [63:0]          q_time [0:QUEUE-1];
    reg [QUEUE_BITS-1:0] head_reg, tail_reg;
    reg [QUEUE_BITS:0]  count_reg;
    reg [7:0]           beat_reg;
    reg [63:0]          now_reg, next_beat_reg;

    reg [8*1024-1:0]    memfile, dumpfile;
    integer             dump_lo, dump_hi;

    initial begin
        dump_lo = 0;
        dump_hi = WORDS - 1;
        if ($value$plusargs("MEMFILE=%s", memfile)) begin
            $readmemh(memfile, mem);
        end
        if (!$value$plusargs("DUMPFILE=%s", dumpfile)) begin
            dumpfile = "mem_dump.hex";
        end
        if ($value$plusargs("DUMP_LO=%d", dump_lo)) begin end
        if ($value$plusargs("DUMP_HI=%d", dump_hi)) begin end
    end

    wire [ADDR_BITS-1:0] rd_addr = q_addr[head_reg] + {{(ADDR_BITS-8){1'b0}}, beat_reg};
    assign ar_ready = (count_reg != QUEUE[QUEUE_BITS:0]);
    assign r_valid  = (count_reg != 0) && (now_reg >= q_time[head_reg]) && (now_reg >= next_beat_reg);
    assign r_data   = mem[rd_addr];
    assign r_last   = (beat_reg == q_len[head_reg]);
    assign w_ready  = 1'b1;

    wire ar_fire = ar_valid && ar_ready;
    wire r_fire  = r_valid && r_ready;

    always @(posedge clk) begin
        now_reg <= now_reg + 64'd1;
        if (w_valid) begin
            mem[w_addr] <= w_data;
        end
        if (ar_fire) begin
            q_addr[tail_reg] <= ar_addr;
            q_len[tail_reg] <= ar_len;
            q_time[tail_reg] <= now_reg + LATENCY;
            tail_reg <= tail_reg + 1'b1;
        end
        if (r_fire) begin
            next_beat_reg <= now_reg + BEAT_INTERVAL;
            if (r_last) begin
                beat_reg <= 8'd0;
                head_reg <= head_reg + 1'b1;
            end else begin
                beat_reg <= beat_reg + 8'd1;
            end
        end
        count_reg <= count_reg + {{QUEUE_BITS{1'b0}}, ar_fire} - {{QUEUE_BITS{1'b0}}, r_fire && r_last};
        if (dump) begin
            $writememh(dumpfile, mem, dump_lo, dump_hi);
        end
        if (rst) begin
            now_reg <= 64'd0;
            next_beat_reg <= 64'd0;
            head_reg <= {QUEUE_BITS{1'b0}};
            tail_reg <= {QUEUE_BITS{1'b0}};
            count_reg <= {(QUEUE_BITS+1){1'b0}};
            beat_reg <= 8'd0;
        end
    end

endmodule

`resetall
