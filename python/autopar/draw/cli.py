"""The command line: python3 -m autopar.draw REPORT.json -o plan.html (or autopar-draw)."""

import argparse
import os
import sys

from .. import plan as planlib
from .page import render_html, render_svg


def main(argv=None, prog=None):
    ap = argparse.ArgumentParser(
        prog=prog,
        description="Draw an autopar plan report (--report-json) as an HTML page.")
    ap.add_argument("report", help="plan report JSON written by autopar-compile --report-json")
    ap.add_argument("-o", "--output", help="HTML file to write (default: REPORT with .html)")
    ap.add_argument("--svg", metavar="FILE", help="also write the pictures as one SVG file")
    ap.add_argument("--title", help="page title (default: 'autopar plan - MODEL')")
    args = ap.parse_args(argv)
    try:
        report = planlib.load(args.report)
        # Drawn before anything is written: stage orders that cannot run are an error.
        page = render_html(report, args.title, source=args.report)
        svg = render_svg(report, args.title) if args.svg else None
    except planlib.PlanReportError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    out = args.output or os.path.splitext(args.report)[0] + ".html"
    with open(out, "w", encoding="utf-8") as f:
        f.write(page)
    print(f"wrote {out}")
    if svg is not None:
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(svg)
        print(f"wrote {args.svg}")
    for w in report.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0
