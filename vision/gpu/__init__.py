"""Torch (kornia) kernels for the stages that used to run only on the CPU through OpenCV: ego-motion registration
and the motion layer. They run on any torch device (CUDA, CPU) and take batches of frames and of streams; the
OpenCV modules (``vision.ego_motion``, ``vision.motion``) stay the CPU default. Select with
``ego_motion.backend`` (``vision/config.py``); see docs/gpu.md.
"""
