"""Accuracy report of AirPatrol: the dual-layer pipeline against plain YOLOv8 + ByteTrack on a fixed, seeded
synthetic suite (scenes x altitudes x resolutions x camera jitter) and the real UAVDT M1303 sequence.

Run: ``python3 -m bench.accuracy [--quick]``; writes docs/accuracy_synthetic.md, docs/accuracy_synthetic.json, docs/img/accuracy_*.png.
Modules: ``suite`` (what is run), ``execute`` (render, run, score), ``report`` (aggregates, targets, Markdown/JSON),
``plots`` (PNG figures), ``run`` (command line).
"""
