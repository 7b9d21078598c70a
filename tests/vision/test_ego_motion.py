import cv2
import numpy as np

from tests.conftest import textured_image
from vision.ego_motion import EgoMotionEstimator, warp_boxes


def _homography(tx, ty, angle_deg, scale, w, h):
    A = cv2.getRotationMatrix2D((w / 2, h / 2), angle_deg, scale)
    A[:, 2] += (tx, ty)
    return np.vstack([A, [0, 0, 1]])


def test_recovers_known_drift_rotation_and_zoom():
    img = textured_image(1280, 720)
    H_true = _homography(7.0, -4.0, 0.8, 1.01, 1280, 720)
    nxt = cv2.warpPerspective(img, H_true, (1280, 720), borderMode=cv2.BORDER_REFLECT)
    est = EgoMotionEstimator()
    est.update(est.prepare(img))
    ego = est.update(est.prepare(nxt))
    assert ego.ok
    pts = np.array([[320, 180, 1], [960, 540, 1], [640, 360, 1.0]]).T
    a, b = H_true @ pts, ego.H @ pts
    err = np.linalg.norm(a[:2] / a[2] - b[:2] / b[2], axis=0)
    assert err.max() < 1.0, err


def test_moving_vehicles_do_not_bias_the_estimate():
    """A large patch moving against the background is excluded (masked boxes + RANSAC)."""
    img = textured_image(960, 540, seed=1)
    H_true = _homography(5.0, 0.0, 0.0, 1.0, 960, 540)
    nxt = cv2.warpPerspective(img, H_true, (960, 540), borderMode=cv2.BORDER_REFLECT)
    patch = textured_image(200, 120, seed=9)
    img[200:320, 300:500] = patch
    nxt[200:320, 330:530] = patch  # the "vehicle" moves 30 px while the ground moves 5 px
    est = EgoMotionEstimator()
    est.update(est.prepare(img))
    ego = est.update(est.prepare(nxt), exclude_xyxy=np.array([[300, 200, 530, 320]]))
    assert ego.ok
    assert abs(ego.H[0, 2] - 5.0) < 1.0


def test_featureless_frames_report_failure_not_garbage():
    flat = np.full((360, 640, 3), 128, np.uint8)
    est = EgoMotionEstimator()
    est.update(est.prepare(flat))
    ego = est.update(est.prepare(flat))
    assert not ego.ok and np.allclose(ego.H, np.eye(3))


def test_warp_boxes_translation():
    H = np.array([[1, 0, 10], [0, 1, -5], [0, 0, 1.0]])
    out = warp_boxes(H, np.array([[0, 0, 10, 20]]))
    assert np.allclose(out, [[10, -5, 20, 15]])
