"""Plotly figures of the study page (built on the server, drawn by the page's bundled plotly.min.js): the O-D
matrix as a heatmap and the vehicles of each movement per time bin."""

from __future__ import annotations

_LAYOUT = dict(margin=dict(l=55, r=15, t=35, b=45), template="plotly_white")


def od_heatmap(labels: list[str], matrix: list[list[int]], names: dict[str, str]) -> str:
    import plotly.graph_objects as go

    text = [[str(v) if v else "" for v in row] for row in matrix]
    axis = [f"{k} {names[k]}" if k in names and names[k] != k else k for k in labels]
    fig = go.Figure(
        go.Heatmap(
            z=matrix,
            x=axis,
            y=axis,
            text=text,
            texttemplate="%{text}",
            colorscale="Blues",
            hovertemplate="from %{y} to %{x}: %{z} vehicles<extra></extra>",
            colorbar=dict(title="vehicles", thickness=12),
        )
    )
    fig.update_layout(
        title="origin-destination (vehicles)",
        xaxis=dict(title="destination", side="bottom", type="category"),
        yaxis=dict(title="origin", autorange="reversed", type="category"),
        height=320,
        **_LAYOUT,
    )
    return fig.to_json()


def movement_series(starts: list[float], series: dict[str, list[int]], bin_s: float, bin_label: str) -> str:
    import plotly.graph_objects as go

    fig = go.Figure([go.Bar(x=starts, y=ys, name=name, offset=0, width=bin_s * 0.9) for name, ys in series.items()])
    fig.update_layout(
        barmode="stack",
        title=f"vehicles per {bin_label} by movement",
        xaxis_title="video time (s)",
        yaxis_title="vehicles",
        height=320,
        legend=dict(orientation="h", y=-0.25),
        **_LAYOUT,
    )
    return fig.to_json()
