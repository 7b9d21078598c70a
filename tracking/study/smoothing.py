"""Rauch-Tung-Striebel smoothing of ground-plane trajectories with a constant-acceleration Kalman model.

State per axis: position, velocity, acceleration; process noise: white jerk of spectral density ``jerk_psd``
(Bar-Shalom, *Estimation with Applications to Tracking and Navigation*, 6.2.3); measurement: position with
``sigma_m`` noise. The forward Kalman filter is followed by the RTS backward pass, so every state uses the whole
track (past and future), which is what a study from a recorded flight can afford and a live tracker cannot.

All tracks are filtered together: tracks are sorted by length, so at step k the tracks still running are a prefix
of the batch and each step is a few numpy operations on (tracks, 3, 3) arrays. x and y share the model and the
measurement times, so they share the covariance: the state is a (3, 2) matrix per track.
"""

from __future__ import annotations

import numpy as np

from tracking.study.model import SmoothedTrack, Trajectory


def thin(t: np.ndarray, xy: np.ndarray, min_dt: float) -> tuple[np.ndarray, np.ndarray]:
    """Keep samples at least ``min_dt`` apart (the first of each group), sorted by time; drops duplicates and NaN."""
    ok = np.isfinite(t) & np.isfinite(xy).all(axis=1)
    t, xy = t[ok], xy[ok]
    order = np.argsort(t, kind="stable")
    t, xy = t[order], xy[order]
    if len(t) == 0 or min_dt <= 0:
        return t, xy
    keep = np.zeros(len(t), bool)
    last = -np.inf
    for i, ti in enumerate(t.tolist()):  # one pass; the greedy choice needs the previous kept time
        if ti - last >= min_dt - 1e-9:
            keep[i] = True
            last = ti
    return t[keep], xy[keep]


def _transition(dt: np.ndarray, q: float) -> tuple[np.ndarray, np.ndarray]:
    """F and Q of the constant-acceleration (white jerk) model for each time step ``dt`` (m,)."""
    m = len(dt)
    F = np.zeros((m, 3, 3))
    F[:, 0, 0] = F[:, 1, 1] = F[:, 2, 2] = 1.0
    F[:, 0, 1] = F[:, 1, 2] = dt
    F[:, 0, 2] = dt**2 / 2
    d2, d3, d4, d5 = dt**2, dt**3, dt**4, dt**5
    Q = np.empty((m, 3, 3))
    Q[:, 0, 0] = d5 / 20
    Q[:, 0, 1] = Q[:, 1, 0] = d4 / 8
    Q[:, 0, 2] = Q[:, 2, 0] = d3 / 6
    Q[:, 1, 1] = d3 / 3
    Q[:, 1, 2] = Q[:, 2, 1] = d2 / 2
    Q[:, 2, 2] = dt
    return F, Q * q


def rts_smooth(
    tracks: list[tuple[np.ndarray, np.ndarray]], sigma_m: float = 0.5, jerk_psd: float = 2.0
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Smooth each ``(t, xy)`` (times increasing) into ``(position, velocity, acceleration)``, each (N, 2)."""
    n_tracks = len(tracks)
    if n_tracks == 0:
        return []
    lengths = np.array([len(t) for t, _ in tracks])
    order = np.argsort(-lengths, kind="stable")
    lens = lengths[order]
    n_max = int(lens[0])
    # active[k] = how many (sorted) tracks have a sample k; samples are stored step-major in flat arrays
    active = np.array([int(np.sum(lens > k)) for k in range(n_max)]) if n_max else np.zeros(0, int)
    off = np.concatenate([[0], np.cumsum(active)])
    total = int(off[-1])
    T = np.empty(total)
    Z = np.empty((total, 2))
    for rank, i in enumerate(order.tolist()):
        t, xy = tracks[i]
        idx = off[: len(t)] + rank
        T[idx], Z[idx] = t, xy
    r = sigma_m**2
    xf = np.empty((total, 3, 2))
    Pf = np.empty((total, 3, 3))
    xp = np.empty((total, 3, 2))
    Pp = np.empty((total, 3, 3))
    Fs = np.empty((total, 3, 3))
    # first sample: position measured, velocity and acceleration unknown (wide prior)
    m0 = int(active[0])
    P0 = np.zeros((m0, 3, 3))
    P0[:, 0, 0], P0[:, 1, 1], P0[:, 2, 2] = r, 30.0**2, 5.0**2
    x0 = np.zeros((m0, 3, 2))
    x0[:, 0] = Z[:m0]
    xf[:m0], Pf[:m0] = x0, P0
    xp[:m0], Pp[:m0] = x0, P0
    for k in range(1, n_max):
        m = int(active[k])
        a, b = int(off[k]), int(off[k]) + m
        pa = int(off[k - 1])
        dt = T[a:b] - T[pa : pa + m]
        F, Q = _transition(dt, jerk_psd)
        x_pred = F @ xf[pa : pa + m]
        P_pred = F @ Pf[pa : pa + m] @ F.transpose(0, 2, 1) + Q
        s = P_pred[:, 0, 0] + r
        K = P_pred[:, :, 0] / s[:, None]  # (m, 3): gain, the same for x and y
        innov = Z[a:b] - x_pred[:, 0, :]
        xf[a:b] = x_pred + K[:, :, None] * innov[:, None, :]
        Pf[a:b] = P_pred - K[:, :, None] * P_pred[:, 0, None, :]
        xp[a:b], Pp[a:b], Fs[a:b] = x_pred, P_pred, F
    xs = xf.copy()
    for k in range(n_max - 2, -1, -1):
        m = int(active[k + 1])
        a, nxt = int(off[k]), int(off[k + 1])
        C = Pf[a : a + m] @ Fs[nxt : nxt + m].transpose(0, 2, 1) @ np.linalg.inv(Pp[nxt : nxt + m])
        xs[a : a + m] = xf[a : a + m] + C @ (xs[nxt : nxt + m] - xp[nxt : nxt + m])
    out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = [None] * n_tracks  # type: ignore[list-item]
    for rank, i in enumerate(order.tolist()):
        idx = off[: lens[rank]] + rank
        s = xs[idx]
        out[i] = (s[:, 0, :], s[:, 1, :], s[:, 2, :])
    return out


def smooth_trajectories(
    trajs: list[Trajectory], sigma_m: float = 0.5, jerk_psd: float = 2.0, sample_dt: float = 0.1
) -> dict[int, SmoothedTrack]:
    """Smoothed track per trajectory (keyed by track id), on samples at least ``sample_dt`` apart."""
    thinned = [thin(np.asarray(tr.t, float), np.asarray(tr.xy, float), sample_dt) for tr in trajs]
    keep = [k for k, (t, _) in enumerate(thinned) if len(t) >= 2]
    res = rts_smooth([thinned[k] for k in keep], sigma_m, jerk_psd)
    out: dict[int, SmoothedTrack] = {}
    for k, (pos, vel, acc) in zip(keep, res):
        out[trajs[k].track_id] = SmoothedTrack(trajs[k].track_id, thinned[k][0], pos, vel, acc)
    return out
