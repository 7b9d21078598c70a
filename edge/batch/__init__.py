"""Beyond one video: ``airpatrol batch`` over many flights (a local process pool or a Ray cluster), and the
accelerated paths of the pipeline (batched detection, a decode thread, the ONNX Runtime detector).

Kept import-light: ``vision.detection`` imports :mod:`edge.batch.runtime`, so nothing heavy is imported here.
"""
