"""Heavy augmentation for a small road data set: one affine warp cuts a scaled, rotated, flipped crop, then
colour, blur, noise and JPEG artefacts imitate other cameras, light and video compression."""

from __future__ import annotations

import cv2
import numpy as np

from vision.training.road.data import Sample


def random_crop(
    sample: Sample,
    size: int,
    rng: np.random.Generator,
    scale_range: tuple[float, float] = (0.6, 1.6),
    road_bias: float = 0.5,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(image, road, valid) crops of ``size`` x ``size`` at the network's scale times a random zoom.

    With probability ``road_bias`` the crop is centred on a road pixel, so crops of sparse-road images still
    teach roads; otherwise anywhere. Pixels from outside the image get valid = 0.
    """
    h, w = sample.image.shape[:2]
    zoom = sample.scale * float(np.exp(rng.uniform(np.log(scale_range[0]), np.log(scale_range[1]))))
    ys, xs = np.nonzero(sample.road & sample.valid) if rng.random() < road_bias else ((), ())
    if len(xs):
        i = rng.integers(len(xs))
        cx, cy = float(xs[i]), float(ys[i])
    else:
        cx, cy = rng.uniform(0, w), rng.uniform(0, h)
    # Nadir imagery has no "up"; oblique views keep the horizon roughly level.
    angle = rng.uniform(0, 360) if sample.view == "nadir" else rng.uniform(-10, 10)
    m = cv2.getRotationMatrix2D((cx, cy), angle, zoom)
    m[:, 2] += np.array([size / 2 - cx, size / 2 - cy])
    if rng.random() < 0.5:  # horizontal flip, folded into the same warp
        m[0] = -m[0]
        m[0, 2] += size
    image = cv2.warpAffine(sample.image, m, (size, size), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REFLECT_101)
    road = cv2.warpAffine(sample.road, m, (size, size), flags=cv2.INTER_NEAREST, borderValue=0)
    valid = cv2.warpAffine(sample.valid, m, (size, size), flags=cv2.INTER_NEAREST, borderValue=0)
    return image, road, valid


def photometric(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random hue/saturation/brightness/contrast/gamma, then sometimes blur, noise, grey, JPEG."""
    hsv = cv2.cvtColor(image, cv2.COLOR_BGR2HSV).astype(np.float32)
    hsv[..., 0] = (hsv[..., 0] + rng.uniform(-8, 8)) % 180
    hsv[..., 1] *= rng.uniform(0.6, 1.4)
    hsv[..., 2] *= rng.uniform(0.7, 1.3)
    out: np.ndarray = cv2.cvtColor(np.clip(hsv, 0, 255).astype(np.uint8), cv2.COLOR_HSV2BGR).astype(np.float32)
    mean = out.mean()
    out = (out - mean) * rng.uniform(0.7, 1.3) + mean
    out = 255.0 * (np.clip(out, 0, 255) / 255.0) ** rng.uniform(0.7, 1.4)
    if rng.random() < 0.3:
        out = cv2.GaussianBlur(out, (0, 0), rng.uniform(0.5, 1.8))
    if rng.random() < 0.3:
        out = out + rng.normal(0, rng.uniform(2, 8), out.shape)
    out = np.clip(out, 0, 255).astype(np.uint8)
    if rng.random() < 0.1:
        out = cv2.cvtColor(cv2.cvtColor(out, cv2.COLOR_BGR2GRAY), cv2.COLOR_GRAY2BGR)
    if rng.random() < 0.3:
        ok, buf = cv2.imencode(".jpg", out, [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(25, 90))])
        decoded = cv2.imdecode(buf, cv2.IMREAD_COLOR) if ok else None
        out = decoded if decoded is not None else out
    return out


def batch(samples: list[Sample], weights: np.ndarray, n: int, size: int, rng: np.random.Generator):
    """n augmented crops: (images N,H,W,3 uint8, road N,H,W float32, valid N,H,W float32)."""
    idx = rng.choice(len(samples), size=n, p=weights)
    crops = [random_crop(samples[i], size, rng) for i in idx]
    images = np.stack([photometric(c[0], rng) for c in crops])
    return (
        images,
        np.stack([c[1] for c in crops]).astype(np.float32),
        np.stack([c[2] for c in crops]).astype(np.float32),
    )
