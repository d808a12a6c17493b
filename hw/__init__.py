"""The GNN accelerator: a cycle-level model of a MEGA-style dataflow driven by quant/'s export
(`python -m hw.simulate`) and its Verilog in hw/rtl/, verified with cocotb against the same golden model."""
