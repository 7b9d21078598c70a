"""The run page names the detector weights by file name and SHA-256, never by the file the detector loaded (for the
ONNX runtime an export in the cache folder): a real `process` run with the ONNX runtime, imported, then viewed."""

from __future__ import annotations

import hashlib

from edge.runner import process_video
from tests.conftest import make_test_clip
from tracking.config import PipelineConfig
from vision.yolo_weights import DEFAULT_DETECTOR_WEIGHTS, detector_weights_label, weights_label


def test_weights_label_is_the_name_and_the_start_of_the_sha256(tmp_path):
    w = tmp_path / "my weights.pt"
    w.write_bytes(b"not really weights, but a file with content")
    assert weights_label(w) == f"my weights.pt sha256:{hashlib.sha256(w.read_bytes()).hexdigest()[:16]}"

    class StandIn:  # a benchmark's detector without a file
        weights = "bench:none"

    assert detector_weights_label(StandIn()) == "bench:none"


def test_run_page_shows_weights_by_name_and_hash(tmp_path, db_url, client_for):
    from db.run_import import import_run_dir

    clip = make_test_clip(tmp_path / "clip.mp4", frames=3)
    cfg = PipelineConfig(device="cpu", road={"enabled": False}, detector={"runtime": "onnx", "tiling": "off"})
    out = process_video(clip, tmp_path / "run", cfg, progress=False, write_video=False)
    expected = weights_label(DEFAULT_DETECTOR_WEIGHTS)
    assert expected.startswith("airpatrol_yolov8n.pt sha256:")
    assert out.summary["weights"] == expected  # the shipped .pt, though an ONNX export ran
    assert out.summary["detector_runtime"] == {"runtime": "onnx", "pixels_per_onnx_pixel": 1.0}

    imported = import_run_dir(out.out_dir, db_url)
    page = client_for("viewer").get(f"/dashboard/runs/{imported.run_id}").text
    assert expected in page and ".onnx" not in page and str(DEFAULT_DETECTOR_WEIGHTS.parent) not in page
