bse.v
cpe.v
