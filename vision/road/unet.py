"""A small U-Net for road segmentation, sized for CPU inference on every few frames of drone video.

Roads are wide, smooth regions, so the network works at half the input resolution from its first layer (a strided
stem) and the logits are upsampled back: fine detail would cost CPU time without helping the mask.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.fusion import fuse_conv_bn_eval

from vision.road import DEFAULT_WEIGHTS  # noqa: F401  (re-exported: where the shipped weights live)

DEFAULT_LONG_SIDE = 512
# Input normalisation (BGR order, 0..255): a fixed, dataset-independent centring keeps the checkpoint self-contained.
_MEAN = 127.5
_STD = 64.0


class RoadWeightsError(ValueError):
    """The road U-Net weights file is missing or not a road U-Net checkpoint."""


def _block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
        nn.Conv2d(c_out, c_out, 3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(inplace=True),
    )


class RoadUNet(nn.Module):
    """U-Net with a stride-2 stem and four further scales; ``width`` channels at the first scale.

    Channels grow slowly (1, 2, 3, 4, 4 x ``width``): the deep, wide layers of a textbook U-Net hold most of its
    parameters, and a few hundred thousand are enough to tell asphalt from roofs and grass.
    """

    STRIDE = 32  # input sides must be multiples of this (stem x2, four poolings x16)

    def __init__(self, width: int = 16):
        super().__init__()
        w = [width, width * 2, width * 3, width * 4, width * 4]
        self.width = width
        self.stem = nn.Sequential(
            nn.Conv2d(3, w[0], 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(w[0]), nn.ReLU(inplace=True)
        )
        self.enc = nn.ModuleList([_block(w[0], w[0])] + [_block(w[i - 1], w[i]) for i in range(1, 5)])
        self.dec = nn.ModuleList([_block(w[i + 1] + w[i], w[i]) for i in range(4)])
        self.head = nn.Conv2d(w[0], 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (N, 1, H, W) for a normalised (N, 3, H, W) batch."""
        h, w = x.shape[-2:]
        skips = []
        x = self.stem(x)
        for i, enc in enumerate(self.enc):
            if i:
                x = F.max_pool2d(x, 2)
            x = enc(x)
            skips.append(x)
        x = skips.pop()
        for i in reversed(range(4)):
            skip = skips[i]
            x = F.interpolate(x, size=skip.shape[-2:], mode="bilinear", align_corners=False)
            x = self.dec[i](torch.cat([x, skip], 1))
        return F.interpolate(self.head(x), size=(h, w), mode="bilinear", align_corners=False)


def to_tensor(images_bgr: np.ndarray) -> torch.Tensor:
    """(N, H, W, 3) or (H, W, 3) uint8 BGR -> normalised float (N, 3, H, W)."""
    a = np.asarray(images_bgr, np.float32)
    if a.ndim == 3:
        a = a[None]
    return torch.from_numpy(((a - _MEAN) / _STD).transpose(0, 3, 1, 2).copy())


def network_size(width: int, height: int, long_side: int) -> tuple[int, int]:
    """(w, h) the frame is resized to: long side ``long_side``, aspect kept, both sides multiples of the stride."""
    scale = long_side / max(width, height)
    s = RoadUNet.STRIDE
    return max(s, int(round(width * scale / s)) * s), max(s, int(round(height * scale / s)) * s)


@torch.inference_mode()
def predict_proba(
    model: RoadUNet,
    image_bgr: np.ndarray,
    long_side: int = DEFAULT_LONG_SIDE,
    device: str | torch.device = "cpu",
    out_size: tuple[int, int] | None = None,
) -> np.ndarray:
    """Road probability (float32 0..1) for one BGR frame, at ``out_size`` (w, h; default the frame's size)."""
    h, w = image_bgr.shape[:2]
    nw, nh = network_size(w, h, long_side)
    small = cv2.resize(image_bgr, (nw, nh), interpolation=cv2.INTER_AREA)
    logits = model(to_tensor(small).to(device))[0, 0]
    prob = torch.sigmoid(logits).float().cpu().numpy()
    ow, oh = out_size or (w, h)
    return cv2.resize(prob, (ow, oh), interpolation=cv2.INTER_LINEAR)


def save_checkpoint(path: Path, model: RoadUNet, long_side: int, meta: dict) -> None:
    """Write weights (fp16 to keep the shipped file small; fp32 is restored on load) and what is needed to rebuild."""
    state = {k: (v.half() if v.is_floating_point() else v) for k, v in model.state_dict().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "kind": "airpatrol-road-unet",
            "width": model.width,
            "long_side": long_side,
            "state_dict": state,
            "meta": meta,
        },
        path,
    )


def load_checkpoint(path: str | Path | None = None, device: str | torch.device = "cpu") -> tuple[RoadUNet, int, dict]:
    """(model in eval mode on ``device``, its input long side, its metadata); a clear error if the file is unusable."""
    path = Path(path) if path else DEFAULT_WEIGHTS
    if not path.is_file():
        raise RoadWeightsError(f"{path}: road U-Net weights not found (train them with `airpatrol train-road`)")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(ckpt, dict) or ckpt.get("kind") != "airpatrol-road-unet":
            raise ValueError("not an AirPatrol road U-Net checkpoint")
        model = RoadUNet(int(ckpt["width"]))
        model.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in ckpt["state_dict"].items()})
    except Exception as exc:  # torch raises many types for corrupt files; all mean the same to the user
        raise RoadWeightsError(f"{path}: unreadable road U-Net weights ({exc})") from exc
    return fold_batchnorm(model).to(device).eval(), int(ckpt["long_side"]), dict(ckpt.get("meta", {}))


def fold_batchnorm(model: RoadUNet) -> RoadUNet:
    """Fold each eval-mode BatchNorm into the convolution before it (same output, ~20% less CPU time)."""
    model.eval()
    for seq in [m for m in model.modules() if isinstance(m, nn.Sequential)]:
        for i in range(len(seq) - 1):
            conv, bn = seq[i], seq[i + 1]
            if isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d):
                seq[i] = fuse_conv_bn_eval(conv, bn)
                seq[i + 1] = nn.Identity()
    return model
