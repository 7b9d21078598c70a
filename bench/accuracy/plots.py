"""PNG plots of an accuracy run (matplotlib, Agg backend): per-sequence bars dual vs. baseline, and MOTA by
altitude / resolution / camera motion (the spread targets)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

COLOURS = {"dual": "#1f77b4", "baseline": "#ff7f0e"}
LABELS = {"dual": "dual-layer", "baseline": "baseline (YOLOv8 + ByteTrack)"}

# (file stem, title, y label, metric getter, scale)
PER_SEQUENCE = (
    ("accuracy_mota", "MOTA", "MOTA (%)", lambda m: m.get("mota"), 100.0),
    ("accuracy_fp_rate", "False positives per frame", "FP / frame", lambda m: m.get("fp_per_frame"), 1.0),
    ("accuracy_fn_rate", "Misses (false negatives) per frame", "FN / frame", lambda m: m.get("fn_per_frame"), 1.0),
    ("accuracy_idf1", "IDF1", "IDF1 (%)", lambda m: m.get("idf1"), 100.0),
    (
        "accuracy_speed_mae",
        "Speed MAE, vehicles tracked >= 1 s",
        "MAE (km/h)",
        lambda m: (m.get("speed") or {}).get("mae_kmh"),
        1.0,
    ),
    ("accuracy_time_per_frame", "Time per frame (this machine)", "ms / frame", lambda m: m.get("ms_per_frame"), 1.0),
)


def _bars(ax, labels: list[str], series: dict[str, list[float | None]], scale: float) -> None:
    x = np.arange(len(labels))
    w = 0.4
    for k, (mode, vals) in enumerate(series.items()):
        ys = [np.nan if v is None else v * scale for v in vals]
        ax.bar(x + (k - 0.5) * w, ys, w, label=LABELS[mode], color=COLOURS[mode])
        for xi, yi in zip(x + (k - 0.5) * w, ys):
            if np.isnan(yi):
                ax.text(xi, 0, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(x, labels, rotation=45, ha="right", fontsize=8)
    ax.axhline(0, color="black", linewidth=0.6)
    ax.grid(axis="y", alpha=0.3)


def write_plots(results: dict, img_dir: Path) -> list[Path]:
    """All plots into ``img_dir``; returns their paths."""
    img_dir = Path(img_dir)
    img_dir.mkdir(parents=True, exist_ok=True)
    seqs = results["sequences"]
    overall = results["aggregates"]["overall"]
    labels = [r["name"] for r in seqs] + [f"pooled: {k}" for k in overall]
    out = []
    for stem, title, ylabel, get, scale in PER_SEQUENCE:
        series = {
            mode: [get(r["modes"][mode]) for r in seqs] + [get(p[mode]) for p in overall.values()]
            for mode in ("dual", "baseline")
        }
        fig, ax = plt.subplots(figsize=(max(7.0, 0.55 * len(labels) + 2), 4.2))
        _bars(ax, labels, series, scale)
        ax.axvline(len(seqs) - 0.5, color="grey", linestyle="--", linewidth=0.8)  # sequences | pooled rows
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = img_dir / f"{stem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    out += _factor_plots(results, img_dir)
    return out


def _factor_plots(results: dict, img_dir: Path) -> list[Path]:
    agg = results["aggregates"]
    by_name = {r["name"]: r for r in results["sequences"]}
    out = []
    for factor, title in (
        ("altitude", "MOTA by altitude (1280x720, steady camera)"),
        ("resolution", "MOTA by resolution (80 m, steady camera)"),
        ("jitter", "MOTA with / without camera jitter (80 m, 1280x720)"),
    ):
        levels = agg.get(f"by_{factor}") or {}
        if not levels:
            continue
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        xs = np.arange(len(levels))
        for mode in ("dual", "baseline"):
            pooled = [100 * (p[mode]["mota"] if p[mode]["mota"] is not None else np.nan) for p in levels.values()]
            ax.plot(xs, pooled, "-o", color=COLOURS[mode], linewidth=2.5, label=f"{LABELS[mode]} (pooled)")
            scenes = sorted({by_name[n]["factors"]["scene"] for p in levels.values() for n in p["sequences"]})
            for scene in scenes:  # thin lines: each scene on its own, to show the spread behind the pooled value
                ys = []
                for p in levels.values():
                    m = [
                        by_name[n]["modes"][mode]["mota"]
                        for n in p["sequences"]
                        if by_name[n]["factors"]["scene"] == scene
                    ]
                    ys.append(100 * m[0] if m and m[0] is not None else np.nan)
                ax.plot(xs, ys, ":", marker=".", color=COLOURS[mode], alpha=0.5, linewidth=1)
                ax.annotate(
                    scene,
                    (xs[-1], ys[-1]),
                    fontsize=6,
                    color=COLOURS[mode],
                    alpha=0.7,
                    xytext=(3, 0),
                    textcoords="offset points",
                )
        d = [p["dual"]["mota"] for p in levels.values() if p["dual"]["mota"] is not None]
        if len(d) >= 2:
            ax.set_title(f"{title}\ndual spread {100 * (max(d) - min(d)):.1f} points (target <= 10)", fontsize=10)
        else:
            ax.set_title(title, fontsize=10)
        ax.set_xticks(xs, list(levels))
        ax.set_ylabel("MOTA (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best", framealpha=0.6)
        fig.tight_layout()
        path = img_dir / f"accuracy_mota_by_{factor}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        out.append(path)
    return out
