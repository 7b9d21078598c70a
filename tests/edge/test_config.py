import pytest

from edge.config import ConfigError, load_settings


def test_precedence_defaults_file_env_flags(tmp_path, monkeypatch):
    f = tmp_path / "c.yaml"
    f.write_text("pipeline:\n  detector:\n    conf: 0.2\n    imgsz: 960\n  speed:\n    window_s: 2.0\nport: 9000\n")
    s = load_settings(f)
    assert s.pipeline.detector.conf == 0.2 and s.pipeline.detector.imgsz == 960 and s.port == 9000
    assert s.pipeline.detector.iou == 0.5  # untouched default
    monkeypatch.setenv("AIRPATROL_PIPELINE__DETECTOR__CONF", "0.3")
    s = load_settings(f)
    assert s.pipeline.detector.conf == 0.3 and s.pipeline.detector.imgsz == 960  # env beats file
    s = load_settings(f, {"pipeline": {"detector": {"conf": 0.4}}})
    assert s.pipeline.detector.conf == 0.4 and s.pipeline.speed.window_s == 2.0  # flags beat env


def test_bad_config_files_are_one_line_errors(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("pipeline:\n  detector:\n    conf: 7\n")
    with pytest.raises(ConfigError, match=r"c.yaml: invalid setting pipeline.detector.conf"):
        load_settings(f)
    f.write_text("pipeline: [unclosed\n")
    with pytest.raises(ConfigError, match="cannot parse"):
        load_settings(f)
    with pytest.raises(ConfigError, match="not found"):
        load_settings(tmp_path / "nope.yaml")
    f.write_text("pipline: {}\n")
    with pytest.raises(ConfigError, match="pipline"):
        load_settings(f)


def test_a_setting_no_stage_knows_is_an_error_at_any_depth(tmp_path, monkeypatch):
    # a misspelt or outdated key deep in the pipeline would otherwise leave the default in place unnoticed
    f = tmp_path / "c.yaml"
    f.write_text("pipeline:\n  detector:\n    any_heading:\n      min_axis_angle: 30\n")
    with pytest.raises(
        ConfigError, match=r"c.yaml: invalid setting pipeline.detector.any_heading.min_axis_angle: Extra"
    ):
        load_settings(f)
    f.write_text("pipeline:\n  linking:\n    steady_box: 2\n")
    with pytest.raises(ConfigError, match=r"pipeline.linking.steady_box"):
        load_settings(f)
    f.write_text("service:\n  queue_frame: 2\n")
    with pytest.raises(ConfigError, match=r"service.queue_frame"):
        load_settings(f)
    monkeypatch.setenv("AIRPATROL_PIPELINE__TRACKER__TRACK_BUFER", "60")
    with pytest.raises(ConfigError, match=r"pipeline.tracker.track_bufer"):
        load_settings()
