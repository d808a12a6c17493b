"""The GNN accelerator: a cycle-level model of a MEGA-style dataflow driven by quant/'s export
(`python -m hw.simulate`) and its Verilog in hw/rtl/, verified with cocotb against the same golden model.

Model files (one idea each): config (AcceleratorConfig, presets mega/hygcn/gcnax, TOML), dram (HBM channel with
banks/row buffers and a bus calendar), buffer (SRAM + LRU row cache), decoder / combination / aggregation /
condense (engine timing, from hw/timing.py where the RTL defines it), pipeline (tile pipelines with bounded
queues: input stalls, back-pressure), layout (bytes of dense / bitmap / Adaptive-Package features), scheduler
(maps layers onto the engines), workload (what is simulated), functional (bit-exact check against the golden
integer model), energy (cited constants), analytic (closed-form cross-checks), report / plots / simulate (CLI).
"""
