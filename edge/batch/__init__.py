"""Beyond one video: ``airpatrol batch`` over many flights (a local process pool or a Ray cluster), and the
accelerated paths of the pipeline (batched detection, a decode thread, the ONNX Runtime detector).

The detector's runtime selection (torch / ONNX Runtime) lives in :mod:`vision.runtime`; :mod:`edge.batch.runtime`
re-exports it. Kept import-light: nothing heavy is imported here.
"""
