import csv
import json

import numpy as np

from edge.sinks import GeoJSONSink, MOTSink, TrackCSVSink, TrackSummarySink
from tracking.types import FrameResult, RunInfo, Sink, TrackState
from vision.types import Frame

INFO = RunInfo("clip.mp4", 100, 80, 10.0, 30, {}, "w.pt", "dual_layer", "cpu")


def _results(n=30):
    img = np.zeros((80, 100, 3), np.uint8)
    for k in range(n):
        tracks = [
            TrackState(
                1,
                np.array([k, 10, k + 10, 20], np.float32),
                0.9,
                0,
                True,
                36.0 + k * 0.1,
                1.0,
                None,
                (k * 1.0, 0.0),
                50.0 + k * 1e-5,
                36.0,
            )
        ]
        if k < 20:
            tracks.append(
                TrackState(2, np.array([50, 50, 60, 60], np.float32), 0.8, 1, False, 0.0, 0.5, None, (5, 5), 50.0, 36.0)
            )
        yield FrameResult(Frame(k, k / 10, img), tracks, None, 0.1, "telemetry")


def _run(sinks):
    for s in sinks:
        s.open(INFO)
    for r in _results():
        for s in sinks:
            s.write(r)
    for s in sinks:
        s.close({"source": "clip.mp4"})


def test_file_sinks(tmp_path):
    summary_sink = TrackSummarySink(tmp_path, gap_frames=5)
    sinks: list[Sink] = [MOTSink(tmp_path), TrackCSVSink(tmp_path), summary_sink, GeoJSONSink(tmp_path, gap_frames=5)]
    _run(sinks)
    mot = np.loadtxt(tmp_path / "tracks_mot.txt", delimiter=",")
    assert mot.shape == (50, 10) and mot[0, 0] == 1 and set(mot[:, 1]) == {1, 2}
    assert np.allclose(mot[mot[:, 1] == 2][0, 2:6], [50, 50, 10, 10])
    rows = list(csv.DictReader(open(tmp_path / "tracks.csv")))
    assert len(rows) == 50 and rows[0]["speed_kmh"] == "36.00" and rows[0]["lat"] == "50.0000000"
    summ = {r["track_id"]: r for r in csv.DictReader(open(tmp_path / "tracks_summary.csv"))}
    assert summ["1"]["moving"] == "True" and summ["2"]["moving"] == "False" and summ["2"]["class"] == "truck"
    assert float(summ["1"]["median_speed_kmh"]) == np.median([36 + k * 0.1 for k in range(30)]).round(2)
    assert summary_sink.counts == {"tracks": 2, "moving": 1, "stationary": 1, "vehicles": 2}
    gj = json.loads((tmp_path / "trajectories.geojson").read_text())
    feats = {f["properties"]["track_id"]: f for f in gj["features"]}
    assert gj["properties"]["coordinate_system"] == "wgs84"
    assert len(feats[1]["geometry"]["coordinates"]) == 30 and feats[1]["geometry"]["coordinates"][0] == [36.0, 50.0]


def test_ended_tracks_leave_memory(tmp_path):
    s = TrackSummarySink(tmp_path, gap_frames=3)
    s.open(INFO)
    for r in _results():
        s.write(r)
    assert set(s._acc.active) == {1}  # track 2 ended at frame 20 and was written out
    s.close({})
