"""Motion over time: tracking, ground-plane speed, and the pipeline that ties every stage together."""
