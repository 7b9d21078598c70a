"""Real-footage benchmark: plain Ultralytics tracking vs ``airpatrol process --baseline`` vs the dual layer, scored
per sequence on real drone video with ground truth, thresholds chosen leave-one-sequence-out.

``python -m bench.real`` (see ``__main__``); figures go to ``docs/real_accuracy.json`` and ``docs/accuracy.md``.
"""
