"""``python -m bench.real``: plain Ultralytics vs ``--baseline`` vs dual on every real sequence with ground truth.

For each sequence in ``../shared/data/mot`` (bench/real/sequences.py; the night sequence is scored on its first 240
frames only, its last frames may train the detector):

- **plain**: ``YOLO(weights).track(..., tracker="bytetrack.yaml", persist=True, conf=c, imgsz=640)``, conf swept over
  ``--plain-confs``; the best conf *on that sequence* is reported (the strongest plain a user could pick);
- **baseline**: ``airpatrol process --baseline`` with its defaults;
- **dual**: ``airpatrol process`` with each candidate setting of ``DUAL_CANDIDATES``; the setting reported on a
  sequence is the one with the best pooled MOTA on the *other* sequences (leave-one-sequence-out). The shipped
  default is scored too, marked in-sample when it was chosen with that sequence in view.

Writes ``--out`` (JSON, every run) and prints the markdown tables for docs/accuracy.md. Runs are cached in
``--cache`` by sequence, contender, setting, weights and a fingerprint of the pipeline code, so a re-run only
computes what changed.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

from bench.real.cache import cached, code_tag, weights_tag
from bench.real.contenders import RunResult, run_airpatrol, run_plain, run_plain_sweep
from bench.real.cost import interchange, interchange_markdown, measure
from bench.real.sequences import NIGHT_SCORED_FRAMES, NIGHT_TRAIN_FRAMES, Sequence, real_sequences
from tracking.evaluation.scoring import score

# Settings of the dual layer the leave-one-out choice picks from: native resolution, what the road restricts, the
# motion layer's blobs, the detector stride, the frame-edge rule. {} = shipped. (The moving-blob gate's strictness and
# the road crop, scored in earlier rounds, changed MOTA by < 0.7 and are no longer swept; native-always, the edge rule
# at 0.3 and the road's drop of confident boxes were scored in the run docs/detector_scale.md reports.)
DUAL_CANDIDATES: dict[str, dict] = {
    "default": {},
    "no-road": {"road.enabled": False},
    "no-motion": {"motion.enabled": False},
    # vehicles cut by the frame's edge reported whatever share of them is in view
    "no-edge-rule": {"tracker.min_visible_at_border": None},
    # a track lost and found again within the hold-back is not reported on the frames between (the previous default)
    "no-gap-fill": {"tracker.fill_lost_gaps": False},
    # pieces of one vehicle's path not linked over the flight (the previous default; tracking/linking.py)
    "no-linking": {"linking.enabled": False},
    # linking without filling a standing track's lost frames, or filling moving gaps up to 1 s only (the previous
    # default; linking.fill_moving_s)
    "no-standing-fill": {"linking.fill_standing_lost": False},
    "fill-moving-1s": {"linking.fill_moving_s": 1.0},
    # vehicles standing still reported at their detected boxes, not their window's median box (the previous default;
    # tracking/still_boxes.py)
    "no-still-boxes": {"linking.still_box_s": 0.0},
    # the 30 fps sequences analysed at 15 frames a second, the frames between interpolated, as recorded 1080p+
    # flights are (tracking/frame_rate.py; 720p and smaller keep every frame by default): what the half rate costs
    "half-rate": {"analysis_rate.full_rate_up_to_px": 0},
    # the detector on ONNX Runtime (float32) where 'auto' picks OpenVINO (bfloat16 on a CPU that has it): what the
    # faster runtime's arithmetic changes (vision/runtime.py; the previous default on CPU)
    "onnx-runtime": {"detector.runtime": "onnx"},
    # weak boxes extending standing tracks that drove there (tracker.weak_match_iou, opt-in): a box scored 0.25-0.3
    # extends its track at IoU 0.5 instead of IoU x score >= 0.2; with lost tracks found again by weak boxes too; and
    # any confirmed track, moving or never seen to drive (false boxes carried on at night)
    "weak-match": {"tracker.weak_match_iou": 0.5},
    "weak-match-refind": {"tracker.weak_match_iou": 0.5, "tracker.weak_refind_lost": True},
    "weak-match-any-track": {
        "tracker.weak_match_iou": 0.5,
        "tracker.weak_match_standing_lengths_s": None,
        "tracker.weak_match_moved_only": False,
    },
    # linking without the follower rule: a piece moving at both ends may be joined to one that starts, at speed, where
    # it ended seconds later (the next vehicle on its path; the previous default)
    "no-follower-rule": {"linking.min_gap_speed_share": 0.0},
    # linking without the flow paths: a later piece only on the line or arc of the earlier one (the previous default)
    "no-flow-paths": {"linking.flow_paths": False},
    # moving ends followed along the traffic's mean way only, each vehicle's own way only from ends where it stood
    # (the previous default; linking.vehicle_ways)
    "mean-way-only": {"linking.vehicle_ways": False},
    # a slow end joined to a slow start ahead of it only within linking.stood_m (the previous default; a queued
    # vehicle that moved up a place unseen stays two pieces; linking.queue_step_m)
    "no-queue-steps": {"linking.queue_step_m": 0.0},
    # a short gap's turn judged only on the rates the pieces were measured turning at (the previous default;
    # linking.steady_turns)
    "no-steady-turns": {"linking.steady_turns": False},
    # linking without hidden turns: a piece moving at both ends joined only on its line, its arc or a flow path (the
    # previous default; with the default one circular arc tangent to both ends may explain a turn hidden in the gap)
    "no-hidden-turns": {"linking.hidden_turns": False},
    # each reported box at the size the detector gave it, not its track's median over a second (the previous
    # default; linking.steady_box_s)
    "no-steady-boxes": {"linking.steady_box_s": 0.0},
    # linking in one round, hidden turns only on one arc tangent to both ends (the previous default; linking.rounds,
    # linking.turn_run_m)
    "one-round-one-arc": {"linking.rounds": 1, "linking.turn_run_m": 0.0},
    # linking without comparing box sizes at a link, and over long gaps only between ends measured standing (the
    # previous default; linking.max_size_ratio, linking.size_cost, linking.stood_m)
    "no-sizes-no-creep": {"linking.max_size_ratio": 100.0, "linking.size_cost": 0.0, "linking.stood_m": 0.0},
    # linking without departures: a slow end joined only on its line, an arc or a flow path (the previous default;
    # linking.departure_max_mps)
    "no-departures": {"linking.departure_max_mps": 0.0},
    # linking without long gaps for trucks and buses: max_moving_gap_s for every vehicle (the previous default;
    # linking.large_lengths)
    "no-large-gaps": {"linking.large_lengths": 0.0},
    # linking pieces that overlap in time only up to 0.5 s, judged by the end and the start (the previous default;
    # linking.overlap_s: up to 10 s, judged on the frames both report)
    "short-overlaps": {"linking.overlap_s": 0.5},
    # a standing vehicle the detector misses is not carried by its appearance (the previous default;
    # tracking/standing_hold.py)
    "no-standing-hold": {"standing_hold.enabled": False},
    # the hold carries standing vehicles only, not moving ones (the previous default; standing_hold.follow_moving)
    "no-follow-moving": {"standing_hold.follow_moving": False},
    # linking judges a piece by its end only, not also where it stood within its last seconds (the previous default;
    # linking.tail_s)
    "no-tails": {"linking.tail_s": 0.0},
    # recorded runs do not look again for lost movers in turned crops (the previous default; look_again.*)
    "no-look-again": {"look_again.enabled": False},
    # recorded runs without the any-heading detector beside the shipped one (the previous default), and with it for
    # every track without a shipped box, not only those last seen moving diagonally (the opt-in of the round before):
    # for every one, for moving ones only, for those matched at least 10 times (detector.any_heading)
    "no-any-heading": {"detector.any_heading.enabled": False},
    "any-heading-every-track": {"detector.any_heading.min_axis_angle_deg": 0.0},
    "any-heading-moving": {
        "detector.any_heading.min_axis_angle_deg": 0.0,
        "detector.any_heading.min_speed_lengths_s": 0.5,
    },
    # the any-heading detector also looks at vehicle-sized moving blobs that no box explains and no established track
    # follows, and its box there may start a track (opt-in for junction studies; detector.any_heading.movers)
    "any-heading-movers": {"detector.any_heading.movers": True},
    # weak moving boxes not promoted where a tracked vehicle is predicted (IoU >= 0.3): they extend its track from
    # ByteTrack's low band (opt-in for junction studies; motion.promote_track_iou)
    "promote-not-at-tracks": {"motion.promote_track_iou": 0.3},
    "any-heading-history": {
        "detector.any_heading.min_axis_angle_deg": 0.0,
        "detector.any_heading.min_track_updates": 10,
    },
    # a weak detector box (ByteTrack's low band) whose pixels move starts nothing (the previous default; promoted, it
    # may start a track: a car the detector scores low while it turns or pulls away, motion.promote_moving_fraction)
    "no-promote-movers": {"motion.promote_moving_fraction": None},
    # a track a weak box (0.25-0.3) started is confirmed by another weak box at IoU 0.5 (the default, Ultralytics'
    # rule, asks IoU x score >= 0.3, which such boxes never reach; opt-in, tracker.weak_tracks)
    "weak-tracks": {"tracker.weak_tracks": True},
    # tracks inside another's box left as they are: neither a truck's cab merged into the truck nor a box of two
    # queued cars dropped (the previous default; linking.nested_tracks, tracking/nested_tracks.py)
    "no-nested": {"linking.nested_tracks": False},
    # every piece linked from its last box, whatever the standing hold's last matches were (the previous default;
    # linking.unmeasured_tail_s)
    "no-unmeasured-tails": {"linking.unmeasured_tail_s": 0.0},
    # two tracks that followed one vehicle at once left as two (the previous default; linking.twin_tracks)
    "no-twins": {"linking.twin_tracks": False},
    # steady turns judged between pieces followed a second or more only (the previous default)
    "steady-1s": {"linking.steady_turn_min_s": 1.0},
    # the motion layer's background warped into every frame, as before (the previous default; kept in an anchor
    # frame's coordinates it is no longer resampled every frame, motion.anchored_background_coverage)
    "background-every-frame": {"motion.anchored_background_coverage": None},
    # a track last measured standing is linked from its last box, whatever the standing hold's matches did after it;
    # a track that ended standing at a frame edge links as any other (the previous default; linking.carried_off_lengths,
    # linking.edge_waits)
    "no-set-off-links": {"linking.carried_off_lengths": None, "linking.edge_waits": False},
    # a vehicle taken to have stood through a gap at a place another vehicle drove through in it (the previous
    # default; linking.driven_through)
    "no-driven-through": {"linking.driven_through": False},
    # an end and a start whose ways are opposed (more than 135 deg) joined where either stood (the previous default;
    # linking.turned_back_deg)
    "no-turned-back": {"linking.turned_back_deg": 180.0},
    # the standing hold keeps a track whose box holds a weak box (under 0.25) of another vehicle's size (opt-in;
    # standing_hold.two_vehicles_min_score)
    "two-vehicles-confident": {"standing_hold.two_vehicles_min_score": 0.25},
    # a piece ending standing not joined to one seen driving off after a wait longer than max_moving_gap_s (the
    # previous default; linking.waited_departures)
    "no-waited-departures": {"linking.waited_departures": False},
    # a start short of what the slower end's speed covers in the gap not charged (the previous default;
    # linking.gap_shortfall_cost)
    "no-gap-shortfall": {"linking.gap_shortfall_cost": 0.0},
    # a standing track where traffic drove lately held as a queued car though the tracker never saw it drive (opt-in;
    # standing_hold.driven_path_s)
    "driven-path": {"standing_hold.driven_path_s": 120.0},
    # moving tracks the tracker lost and found again left empty between, short twins kept as tracks of their own (the
    # previous default; linking.fill_moving_lost, linking.short_twins)
    "no-lost-fills-short-twins": {"linking.fill_moving_lost": False, "linking.short_twins": False},
    # a departure from a held piece timed from its end, not from up to unmeasured_tail_s before (the previous
    # default; linking.held_departures)
    "no-held-departures": {"linking.held_departures": False},
    # a short gap's steady turn judged from the fitted headings alone (the previous default; linking.steady_turn_ends)
    "no-steady-turn-ends": {"linking.steady_turn_ends": False},
    # pieces moving at an end linked over gaps up to 30 s like standing ones (the previous default)
    "long-moving-gaps": {"linking.max_moving_gap_s": 30.0},
    # what a live stream's feed reports: each track from the frame it is confirmed on, lost frames empty, nothing
    # linked (the recorded runs of two rounds back too)
    "as-live": {"motion.report_from_first_frame": False, "tracker.fill_lost_gaps": False, "linking.enabled": False},
    # the shipped default three rounds back
    "previous-default": {
        "detector.stride_follows_scale": False,
        "tracker.min_visible_at_border": None,
        "road.sure_off_road_max_score": None,
        "motion.report_from_first_frame": False,
        "tracker.fill_lost_gaps": False,
        "linking.enabled": False,
    },
}


# Each layer's ablation: the setting without it, against the shipped default (and both off against each alone).
LAYER_ABLATIONS = {"road": "no-road", "motion": "no-motion"}


# Scored and shown, never picked: settings outside the cost budget (the time target), to show what they would buy;
# only with --references (they cost several times a default run).
DUAL_REFERENCES: dict[str, dict] = {
    "detector-every-frame": {"detector.every_n_frames": 1},
    # the detector every 2nd frame whatever its pass costs: 1.46-1.48x plain's CPU time at native 1024x540
    # (docs/detector_scale.md); the default uses it only where the plan downscales
    "stride-2": {"detector.stride_follows_scale": False, "detector.every_n_frames": 2},
}


def _scored(seq: Sequence, result: RunResult) -> dict:
    gt, ignore = seq.ground_truth()
    return {
        **score(gt, ignore, result.pred, seq.frames, seq.size),
        "ms_per_frame": result.ms_per_frame,
        "frames_run": result.frames,
        "stages": result.stages,
        **({"detector_scales": result.scales} if result.scales is not None else {}),
    }


def best_plain(entry: dict) -> dict:
    """The strongest plain contender on a sequence: the best MOTA over both trackers and every conf (in-sample)."""
    rows = [{**r, "tracker": t, "conf": float(c)} for t, by_conf in entry["plain"].items() for c, r in by_conf.items()]
    return max(rows, key=lambda r: r["mota"])


def evaluate(
    seqs: list[Sequence],
    weights: Path,
    plain_confs: list[float],
    cache: Path,
    log,
    references: bool = False,
    baseline: bool = False,
    candidates: list[str] | None = None,
) -> dict:
    tag = weights_tag(weights)
    out: dict = {"weights": str(weights), "weights_sha256_12": tag, "sequences": {}}
    for seq in seqs:
        entry: dict = {
            "frames": list(seq.frames),
            "condition": seq.condition,
            "view": seq.view,
            "plain": {},
            "dual": {},
        }
        key: dict[str, Any] = {
            "seq": seq.name,
            "frames": seq.frames,
            "contender": "plain-sweep",
            "confs": plain_confs,
            "weights": tag,
        }

        def sweep() -> dict:
            runs = run_plain_sweep(seq, weights, plain_confs)
            return {f"{t}|{c}": _scored(seq, r) for (t, c), r in runs.items()}

        for k, r in cached(cache, key, sweep, pipeline=False).items():
            if k == "key":
                continue
            tracker, conf = k.split("|")
            entry["plain"].setdefault(tracker, {})[conf] = r
            log(seq.name, f"plain {tracker} conf={conf}", r)
        if references:  # the other simple thing a user can do: feed Ultralytics the native resolution
            key = {
                "seq": seq.name,
                "frames": seq.frames,
                "contender": "plain",
                "conf": 0.1,
                "imgsz": 1024,
                "weights": tag,
            }
            entry["plain_1024"] = cached(
                cache, key, lambda: _scored(seq, run_plain(seq, weights, 0.1, imgsz=1024)), pipeline=False
            )
            log(seq.name, "plain imgsz=1024 conf=0.1", entry["plain_1024"])
        if baseline:
            key = {"seq": seq.name, "frames": seq.frames, "contender": "baseline", "weights": tag}
            entry["baseline"] = cached(
                cache, key, lambda: _scored(seq, run_airpatrol(seq, True, {"detector.weights": str(weights)}))
            )
            log(seq.name, "baseline", entry["baseline"])
        for name, overrides in {**DUAL_CANDIDATES, **(DUAL_REFERENCES if references else {})}.items():
            if candidates and name not in candidates:
                continue
            key = {"seq": seq.name, "frames": seq.frames, "contender": "dual", "overrides": overrides, "weights": tag}
            entry["dual"][name] = cached(
                cache,
                key,
                lambda: _scored(seq, run_airpatrol(seq, False, {**overrides, "detector.weights": str(weights)})),
            )
            log(seq.name, f"dual {name}", entry["dual"][name])
        out["sequences"][seq.name] = entry
    return out


def leave_one_out(results: dict) -> dict:
    """Per sequence: the dual setting with the best MOTA over the other sequences (pooled by GT boxes)."""
    seqs = results["sequences"]
    choice = {}
    for held in seqs:
        others = [s for s in seqs if s != held]
        if not others:
            choice[held] = "default"
            continue

        def pooled(name: str) -> float:
            gt = sum(seqs[s]["dual"][name]["gt_boxes"] for s in others)
            return sum(seqs[s]["dual"][name]["mota"] * seqs[s]["dual"][name]["gt_boxes"] for s in others) / gt

        choice[held] = max((c for c in DUAL_CANDIDATES if all(c in seqs[s]["dual"] for s in seqs)), key=pooled)
    return choice


def _pooled(rows: list[dict]) -> dict:
    gt = sum(r["gt_boxes"] for r in rows)
    fp, fn, sw = (sum(r[k] for r in rows) for k in ("fp", "fn", "idsw"))
    return {"mota": 100 * (1 - (fp + fn + sw) / gt), "fp": fp, "fn": fn, "idsw": sw, "gt_boxes": gt}


def _f(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def _border(r: dict) -> str:
    b = r.get("border_fp")
    return "-" if b is None or not r["fp"] else f"{100 * b / r['fp']:.0f} %"


def markdown(results: dict, choice: dict) -> str:
    lines = [
        "| sequence | contender | MOTA | IDF1 | HOTA | FP | FP on the border | FN | ID sw. | ms/frame |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    pooled: dict[str, list[dict]] = {"plain": [], "dual": []}
    for name, e in results["sequences"].items():
        best = best_plain(e)
        rows: list[tuple[str, dict, str | None]] = []
        for tracker, by_conf in e["plain"].items():
            conf = max(by_conf, key=lambda c: by_conf[c]["mota"])
            rows.append((f"plain Ultralytics track, {tracker}, best conf ({conf})", by_conf[conf], None))
        rows.append((f"**strongest plain** ({best['tracker']}, conf {best['conf']})", best, "plain"))
        if "baseline" in e:
            rows.append(("`airpatrol process --baseline`", e["baseline"], None))
        rows.append(
            (f"`airpatrol process` dual, leave-one-out setting ({choice[name]})", e["dual"][choice[name]], "dual")
        )
        if choice[name] != "default":
            rows.append(("dual, shipped default (in-sample)", e["dual"]["default"], None))
        for ref, overrides in DUAL_REFERENCES.items():
            if ref in e["dual"]:
                rows.append(
                    (f"reference: dual, {ref} ({json.dumps(overrides)}; over the cost budget)", e["dual"][ref], None)
                )
        if "plain_1024" in e:
            rows.append(("reference: plain Ultralytics track, bytetrack, imgsz 1024, conf 0.1", e["plain_1024"], None))
        for label, r, group in rows:
            if group:
                pooled[group].append(r)
            lines.append(
                f"| {name} ({e['condition']}, frames {e['frames'][0]}-{e['frames'][1]}) | {label} | "
                f"{_f(r['mota'])} | {_f(r['idf1'])} | {_f(r['hota'])} | {r['fp']} | {_border(r)} | {r['fn']} | "
                f"{r['idsw']} | {_f(r['ms_per_frame'], 0)} |"
            )
    for group, group_rows in pooled.items():
        if group_rows:
            p = _pooled(group_rows)
            lines.append(f"| pooled | {group} | {_f(p['mota'])} | | | {p['fp']} | | {p['fn']} | {p['idsw']} | |")
    return "\n".join(lines)


def targets(results: dict, choice: dict) -> list[tuple[str, str, bool]]:
    """The issue's targets, each (what, measured, met)."""
    out = []
    seqs = results["sequences"]
    plains, duals = [], []
    for name, e in seqs.items():
        best = best_plain(e)
        dual = e["dual"][choice[name]]
        plains.append(best)
        duals.append(dual)
        out.append(
            (
                f"{name}: dual >= the better plain tracker + 3 MOTA, FP <= plain",
                f"dual {dual['mota']:.1f} vs plain {best['mota']:.1f} ({best['tracker']}, conf {best['conf']}; "
                f"{dual['mota'] - best['mota']:+.1f}); FP {dual['fp']} vs {best['fp']}",
                dual["mota"] >= best["mota"] + 3 and dual["fp"] <= best["fp"],
            )
        )
        if e["condition"] == "night":
            # the night target is on held-back frames the team keeps; these are the dev frames
            out.append(
                (
                    f"{name}: night MOTA >= 50 (dev frames; held-back ones not here)",
                    f"{dual['mota']:.1f}",
                    dual["mota"] >= 50,
                )
            )
        cost = results.get("cost", {}).get(name)
        if cost:  # interleaved on the same frames, CPU time: what the machine pays, little affected by other jobs
            d, p = cost["dual"], cost["plain"]
            out.append(
                (
                    f"{name}: CPU time per frame <= 1.3x plain ByteTrack 640 (`airpatrol process` defaults vs plain "
                    f"track, first {d['frames']} frames, {d['repeats']} interleaved repeats)",
                    f"{d['cpu']:.0f} vs {p['cpu']:.0f} ms ({d['cpu_ratio']:.2f}x); wall {d['wall']:.0f} vs "
                    f"{p['wall']:.0f} ms ({d['wall_ratio']:.2f}x)",
                    d["cpu_ratio"] <= 1.3,
                )
            )
    ic = results.get("interchange")
    if ic:
        d, p, ref = ic["dual"], ic["plain"], ic["native"]
        ratio = d["cpu"] / p["cpu"]
        out.append(
            (
                "1080p nadir interchange: CPU time per frame <= 2.5x plain ByteTrack 640",
                f"{d['cpu']:.0f} vs {p['cpu']:.0f} ms ({ratio:.2f}x)",
                ratio <= 2.5,
            )
        )
        m = d.get("matched")
        if m:  # tracks that follow a native-run track (tracking/evaluation/track_match.py), not any track >= 1 s
            share = m["found_matched"] / max(m["reference_vehicles"], 1)
            measured = (
                f"{m['found_matched']} of {m['reference_vehicles']} found and matched ({100 * share:.0f} %), "
                f"{m['extra']} extra tracks; tracks >= 1 s {d['vehicles']} vs {ref['vehicles']}; plain ByteTrack "
                f"640 {p['matched']['found_matched']} matched"
            )
        else:
            share = d["vehicles"] / max(ref["vehicles"], 1)
            measured = (
                f"{d['vehicles']} of {ref['vehicles']} ({100 * share:.0f} %); plain ByteTrack 640 {p['vehicles']}"
            )
        out.append(
            (
                "1080p nadir interchange: >= 90 % of the vehicles (tracks >= 1 s) the native-resolution run finds",
                measured,
                share >= 0.9,
            )
        )
    if len(seqs) > 1:
        p, d = _pooled(plains), _pooled(duals)
        out.append(
            (
                "pooled: dual >= plain + 5 MOTA",
                f"dual {d['mota']:.1f} vs plain {p['mota']:.1f} ({d['mota'] - p['mota']:+.1f})",
                d["mota"] >= p["mota"] + 5,
            )
        )
    return out


def candidates_table(results: dict) -> str:
    seqs = results["sequences"]
    head = "| setting | overrides | " + " | ".join(f"{n} MOTA / FP" for n in seqs) + " |"
    lines = [head, "|---|---|" + "---|" * len(seqs)]
    for kind, group in (("candidate", DUAL_CANDIDATES), ("reference", DUAL_REFERENCES)):
        for name, o in group.items():
            if not any(name in e["dual"] for e in seqs.values()):
                continue
            cells = [
                f"{e['dual'][name]['mota']:.1f} / {e['dual'][name]['fp']}" if name in e["dual"] else "-"
                for e in seqs.values()
            ]
            lines.append(
                f"| `{name}` ({kind}) | {json.dumps(o) if o else 'shipped defaults'} | " + " | ".join(cells) + " |"
            )
    return "\n".join(lines)


def layer_effects(results: dict) -> dict[str, dict[str, float]]:
    """layer -> sequence -> MOTA the layer adds (default minus the setting without it)."""
    out: dict[str, dict[str, float]] = {}
    for layer, without in LAYER_ABLATIONS.items():
        out[layer] = {
            seq: e["dual"]["default"]["mota"] - e["dual"][without]["mota"]
            for seq, e in results["sequences"].items()
            if without in e["dual"] and "default" in e["dual"]
        }
    return out


def _effects(results: dict) -> list[str]:
    """One line per setting: its MOTA change against the shipped default on each sequence."""
    seqs = results["sequences"]
    out = []
    for layer, by_seq in layer_effects(results).items():
        cells = ", ".join(f"{s} {v:+.1f}" for s, v in by_seq.items())
        fps = ", ".join(
            f"{s} {e['dual']['default']['fp'] - e['dual'][LAYER_ABLATIONS[layer]]['fp']:+d}"
            for s, e in seqs.items()
            if LAYER_ABLATIONS[layer] in e["dual"]
        )
        out.append(f"- **{layer} layer** (default minus `{LAYER_ABLATIONS[layer]}`): MOTA {cells}; FP {fps}.")
    for name in [*DUAL_CANDIDATES, *DUAL_REFERENCES]:
        if name == "default" or name in LAYER_ABLATIONS.values() or not all(name in e["dual"] for e in seqs.values()):
            continue
        deltas = ", ".join(
            f"{seq} {e['dual'][name]['mota'] - e['dual']['default']['mota']:+.1f}" for seq, e in seqs.items()
        )
        out.append(f"- `{name}` against the shipped default, MOTA: {deltas}.")
    return out


def _scales(results: dict) -> list[str]:
    out = []
    for name, e in results["sequences"].items():
        plan = e["dual"].get("default", {}).get("detector_scales")
        if plan:
            parts = "; ".join(
                f"frames {p['frames'][0]}-{p['frames'][1]} rows {p['rows'][0]}-{p['rows'][1]}: x{p['scale']:.2f}"
                for p in plan[:12]
            )
            more = f" (+{len(plan) - 12} more)" if len(plan) > 12 else ""
            out.append(f"- {name}: {parts}{more}.")
    return out


def write_markdown(results: dict, choice: dict, path: Path, command: str) -> None:
    split = results["night_split"]
    t = targets(results, choice)
    first = next(iter(results["sequences"].values()))
    confs = sorted({float(c) for by_conf in first["plain"].values() for c in by_conf})
    lines = [
        "# Accuracy on real footage: dual layer vs. plain Ultralytics",
        "",
        f"Generated by `{command}` (do not edit by hand; re-run it). Secondary check on synthetic clips: "
        "[accuracy_synthetic.md](accuracy_synthetic.md).",
        "",
        "## How it is measured",
        "",
        "- **Sequences**: every real sequence with ground truth in `../shared/data/mot`: UAVDT M1303 (day, oblique, "
        f"all 445 frames; never trained on), UAVDT M1003 night dev (frames {split['scored'][0]}-{split['scored'][1]} "
        f"scored; frames {split['detector_training'][0]}-{split['detector_training'][1]} may train the detector, "
        "frames in between are a 3 s gap) and UAVDT M0703 nadir dev (day, low altitude, moving drone, frames 1-340; "
        "never trained on).",
        "- **Contenders**, same detector weights for all: *plain* = `YOLO(weights).track(frame, tracker=T, "
        f"persist=True, conf=c, imgsz=640)` for both of Ultralytics' trackers (`bytetrack.yaml`, `botsort.yaml` = "
        f"BoT-SORT with its sparse-optical-flow camera-motion compensation, Ultralytics' default), conf swept over "
        f"{confs}; the **strongest plain** on a sequence is the best tracker and conf **on that sequence itself** (the "
        "best a user could pick); *dual* = `airpatrol process` (defaults, and the settings below).",
        "- **Leave-one-sequence-out**: the dual setting reported on a sequence is the candidate (below) with the best "
        "pooled MOTA on the *other* sequences; nothing is tuned on the sequence it is scored on. The shipped default "
        "is listed too when it differs (in-sample).",
        "- **Scoring**: motmetrics, IoU >= 0.5, class-agnostic (vehicles only), predictions and ground truth centred "
        "in UAVDT ignore regions dropped; HOTA from TrackEval. *FP on the border*: share of a contender's false "
        "positives whose box touches the frame's edge (within 2 px): mostly vehicles partly out of view whose boxes "
        "disagree with the ground truth's. ms/frame = whole loop incl. decoding, on this machine (2 CPU cores, other "
        "jobs running: compare times within a run only).",
        f"- **Weights**: `{Path(results['weights']).name}` (sha256 {results['weights_sha256_12']}...).",
        *[f"- Note: {n}" for n in results.get("notes", [])],
        "",
        "## Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
        *[f"| {what} | {measured} | {'yes' if ok else '**no**'} |" for what, measured, ok in t],
        "",
        "## Per sequence",
        "",
        markdown(results, choice),
        "",
        "## Each layer's effect",
        "",
        *_effects(results),
        "",
        "## Detector scale per part of the run (shipped default)",
        "",
        *(_scales(results) or ["- (not recorded in this run)"]),
        "",
        *interchange_markdown(results),
        "## Every dual setting scored",
        "",
        "Leave-one-out picks among the candidates; references are over the cost budget and never picked.",
        "",
        candidates_table(results),
        "",
    ]
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    from vision.detection import DEFAULT_DETECTOR_WEIGHTS

    ap = argparse.ArgumentParser(prog="python -m bench.real", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--weights", type=Path, default=DEFAULT_DETECTOR_WEIGHTS, help="detector weights for every contender"
    )
    ap.add_argument("--plain-confs", type=float, nargs="+", default=[0.1, 0.2, 0.3])
    ap.add_argument("--sequences", nargs="*", help="names (default: all present)")
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "airpatrol" / "bench_real")
    ap.add_argument("--out", type=Path, default=Path("docs/real_accuracy.json"))
    ap.add_argument(
        "--candidates", nargs="+", choices=[*DUAL_CANDIDATES, *DUAL_REFERENCES], help="dual settings (default: all)"
    )
    ap.add_argument("--references", action="store_true", help="also the costly references (plain imgsz 1024, ...)")
    ap.add_argument("--baseline", action="store_true", help="also `airpatrol process --baseline`")
    ap.add_argument(
        "--cost-frames",
        type=int,
        default=0,
        help="frames per sequence for the interleaved CPU-time comparison (bench/real/cost.py); 0: skip it",
    )
    ap.add_argument("--cost-repeats", type=int, default=2)
    ap.add_argument(
        "--interchange-frames", type=int, default=177, help="frames of the 1080p nadir interchange timed (0: skip)"
    )
    ap.add_argument("--markdown", type=Path, default=Path("docs/accuracy.md"), help="report page ('' for none)")
    ap.add_argument(
        "--from-json", type=Path, help="re-write the report from a results file of an earlier run (nothing is measured)"
    )
    args = ap.parse_args(argv)
    if args.from_json:
        results = json.loads(args.from_json.read_text())
        command = results.get("command") or "python -m bench.real"
        write_markdown(results, results["leave_one_out_choice"], args.markdown, command)
        print(f"written: {args.markdown} (from {args.from_json}; code {results.get('code_sha256_12')})")
        return 0
    if not args.weights.is_file():
        print(f"{args.weights}: detector weights not found")
        return 2
    seqs = [s for s in real_sequences() if not args.sequences or s.name in args.sequences]
    if not seqs:
        print("no real sequence with ground truth found (../shared/data/mot missing): nothing to measure")
        return 2
    t0 = time.perf_counter()

    def log(seq, what, r):
        border = r.get("border_fp")
        print(
            f"[{time.perf_counter() - t0:6.0f} s] {seq:12s} {what:28s} MOTA {r['mota']:5.1f} IDF1 {r['idf1']:5.1f} "
            f"FP {r['fp']:5d} (border {border}) FN {r['fn']:5d} IDsw {r['idsw']:3d} {r['ms_per_frame']:6.0f} ms/frame",
            flush=True,
        )

    results = evaluate(
        seqs,
        args.weights,
        args.plain_confs,
        args.cache,
        log,
        references=args.references,
        baseline=args.baseline,
        candidates=args.candidates,
    )
    results["code_sha256_12"] = code_tag()
    if args.cost_frames:
        results["cost"] = {seq.name: measure(seq, args.cost_frames, args.cost_repeats, log=print) for seq in seqs}
    if args.interchange_frames:
        ic = interchange(args.weights, args.interchange_frames, args.cache, log=print)
        if ic:
            results["interchange"] = ic
    choice = leave_one_out(results)
    import sys

    results.update(
        leave_one_out_choice=choice,
        candidates=DUAL_CANDIDATES,
        references=DUAL_REFERENCES,
        command="python -m bench.real " + " ".join(sys.argv[1:]),
        night_split={"scored": NIGHT_SCORED_FRAMES, "detector_training": NIGHT_TRAIN_FRAMES},
        machine={"python": platform.python_version(), "cpu_count": __import__("os").cpu_count()},
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1))
    print(markdown(results, choice))
    print("\n".join(_effects(results)))
    for what, measured, ok in targets(results, choice):
        print(f"{'MET ' if ok else 'MISS'} {what}: {measured}")
    if args.markdown and str(args.markdown) != ".":  # --markdown "" is Path("") = "."
        write_markdown(results, choice, args.markdown, results["command"])
        print(f"written: {args.markdown}")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
