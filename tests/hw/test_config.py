from dataclasses import replace

import pytest

from hw.config import SOURCES, AcceleratorConfig, ConfigError, ablation_variants, load_config, mega, preset


def test_mega_defaults_match_transcription():
    c = mega()
    assert (c.clock_ghz, c.dram_bandwidth_gbs, c.dram_access_bytes) == (1.0, 256.0, 128)
    assert c.num_bse == 4 * 8 * 32 and c.weight_bits == 4 and c.num_agg_units == 256 and c.psum_bits == 16
    assert [v // 1024 for v in c.buffer_bytes.values()] == [64, 24, 48, 96, 128, 32]
    assert (c.num_eid_fifos, c.eid_fifo_depth) == (16, 8)
    assert c.bytes_per_cycle == 256.0
    assert "secondary" in SOURCES["num_bse_per_cpe"] and "assumption" in SOURCES["dram_latency_cycles"]


@pytest.mark.parametrize("kw, msg", [({"dram_bandwidth_gbs": 0.0}, "dram_bandwidth_gbs"),
                                     ({"num_agg_units": 0}, "num_agg_units"),
                                     ({"feature_format": "csr"}, "valid"),
                                     ({"dram_access_bytes": 96}, "power of two"),
                                     ({"agg_lanes": 24}, "multiple")])
def test_invalid_configs_rejected(kw, msg):
    with pytest.raises(ValueError, match=msg):
        AcceleratorConfig(**kw)


def test_buffer_smaller_than_package_rejected(tmp_path):
    f = tmp_path / "tiny.toml"
    f.write_text("[accelerator]\nsparse_buffer_kib = 0\n")
    with pytest.raises(ValueError, match="sparse_buffer_kib"):
        load_config(f)


def test_toml_overrides_and_unknown_keys(tmp_path):
    f = tmp_path / "a.toml"
    f.write_text("base = 'gcnax'\ndram_bandwidth_gbs = 128.0\n")
    c = load_config(f)
    assert c.name == "gcnax" and c.dram_bandwidth_gbs == 128.0 and "user file" in c.sources["dram_bandwidth_gbs"]
    f.write_text("dram_bandwith = 1\n")
    with pytest.raises(ValueError, match="unknown accelerator keys"):
        load_config(f)
    with pytest.raises(ValueError, match="valid"):
        preset("awb-gcn")


def test_presets_and_ablation_are_valid_and_distinct():
    v = ablation_variants()
    assert list(v) == ["fp32", "degree_aware_bitmap", "adaptive_package", "condense_edge"]
    assert v["condense_edge"] == replace(mega(), name="condense_edge")
    assert preset("hygcn").order == "aggregation_first" and preset("gcnax").source_reads == "src_tiles"


def test_shipped_example_config_loads():
    from pathlib import Path

    import hw

    c = load_config(Path(hw.__file__).parent / "configs" / "mega_64B_access.toml")
    assert (c.name, c.dram_access_bytes, c.bytes_per_cycle) == ("mega", 64, 128.0)
    r = load_config(Path(hw.__file__).parent / "configs" / "mega_rtl_choices.toml")
    assert (r.requant_constants, r.edge_bytes, r.engine_buffers, r.dram_row_miss_cycles) == (True, 8, 1, 0)
    assert r.num_bse == mega().num_bse  # only the four choices move


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize("text, match", [
    ("[accelerator\nclock_ghz = 1.0\n", r"malformed TOML: .*\(at line 1, column \d+\)"),
    ("clock_ghz = \n", r"malformed TOML: .*\(at line 1, column \d+\)"),
    ("[accelerator]\nnum_agg_unit = 128\n", r"unknown accelerator keys \['num_agg_unit'\]"),
    ("[accelerator]\nnum_agg_units = '256'\n", "num_agg_units = '256' must be an int, not str"),
    ("[accelerator]\nnum_agg_units = 256.0\n", "num_agg_units = 256.0 must be an int, not float"),
    ("[accelerator]\nnum_agg_units = true\n", "num_agg_units = True must be an int, not bool"),
    ("[accelerator]\nclock_ghz = 'fast'\n", "clock_ghz = 'fast' must be a finite number"),
    ("[accelerator]\nclock_ghz = nan\n", "clock_ghz = nan must be a finite number"),
    ("[accelerator]\ncondense_edge = 1\n", "condense_edge = 1 must be a bool, not int"),
    ("[accelerator]\norder = 2\n", "order = 2 must be a str, not int"),
    ("[accelerator]\nnum_decoders = 0\n", "num_decoders=0 must be > 0"),
    ("[accelerator]\ninput_buffer_kib = -4\n", "input_buffer_kib=-4 must be > 0"),
    ("[accelerator]\nbase = 'awb-gcn'\n", "base = 'awb-gcn' is not a preset"),
    ("accelerator = 3\n", "accelerator must be a table"),
    ("clock_ghz = 2.0\n[accelerator]\nnum_decoders = 8\n", r"keys \['clock_ghz'\] lie outside \[accelerator\]"),
])
def test_bad_config_file_names_file_and_field(tmp_path, text, match):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=match) as e:
        load_config(f)
    assert str(e.value).startswith(f"{f}: ") and "\n" not in str(e.value)


def test_unreadable_config_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read accelerator config .*absent.toml"):
        load_config(tmp_path / "absent.toml")


def test_integer_float_is_accepted_as_float(tmp_path):
    f = tmp_path / "ok.toml"
    f.write_text("dram_bandwidth_gbs = 128\n")
    c = load_config(f)
    assert c.dram_bandwidth_gbs == 128.0 and isinstance(c.dram_bandwidth_gbs, float)
