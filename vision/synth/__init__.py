"""Synthetic drone traffic clips with exact ground truth (boxes, ids, speeds, camera, road mask): the measuring
stick for AirPatrol's detector, tracker and speed estimates. See docs/synth.md."""

from vision.synth.scene import SCENE_TYPES, SceneConfig, SceneResult, SynthConfigError, load_config, sample_config

__all__ = [
    "SCENE_TYPES",
    "SceneConfig",
    "SceneResult",
    "SynthConfigError",
    "build_scene",
    "generate_scene",
    "load_config",
    "sample_config",
]


def __getattr__(name: str):
    # The renderer pulls in scipy and the asset loaders: import it on first use, so `airpatrol --help` stays fast.
    if name in ("build_scene", "generate_scene"):
        from vision.synth import generator

        return getattr(generator, name)
    raise AttributeError(f"module 'vision.synth' has no attribute {name!r}")
