"""Training set-up: the COCO -> vehicle head surgery, argument checks, and a tiny end-to-end smoke run (slow)."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from vision.training.detector.dataset import CLASS_NAMES
from vision.training.detector.training import (
    COCO_ROWS_FOR_OURS,
    TrainingError,
    interpolate_weights,
    make_init_checkpoint,
    train_detector,
    vehicle_head_from_coco,
)


def test_vehicle_head_reproduces_the_coco_vehicle_scores():
    from ultralytics.nn.tasks import DetectionModel

    torch.manual_seed(0)
    coco = DetectionModel("yolov8n.yaml", nc=80, verbose=False).eval()
    ours = vehicle_head_from_coco(coco).eval()
    x = torch.rand(1, 3, 128, 128)
    with torch.no_grad():
        ref, out = coco(x)[0], ours(x)[0]
    assert out.shape == (1, 4 + len(CLASS_NAMES), ref.shape[2])
    torch.testing.assert_close(out[:, :4], ref[:, :4])  # boxes untouched
    torch.testing.assert_close(out[:, 4:], ref[:, 4 + torch.tensor(COCO_ROWS_FOR_OURS)])
    assert ours.names == dict(enumerate(CLASS_NAMES)) and coco.model[-1].nc == 80  # type: ignore[index, union-attr]  # the source is not modified


def test_unknown_init_is_rejected(tmp_path):
    with pytest.raises(TrainingError, match="init must be"):
        make_init_checkpoint("imagenet", tmp_path)
    with pytest.raises(TrainingError, match="detection data not found"):
        train_detector(tmp_path / "w.pt", data_dir=tmp_path / "d", shared=tmp_path / "no_shared")
    with pytest.raises(TrainingError, match="wise_alpha"):
        train_detector(tmp_path / "w.pt", wise_alpha=1.5)


def test_weight_averaging_mixes_every_float_tensor(tmp_path):
    from ultralytics import YOLO
    from ultralytics.nn.tasks import DetectionModel

    from vision.training.detector.dequantize import save_checkpoint

    torch.manual_seed(0)
    start, tuned = (DetectionModel("yolov8n.yaml", nc=4, verbose=False) for _ in range(2))
    for module in tuned.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.fill_(1.0)
    tuned.names = dict(enumerate(CLASS_NAMES))
    save_checkpoint(start, tmp_path / "start.pt")
    save_checkpoint(tuned, tmp_path / "tuned.pt")
    out = interpolate_weights(tmp_path / "start.pt", tmp_path / "tuned.pt", 0.25, tmp_path / "mix.pt")
    mixed = YOLO(str(out)).model.float().state_dict()  # type: ignore[attr-defined]  # loaded: the nn.Module
    a, b = start.state_dict(), tuned.state_dict()
    for key in ("model.0.conv.weight", "model.22.cv3.0.2.bias", "model.4.m.0.cv1.bn.running_mean"):
        torch.testing.assert_close(mixed[key], (0.75 * a[key] + 0.25 * b[key]).half().float())
    assert YOLO(str(out)).names == dict(enumerate(CLASS_NAMES))


def _fake_shared(root):
    """The four source folders with a few small random frames, one scene of each in val."""
    rng = np.random.default_rng(0)
    stems = {
        "madison_drone_view": ["0_1", "Drone2_(1)", "Drone2_(2)"],
        "aerial_cars_drone": ["DJI_0762-00001", "DJI_0005-0001"],
        "au_air": ["frame_20190829091111_x_1", "frame_20190905091750_x_1"],
        "drift_obb": ["A_frame_0000"],
    }
    for name, names in stems.items():
        (root / "data" / "detection" / name / "images").mkdir(parents=True)
        (root / "data" / "detection" / name / "labels").mkdir()
        for stem in names:
            image = rng.integers(60, 200, (160, 160, 3), dtype=np.uint8)
            cv2.rectangle(image, (40, 60), (80, 80), (20, 20, 20), -1)  # a dark "car"
            cv2.imwrite(str(root / "data" / "detection" / name / "images" / f"{stem}.jpg"), image)
            line = "1 0.25 0.375 0.5 0.375 0.5 0.5 0.25 0.5\n" if name == "drift_obb" else "1 0.375 0.4375 0.25 0.125\n"
            (root / "data" / "detection" / name / "labels" / f"{stem}.txt").write_text(
                line if name != "madison_drone_view" else line.replace("1 ", "0 ", 1)
            )
    return root


@pytest.mark.slow
def test_one_epoch_smoke_run_writes_loadable_vehicle_weights(tmp_path):
    from ultralytics import YOLO

    shared = _fake_shared(tmp_path / "shared")
    out = train_detector(
        tmp_path / "w.pt",
        data_dir=tmp_path / "data",
        epochs=1,
        imgsz=64,
        batch=4,
        init="scratch",
        shared=shared,
        label_teacher=False,
    )
    assert out.exists() and out.stat().st_size < 10e6
    model = YOLO(str(out))
    assert model.names == dict(enumerate(CLASS_NAMES))
    model.predict(np.zeros((64, 64, 3), np.uint8), imgsz=64, verbose=False)


def test_training_records_name_data_relative_to_the_project_or_shared(tmp_path, monkeypatch):
    from pathlib import Path

    from vision.training.detector.training import portable_path

    monkeypatch.setenv("AIRPATROL_SHARED", str(tmp_path / "shared"))
    project = Path(__file__).resolve().parents[4]
    assert (
        portable_path(tmp_path / "shared" / "data" / "mot" / "seq" / "video.mp4") == "../shared/data/mot/seq/video.mp4"
    )
    assert portable_path(project / "vision" / "weights" / "x.pt") == "vision/weights/x.pt"
    assert portable_path(tmp_path / "elsewhere" / "start.pt") == "start.pt"  # identified by its SHA-256 instead


def test_shipped_training_records_hold_no_absolute_path():
    import json
    from pathlib import Path

    weights = Path(__file__).resolve().parents[4] / "vision" / "weights"
    records = sorted(weights.glob("*.training_set.json"))
    assert records, f"no training_set.json in {weights}"

    def strings(node):
        if isinstance(node, dict):
            for value in node.values():
                yield from strings(value)
        elif isinstance(node, list):
            for value in node:
                yield from strings(value)
        elif isinstance(node, str):
            yield node

    for record in records:
        for text in strings(json.loads(record.read_text())):
            assert not any(word.startswith(("/", "~")) for word in text.split()), f"{record.name}: {text!r}"


def test_across_scales_run_with_missing_inputs_is_one_line_naming_the_file(tmp_path, monkeypatch):
    import typer
    from typer.testing import CliRunner

    from vision.training.detector.cli import cli_train_detector

    app = typer.Typer()
    app.command()(cli_train_detector)
    shared = tmp_path / "shared"
    monkeypatch.setenv("AIRPATROL_SHARED", str(shared))
    args = ["--across-scales", "--start", str(tmp_path / "nope.pt"), "--out", str(tmp_path / "w.pt")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "shared training data not found" in result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    (shared / "data" / "detection").mkdir(parents=True)
    gt = shared / "data" / "mot" / "uavdt_M1003_night_dev" / "gt" / "M1003_gt_whole.txt"
    gt.parent.mkdir(parents=True)
    gt.write_text("")
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and f"{tmp_path / 'nope.pt'}: start weights not found" in result.output
    assert not (tmp_path / "w.pt").exists()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--turned", "-5", "--turned must be 0 or more, got -5"),
        ("--degrees", "200", "--degrees must be in [0, 180], got 200.0"),
    ],
)
def test_a_bad_across_scales_option_is_one_line_and_trains_nothing(tmp_path, option, value, message):
    import typer
    from typer.testing import CliRunner

    from vision.training.detector.cli import cli_train_detector

    app = typer.Typer()
    app.command()(cli_train_detector)
    args = ["--across-scales", option, value, "--start", str(tmp_path / "s.pt"), "--out", str(tmp_path / "w.pt")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and message in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "w.pt").exists()
