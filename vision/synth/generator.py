"""Build a scene (roads, camera, traffic, ground raster) and write the clip with its ground truth."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from scipy.spatial import cKDTree
from tqdm import tqdm

from vision.synth import writers
from vision.synth.assets import load_assets
from vision.synth.camera import CameraTrack, camera_track, focal_35mm_equivalent
from vision.synth.ground import Grid, Ground, asphalt_colour, build_ground
from vision.synth.layout import FreeSpace, add_parking_lot, pick_visible_slots, place_clutter, shrink
from vision.synth.render import Placed, Renderer, TruthBox, sun
from vision.synth.roads import RoadNetwork, build_network
from vision.synth.scene import SceneConfig, SceneResult, rng_for
from vision.synth.study_truth import route_truth, ttc_conflicts, vehicle_truth
from vision.synth.vehicles import FrameStates, NearMiss, StaticObject, TrafficSim, VehicleSpec, place_parked
from vision.types import VEHICLE_CLASSES

MAX_RASTER_PX = 16e6
PARKED_VID0 = 100_001
CLUTTER_VID0 = 200_001
GENERATOR_VERSION = 1


@dataclass
class Scene:
    """Everything needed to render any frame of the clip."""

    cfg: SceneConfig
    cam: CameraTrack
    net: RoadNetwork
    ground: Ground
    traffic: list[FrameStates]
    statics: list[StaticObject]
    specs: dict[int, VehicleSpec]
    renderer: Renderer
    assets_source: str
    near_misses: list[NearMiss] = field(default_factory=list)

    def objects(self, i: int) -> list[Placed]:
        st = self.traffic[i]
        out = [
            Placed(self.specs[int(v)], float(x), float(y), float(h), float(s))
            for v, x, y, h, s in zip(st.vid, st.x, st.y, st.heading, st.speed)
        ]
        out += [Placed(o.spec, o.x, o.y, o.heading, 0.0) for o in self.statics]
        return out

    def render(self, i: int) -> tuple[np.ndarray, np.ndarray, list[TruthBox]]:
        """Frame i (0-based): image, road mask and truth boxes (with the simulation's vehicle ids)."""
        return self.renderer.render(i, self.objects(i))


def clear_of_lanes(net: RoadNetwork, slots: list) -> list:
    """Drop parking places that a lane runs through (e.g. a hard shoulder that a ramp's lane uses)."""
    if not slots:
        return slots
    pts = np.vstack([r.pts for r in net.routes])
    d, _ = cKDTree(pts).query(np.array([[s.x, s.y] for s in slots]))
    return [s for s, dist in zip(slots, d) if dist > 3.0]


def _footprints(cam: CameraTrack) -> list[np.ndarray]:
    idx = sorted(set(list(range(0, len(cam), 10)) + [len(cam) - 1]))
    return [cam.footprint(i) for i in idx]


@dataclass
class SimulatedTraffic:
    """The roads, the camera and the traffic of a scene, without any imagery (enough for trajectories and truth)."""

    cam: CameraTrack
    net: RoadNetwork
    frames: list[FrameStates]
    specs: dict[int, VehicleSpec]
    near_misses: list[NearMiss]
    half_len: float
    feet: list[np.ndarray]


def simulate_traffic(cfg: SceneConfig, asphalt: tuple[int, int, int] = (90, 90, 90)) -> SimulatedTraffic:
    """Roads, camera poses and the traffic simulation of ``cfg`` (the same as :func:`build_scene` draws: only the
    body colour of "asphalt grey" vehicles depends on ``asphalt``), with ``cfg.near_misses`` scripted near-misses
    spread evenly over the clip inside the first frame's view."""
    # Road lengths must cover everything the camera sees (plus room for vehicles to appear unseen).
    probe = camera_track(cfg, (0.0, 0.0))
    reach = max(float(np.linalg.norm(fp, axis=1).max()) for fp in _footprints(probe))
    half_len = reach + 220.0
    net = build_network(cfg, rng_for(cfg.seed, "roads"), half_len)
    cam = camera_track(cfg, net.target)
    feet = _footprints(cam)
    sim = TrafficSim(cfg, net, rng_for(cfg.seed, "traffic"), asphalt)
    if cfg.near_misses:
        sim.script_area = shrink(feet[0], 0.8)
        sim.near_miss_times = [(k + 0.5) * cfg.duration_s / cfg.near_misses for k in range(cfg.near_misses)]
    limit = max(r.speed_limit for r in net.routes)
    warmup = max(45.0, 1.5 * half_len / limit)
    if net.signals is not None:
        warmup = max(warmup, net.signals.cycle + 20.0)
    frames = sim.run(warmup, cfg.frame_count, cfg.fps)
    return SimulatedTraffic(cam, net, frames, dict(sim.specs), sim.near_misses, half_len, feet)


def build_scene(cfg: SceneConfig) -> Scene:
    assets = load_assets(cfg)
    grng = rng_for(cfg.seed, "ground")
    asphalt = asphalt_colour(grng)
    sim = simulate_traffic(cfg, asphalt)
    net, cam, feet, traffic = sim.net, sim.cam, sim.feet, sim.frames
    allpts = np.vstack(feet)
    margin = 20.0
    extent = (
        allpts[:, 0].min() - margin,
        allpts[:, 1].min() - margin,
        allpts[:, 0].max() + margin,
        allpts[:, 1].max() + margin,
    )
    visible = shrink(feet[0], 0.9)

    lrng = rng_for(cfg.seed, "layout")
    space = FreeSpace(net, extent)
    slots = clear_of_lanes(net, list(net.parking))
    if cfg.parked_vehicles > 0 and lrng.random() < 0.75:
        slots += add_parking_lot(net, space, visible, lrng)
    parked = place_parked(pick_visible_slots(slots, visible), cfg.parked_vehicles, lrng, PARKED_VID0, asphalt)
    clutter = place_clutter(cfg.clutter_objects, space, visible, lrng, CLUTTER_VID0)

    r = 1.0 / cam.metres_per_pixel(0)
    area = (extent[2] - extent[0]) * (extent[3] - extent[1])
    r = min(r, math.sqrt(MAX_RASTER_PX / area))
    grid = Grid.cover(extent, r)
    _, _, shadow_vec = sun(cfg)
    ground = build_ground(net, grid, grng, assets, shadow_vec, asphalt)

    specs = dict(sim.specs)
    statics = parked + clutter
    specs.update({o.spec.vid: o.spec for o in statics})
    renderer = Renderer(cfg, cam, ground, assets.car_crops, assets.vehicle_crops)
    return Scene(cfg, cam, net, ground, traffic, statics, specs, renderer, assets.source, sim.near_misses)


def generate_scene(config: SceneConfig, out_dir: str | Path, progress: bool = True) -> SceneResult:
    """Render ``config`` into ``out_dir`` (created): video.mp4, video.SRT, gt/, road_mask/, seqinfo.ini, scene.json,
    and yolo/ when ``config.yolo_every`` > 0. See docs/synth.md for the formats."""
    t_start = time.perf_counter()
    cfg = config
    out = Path(out_dir)
    (out / "gt").mkdir(parents=True, exist_ok=True)
    scene = build_scene(cfg)
    n = cfg.frame_count
    name = out.resolve().name or "synth"

    video = writers.VideoWriter(out / "video.mp4", cfg.width, cfg.height, cfg.fps) if cfg.write_video else None
    if cfg.road_mask_every:
        (out / "road_mask").mkdir(exist_ok=True)
    if cfg.yolo_every:
        (out / "yolo" / "images").mkdir(parents=True, exist_ok=True)
        (out / "yolo" / "labels").mkdir(parents=True, exist_ok=True)

    rows: list[tuple[int, TruthBox, float, float, float]] = []  # frame, box, speed m/s, ground x, y
    visible: list[set[int]] = []  # per frame: simulation ids with a truth box
    try:
        for i in tqdm(range(n), desc=f"synth {cfg.scene}", unit="frame", disable=not progress):
            img, road, boxes = scene.render(i)
            visible.append({b.vid for b in boxes})
            if video is not None:
                video.write(img)
            if cfg.road_mask_every and i % cfg.road_mask_every == 0:
                cv2.imwrite(str(out / "road_mask" / f"{i + 1:06d}.png"), road, [cv2.IMWRITE_PNG_BILEVEL, 1])
            if cfg.yolo_every and i % cfg.yolo_every == 0:
                stem = f"{name}_{i + 1:06d}"
                cv2.imwrite(str(out / "yolo" / "images" / f"{stem}.jpg"), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
                (out / "yolo" / "labels" / f"{stem}.txt").write_text(
                    writers.yolo_label(boxes, cfg.width, cfg.height, cfg.yolo_min_visibility)
                )
            motion = {
                int(v): (float(s), float(x), float(y))
                for v, s, x, y in zip(
                    scene.traffic[i].vid, scene.traffic[i].speed, scene.traffic[i].x, scene.traffic[i].y
                )
            }
            for b in boxes:
                if b.vid in motion:
                    s, x, y = motion[b.vid]
                else:
                    o = next(o for o in scene.statics if o.spec.vid == b.vid)
                    s, x, y = 0.0, o.x, o.y
                rows.append((i + 1, b, s, x, y))
    finally:
        if video is not None:
            video.close()

    # compact ids 1..N in order of first appearance
    order: dict[int, int] = {}
    for f, b, *_ in rows:
        order.setdefault(b.vid, len(order) + 1)
    gt_lines, speed_lines = [], [writers.SPEEDS_HEADER]
    for f, b, s, x, y in rows:
        sim_vid = b.vid
        b = TruthBox(order[sim_vid], b.class_id, b.left, b.top, b.width, b.height, b.visibility)
        gt_lines.append(writers.mot_line(f, b))
        speed_lines.append(writers.speed_line(f, b.vid, s, x, y))
    (out / "gt" / "gt.txt").write_text("\n".join(gt_lines) + ("\n" if gt_lines else ""))
    (out / "gt" / "speeds.csv").write_text("\n".join(speed_lines) + "\n")
    (out / "gt" / "camera.csv").write_text(writers.camera_csv(scene.cam, cfg.fps))
    (out / "video.SRT").write_text(writers.srt_text(cfg, scene.cam))
    (out / "seqinfo.ini").write_text(writers.seqinfo(name, cfg))
    if cfg.yolo_every:
        (out / "yolo" / "data.yaml").write_text(
            "path: .\ntrain: images\nval: images\nnames:\n"
            + "".join(f"  {k}: {c}\n" for k, c in enumerate(VEHICLE_CLASSES))
        )

    mpp = [scene.cam.metres_per_pixel(i) for i in range(n)]
    vehicles = {
        str(order[v]): {
            "class": scene.specs[v].cls,
            "kind": scene.specs[v].kind,
            "length_m": round(scene.specs[v].length, 3),
            "width_m": round(scene.specs[v].width, 3),
            "height_m": round(scene.specs[v].height, 3),
            "colour": scene.specs[v].colour_name,
            "sim_id": v,
        }
        for v in order
    }
    arms, route_facts = route_truth(scene.net, scene.cam.footprint(0))
    study = vehicle_truth(scene.net, scene.traffic, visible, route_facts)
    for v, truth in study.items():
        if v in order:
            vehicles[str(order[v])]["study"] = truth.as_dict()
    conflicts = ttc_conflicts(scene.traffic, scene.specs, cfg.fps, visible, near_misses=scene.near_misses)
    meta = {
        "generator": "airpatrol synth",
        "version": GENERATOR_VERSION,
        "seed": cfg.seed,
        "config": cfg.model_dump(mode="json"),
        "frame_count": n,
        "fps": cfg.fps,
        "width": cfg.width,
        "height": cfg.height,
        "metres_per_pixel": mpp[0],
        "metres_per_pixel_range": [min(mpp), max(mpp)],
        "camera": {
            "name": cfg.camera.name,
            "sensor_width_mm": cfg.camera.sensor_width_mm,
            "sensor_height_mm": cfg.camera.sensor_height_mm,
            "focal_length_mm": cfg.camera.focal_length_mm,
            "focal_length_35mm_equiv": focal_35mm_equivalent(cfg),
            "K": scene.cam.K.tolist(),
            "pixel_convention": "K and gt/camera.csv homographies: pixel i centred at i; gt boxes: edges",
        },
        "classes": {str(k + 1): c for k, c in enumerate(VEHICLE_CLASSES)},
        "assets": scene.assets_source,
        "road_mask": {"dir": "road_mask", "every": cfg.road_mask_every, "value": "255 = road surface"},
        "video": {
            "file": "video.mp4" if cfg.write_video else None,
            "codec": video.codec if video is not None else None,
        },
        "lanes": len(scene.net.routes),
        "ground_px_per_m": scene.ground.grid.r,
        "vehicles": vehicles,
        "approaches": [a.as_dict() for a in arms],
        "conflicts": [
            {
                "kind": c.kind,
                "value_s": round(c.value_s, 3),
                "frame": c.frame + 1,
                "t": round(c.t, 3),
                "x_m": round(c.x, 2),
                "y_m": round(c.y, 2),
                "id_a": order.get(c.a),
                "id_b": order.get(c.b),
                "scripted": c.scripted,
            }
            for c in conflicts
        ],
        "near_misses": [
            {
                "follower": order.get(nm.follower),
                "leader": order.get(nm.leader),
                "t_start": round(nm.t_start, 3),
                "t_end": None if nm.t_end is None else round(nm.t_end, 3),
                "outcome": nm.outcome,
            }
            for nm in scene.near_misses
        ],
    }
    (out / "scene.json").write_text(json.dumps(meta, indent=1))
    if video is not None:
        _check_video(out / "video.mp4", n)
    files = {
        "video": out / "video.mp4",
        "gt": out / "gt" / "gt.txt",
        "speeds": out / "gt" / "speeds.csv",
        "camera": out / "gt" / "camera.csv",
        "srt": out / "video.SRT",
        "seqinfo": out / "seqinfo.ini",
        "scene": out / "scene.json",
    }
    if cfg.road_mask_every:
        files["road_mask"] = out / "road_mask"
    if cfg.yolo_every:
        files["yolo"] = out / "yolo"
    return SceneResult(
        out,
        cfg,
        n,
        cfg.fps,
        cfg.width,
        cfg.height,
        mpp[0],
        len(order),
        len(gt_lines),
        time.perf_counter() - t_start,
        files,
    )


def _check_video(path: Path, n: int) -> None:
    cap = cv2.VideoCapture(str(path))
    ok, _ = cap.read()
    cap.release()
    if not ok:
        raise OSError(f"{path}: written, but OpenCV cannot read it back")
