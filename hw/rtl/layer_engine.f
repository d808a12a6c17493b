bse.v
cpe.v
requant.v
aggregation_unit.v
ap_decoder.v
layer_engine.v
output_stage.v
