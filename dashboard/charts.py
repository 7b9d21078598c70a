"""Plotly figures built on the server (plotly's Python package); the page draws them with the bundled plotly.min.js.

Each function returns the figure as JSON text (plotly's own encoder), ready for ``Plotly.newPlot(el, data, layout)``.
"""

from __future__ import annotations

from tracking.types import lower_bound_kmh

_LAYOUT = dict(margin=dict(l=50, r=15, t=35, b=40), template="plotly_white", height=300)


def _go():
    import plotly.graph_objects as go

    return go


def speed_profile(
    times: list[float],
    speeds: list[float | None],
    title: str | None = None,
    limit_kmh: float | None = None,
    sigmas: list[float | None] | None = None,
) -> str:
    """Speed over video time; with ``sigmas`` a shaded band of speed ± σ (the measurement's own uncertainty) and,
    when a limit is drawn, the line speed − 2σ: a violation needs that line above the limit for long enough."""
    go = _go()
    fig = go.Figure()
    sigmas = sigmas if sigmas is not None else []
    has_sigma = any(s is not None and v is not None for s, v in zip(sigmas, speeds))
    if has_sigma:
        lo = [None if v is None or s is None else max(0.0, v - s) for v, s in zip(speeds, sigmas)]
        hi = [None if v is None or s is None else v + s for v, s in zip(speeds, sigmas)]
        fig.add_trace(
            go.Scatter(
                x=times, y=hi, mode="lines", line=dict(width=0), showlegend=False, hoverinfo="skip", connectgaps=False
            )
        )
        fig.add_trace(
            go.Scatter(
                x=times,
                y=lo,
                mode="lines",
                line=dict(width=0),
                fill="tonexty",
                fillcolor="rgba(11,114,133,0.2)",
                name="± σ",
                hoverinfo="skip",
                connectgaps=False,
            )
        )
    fig.add_trace(
        go.Scatter(
            x=times,
            y=speeds,
            mode="lines+markers",
            marker=dict(size=3),
            name="speed",
            line=dict(color="#0b7285"),
            connectgaps=False,
        )
    )
    if has_sigma and limit_kmh:
        low = [None if v is None or s is None else lower_bound_kmh(v, s) for v, s in zip(speeds, sigmas)]
        fig.add_trace(
            go.Scatter(
                x=times,
                y=low,
                mode="lines",
                name="speed − 2σ (violation test)",
                line=dict(color="#0b7285", dash="dot", width=1),
                connectgaps=False,
            )
        )
    if limit_kmh:
        fig.add_hline(y=limit_kmh, line=dict(color="#c0392b", dash="dash"), annotation_text=f"limit {limit_kmh:g} km/h")
    fig.update_layout(
        title=title,
        xaxis_title="video time (s)",
        yaxis_title="speed (km/h)",
        **{**_LAYOUT, "height": 250, "margin": dict(l=50, r=15, t=30, b=40)},
    )
    return fig.to_json()


def flight_telemetry(times: list[float], altitude: list, speed_kmh: list, battery: list) -> str:
    """Altitude, ground speed and battery over flight time, one panel each (a missing series says so)."""
    go = _go()
    from plotly.subplots import make_subplots

    series = [("altitude above take-off (m)", altitude), ("ground speed (km/h)", speed_kmh), ("battery (%)", battery)]
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.08,
        subplot_titles=[
            name if any(v is not None for v in values) else f"{name}: not in this log" for name, values in series
        ],
    )
    for row, (name, values) in enumerate(series, start=1):
        fig.add_trace(go.Scatter(x=times, y=values, mode="lines", name=name, showlegend=False), row=row, col=1)
    fig.update_xaxes(title_text="flight time (s)", row=3, col=1)
    fig.update_layout(**{**_LAYOUT, "height": 620})
    return fig.to_json()


def speed_histogram(
    groups: list[tuple[str, list[float]]],
    title: str = "median speed of moving vehicles",
    limit_kmh: float | None = None,
) -> str:
    go = _go()
    fig = go.Figure()
    for label, values in groups:
        fig.add_trace(
            go.Histogram(x=values, name=f"{label} (n={len(values)})", opacity=0.65, xbins=dict(size=5), bingroup=1)
        )
    if limit_kmh:
        over = sum(v > limit_kmh for _, values in groups for v in values)
        fig.add_vline(
            x=limit_kmh,
            line=dict(color="#c0392b", dash="dash", width=2),
            annotation_text=f"limit {limit_kmh:g} km/h ({over} above)",
            annotation_position="top right",
        )
    fig.update_layout(title=title, barmode="overlay", xaxis_title="km/h", yaxis_title="vehicles", **_LAYOUT)
    return fig.to_json()
