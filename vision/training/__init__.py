"""Development tools, not the runtime path: training the shipped detector (``detector``) and road U-Net (``road``),
with their data set builders, augmentation and benchmarks.

Nothing that processes video (``vision.detection``, ``vision.road.segmenter``, ``tracking.pipeline``, the edge service)
imports this package; ``tests/test_runtime_imports.py`` checks it. The scene generator, the other development
tool, is ``vision.synth``. The weights these tools write are loaded by the runtime from ``vision/weights/``.
"""
