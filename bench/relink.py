"""Link a processed run's tracks again without processing its video again: a development loop for the linking.

A five-minute render takes 15-25 minutes through ``airpatrol process`` on two cores; the linking
(tracking/linking.py, tracking/linked_run.py) runs once, after the flight, on the pipeline's results. ``dump`` runs
``airpatrol process`` and also keeps those results, as they were before linking, in a file (no images: some hundred
bytes a box); ``relink`` links them again with the working tree's code and any ``linking`` settings, writes the
run's track files through the sinks ``process`` uses (with the same code and settings, byte-identical to its own),
and studies the run. A minute or two a render instead of twenty:

    python3 bench/relink.py dump PRELINK -- process VIDEO --out RUN --no-video -q
    python3 bench/relink.py relink PRELINK RUN OUT --set max_gap_s=20 --set driven_through=false
    python3 bench/study.py --e2e --work /tmp/e2e_real --runs-dir OUTS --skip-render --verbose

The file is a pickle of the pipeline's frame results: read it with the code that wrote it or a close one, and only
files you made.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import yaml
from pydantic import ValidationError

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from edge.sinks.files import GeoJSONSink, MOTSink, TrackCSVSink, TrackSummarySink  # noqa: E402
from tracking.linked_run import link_results  # noqa: E402
from tracking.linking import LinkingConfig  # noqa: E402
from tracking.types import FrameResult, RunInfo, Sink  # noqa: E402


def dump(prelink: Path, cli_args: list[str]) -> int:
    """``airpatrol CLI_ARGS`` with the frame results handed to the linking also written to ``prelink``."""
    import edge.runner as runner
    from edge.cli import main

    link = runner.link_results

    def keep_then_link(results: list[FrameResult], width: int, height: int, cfg=None):
        slim = [
            dataclasses.replace(r, tracks=copy.deepcopy(r.tracks), withheld=copy.deepcopy(r.withheld)) for r in results
        ]
        with open(prelink, "wb") as fh:
            pickle.dump((slim, width, height), fh, protocol=5)
        return link(results, width, height, cfg)

    runner.link_results = keep_then_link
    sys.argv = ["airpatrol", *cli_args]
    try:
        main()
    except SystemExit as done:  # typer exits with the command's status
        return int(done.code or 0) if not isinstance(done.code, str) else 1
    return 0


def settings(pairs: list[str]) -> LinkingConfig:
    """``KEY=VALUE`` pairs (values read as YAML: numbers, true/false, null) as a :class:`LinkingConfig`."""
    values = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set {pair}: expected KEY=VALUE (a linking setting, e.g. max_gap_s=20)")
        values[key.strip().removeprefix("linking.")] = yaml.safe_load(value)
    try:
        return LinkingConfig(**values)
    except ValidationError as bad:
        first = bad.errors()[0]
        raise SystemExit(f"--set {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def relink(prelink: Path, run: Path, out: Path, cfg: LinkingConfig, study: bool = True) -> dict:
    """``run`` copied to ``out`` (its study left out) with its tracks linked again from ``prelink``; returns the
    linking report. ``study``: then ``airpatrol study OUT``."""
    try:
        with open(prelink, "rb") as fh:
            results, width, height = pickle.load(fh)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as bad:
        raise SystemExit(f"{prelink}: not a file of results before linking ({type(bad).__name__}: {bad})") from None
    summary = json.loads((run / "summary.json").read_text())
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("study"))
    report = link_results(results, width, height, cfg)
    summary["linking"] = report.as_dict()
    video = summary.get("video") if isinstance(summary.get("video"), dict) else {}
    info = RunInfo(
        str(video.get("path", "")),
        width,
        height,
        float(video.get("fps") or summary.get("fps") or 25.0),
        len(results),
        summary.get("config", {}),
        str(summary.get("weights", "")),
        "dual_layer",
        "cpu",
    )
    sinks: list[Sink] = [MOTSink(out), TrackCSVSink(out), TrackSummarySink(out), GeoJSONSink(out)]
    for s in sinks:
        s.open(info)
    for r in results:
        for s in sinks:
            s.write(r)
    for s in sinks:
        s.close(summary)
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=_plain))
    if study:
        subprocess.run([sys.executable, "-m", "edge.cli", "study", str(out)], cwd=REPO, check=True)
    return report.as_dict()


def _plain(value):
    return value.item() if isinstance(value, np.generic) else str(value)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump", help="airpatrol ARGS, keeping the results before linking in PRELINK")
    d.add_argument("prelink", type=Path)
    d.add_argument(
        "cli", nargs=argparse.REMAINDER, help="-- then the airpatrol arguments (process VIDEO --out RUN ...)"
    )
    r = sub.add_parser("relink", help="link PRELINK again into a copy of RUN, then study it")
    r.add_argument("prelink", type=Path)
    r.add_argument("run", type=Path, help="the run PRELINK came from (summary.json and the rest are copied)")
    r.add_argument("out", type=Path, help="the relinked run (replaced if it exists)")
    r.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a linking setting (repeatable)")
    r.add_argument("--no-study", action="store_true")
    args = ap.parse_args(argv)
    if args.command == "dump":
        cli = args.cli[1:] if args.cli[:1] == ["--"] else args.cli
        return dump(args.prelink, cli)
    for path in (args.prelink, args.run / "summary.json"):
        if not path.is_file():
            print(f"{path}: not found", file=sys.stderr)
            return 2
    report = relink(args.prelink, args.run, args.out, settings(args.set), study=not args.no_study)
    print(f"{args.out}: {report['tracks_before']} pieces -> {report['tracks_after']} tracks, {report['links']} links")
    return 0


if __name__ == "__main__":
    sys.exit(main())
