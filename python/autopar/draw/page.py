"""Page assembly: the header and tables, and the whole HTML page or standalone SVG."""

import os

from .breakdown import breakdown_svg
from .format import (DASH, _human, esc, fmt_count, fmt_gib, fmt_ms, fmt_pct, fmt_time)
from .memory import memory_caption, memory_svg
from .svg import FONT, inline_svg, standalone_svg
from .timeline import (NO_STAGE_ORDERS, _schedule_name, build_timeline, timeline_caption,
                       timeline_svg)


def _header_rows(report):
    r, p = report, report.predicted
    mem = fmt_gib(p.memory_per_gpu_bytes)
    if r.device_memory_bytes:
        mem += (f" of {fmt_gib(r.device_memory_bytes)} "
                f"({100 * p.memory_per_gpu_bytes / r.device_memory_bytes:.0f}%)")
    sched = {"gpipe": "GPipe", "1f1b": "1F1B"}.get(r.schedule, r.schedule)
    rows = [
        ("Model", esc(r.model)),
        ("Mode, precision", f"{esc(r.mode)}, {esc(r.precision)}"),
        ("Mesh dp \u00d7 tp \u00d7 pp",
         f"<b>{r.mesh.dp} \u00d7 {r.mesh.tp} \u00d7 {r.mesh.pp}</b> = {r.world_size} GPUs"),
        ("ZeRO stage", str(r.zero_stage)),
        ("Micro-batches", f"{r.num_micro_batches} \u00d7 {r.micro_batch_size} "
                          f"sequence{'s' if r.micro_batch_size > 1 else ''} "
                          f"(global batch {r.global_batch_size:,} = dp {r.mesh.dp} \u00d7 "
                          f"{r.num_micro_batches} \u00d7 {r.micro_batch_size})"),
        ("Recompute", esc(r.recompute)),
        ("Schedule", esc(sched)),
    ]
    if r.placement_summary:
        # Which nodes the tp groups, dp groups and stages span (autopar-run's rank order).
        rows.insert(rows.index(("ZeRO stage", str(r.zero_stage))),
                    ("Placement", esc(r.placement_summary)))
    if r.cluster or r.device:
        rows.insert(1, ("Cluster", esc(r.cluster or "") +
                        (f" ({esc(r.device)})" if r.device and r.cluster else
                         esc(r.device) if r.device else "")))
    if r.parameters:
        rows.insert(1, ("Parameters", f"{r.parameters:,} ({_human(r.parameters)})"))
    rows2 = [
        ("Predicted step time", f"<b>{fmt_time(p.step_time_s)}</b>"),
        ("Throughput", f"<b>{fmt_count(p.tokens_per_s)}</b> tokens/s"),
        ("TFLOP/s per GPU", "\u2013" if p.tflops_per_gpu is None else f"{p.tflops_per_gpu:.1f}"),
        ("MFU", f"<b>{fmt_pct(p.mfu)}</b>"),
        ("Bubble fraction", fmt_pct(p.bubble_fraction) + (
            f" (bubble = {fmt_pct(bub / p.step_time_s)} of the step)"
            if (bub := p.step_time_breakdown_s.get("bubble")) is not None and p.step_time_s
            else "")),
        ("Memory per GPU", mem),
        ("Search time", fmt_time(r.search_time_s) + _search_stats(r.search)),
    ]
    return rows, rows2


def _search_stats(search):
    """' (1,234 candidates, 96 segments, 1 distinct)' from the report's search object."""
    parts = []
    for key, label in (("candidates_evaluated", "candidates"), ("segments", "segments"),
                       ("distinct_segments", "distinct")):
        v = search.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            parts.append(f"{v:,.0f} {label}")
    return f" ({', '.join(parts)})" if parts else ""


def _node_range(first, last):
    """'3' or '0-7'."""
    return str(first) if first == last else f"{first}-{last}"


def _kv_table(rows):
    return "<table class=kv>" + "".join(
        f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _stages_table(report):
    if not report.stages:
        return ""
    times = any(s.forward_s is not None for s in report.stages)
    mem = any(s.memory_breakdown_bytes for s in report.stages)
    nodes = report.stage_nodes
    head = "<tr><th>stage</th><th>layers</th><th>ONNX nodes</th>"
    if nodes:
        head += "<th>nodes</th>"
    if times:
        head += "<th>forward / micro-batch</th><th>backward / micro-batch</th>"
    if mem:
        head += "<th>peak memory</th>"
    rows = [head + "</tr>"]
    for s in report.stages:
        row = (f"<tr><td class=num>{s.stage}</td><td>{esc(s.layers or '')}</td>"
               f"<td class=num>{'' if s.onnx_nodes is None else f'{s.onnx_nodes:,}'}</td>")
        if nodes:
            row += f"<td class=num>{_node_range(*nodes[s.stage])}</td>"
        if times:
            row += (f"<td class=num>{'' if s.forward_s is None else fmt_ms(s.forward_s)}</td>"
                    f"<td class=num>{'' if s.backward_s is None else fmt_ms(s.backward_s)}</td>")
        if mem:
            mb = s.memory_breakdown_bytes
            row += f"<td class=num>{fmt_gib(sum(mb.values())) if mb else ''}</td>"
        rows.append(row + "</tr>")
    return "<table class=grid>" + "".join(rows) + "</table>"


def _alternatives_table(report):
    r, p = report, report.predicted
    head = ("<tr><th></th><th>dp\u00d7tp\u00d7pp</th><th>ZeRO</th>"
            "<th>micro-batches<br>count \u00d7 size</th><th>recompute</th><th>step time</th>"
            "<th>tokens/s</th><th>MFU</th>"
            "<th>memory / GPU</th><th>why not</th></tr>")

    def row(tag, mesh, zero, mbs, rc, pr, why, cls=""):
        rel = ""
        if pr.step_time_s and p.step_time_s and tag != "chosen":
            d = pr.step_time_s / p.step_time_s - 1
            rel = f' <span class=rel>({"+" if d >= 0 else ""}{100 * d:.1f}%)</span>'
        mem = fmt_gib(pr.memory_per_gpu_bytes)
        if pr.fits is False or (r.device_memory_bytes and pr.memory_per_gpu_bytes and
                                pr.memory_per_gpu_bytes > r.device_memory_bytes):
            mem = f"<span class=over>{mem}</span>"
        size, count = mbs
        mbs = None if size is None and count is None else \
            f"{DASH if count is None else count} \u00d7 {DASH if size is None else size}"
        return (f"<tr{cls}><td>{tag}</td><td>{esc(mesh) if mesh else DASH}</td>"
                f"<td class=num>{DASH if zero is None else zero}</td>"
                f"<td class=num>{DASH if mbs is None else mbs}</td>"
                f"<td>{esc(rc) if rc else DASH}</td>"
                f"<td class=num>{fmt_time(pr.step_time_s)}{rel}</td>"
                f"<td class=num>{fmt_count(pr.tokens_per_s)}</td>"
                f"<td class=num>{fmt_pct(pr.mfu)}</td><td class=num>{mem}</td>"
                f"<td class=why>{why}</td></tr>")

    rows = [head, row("chosen", str(r.mesh), r.zero_stage,
                      (r.micro_batch_size, r.num_micro_batches), r.recompute,
                      p, "", " class=chosen")]
    for i, a in enumerate(r.alternatives):
        rows.append(row(f"alt {i + 1}", str(a.mesh) if a.mesh else None, a.zero_stage,
                        (a.micro_batch_size, a.num_micro_batches), a.recompute, a.predicted,
                        esc(a.why_not) if a.why_not else "<i>(not given)</i>"))
    return "<table class=grid>" + "".join(rows) + "</table>"


CSS = """
body{%s;margin:24px;color:#222;max-width:1140px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
.sub{color:#555;margin-bottom:16px}
.cols{display:flex;gap:32px;flex-wrap:wrap}
table{border-collapse:collapse;font-size:13px}
table.kv th{text-align:left;font-weight:normal;color:#555;padding:3px 14px 3px 0;white-space:nowrap}
table.kv td{padding:3px 0}
table.grid th{background:#f2f2f2;text-align:left;padding:5px 8px;border-bottom:1px solid #ccc}
table.grid td{padding:4px 8px;border-bottom:1px solid #e6e6e6;vertical-align:top}
td.num{text-align:right;white-space:nowrap} td.why{max-width:420px}
tr.chosen td{background:#eef4fb;font-weight:600}
.rel{color:#777;font-weight:normal} .over{color:#c62828;font-weight:600}
figure{margin:0}
figcaption{font-size:12.5px;color:#444;max-width:1100px;line-height:1.45;margin-top:4px}
.warn{background:#fff6d6;border:1px solid #e6c955;padding:8px 12px;margin:12px 0;font-size:13px}
.foot{color:#888;font-size:11px;margin-top:28px}
""" % FONT


def _timeline_figure(report, tl):
    """The pipeline schedule's figure, or why there is none (no stage_orders)."""
    if tl is None:
        return f"<p>{esc(NO_STAGE_ORDERS)}</p>"
    return ("<figure>" + inline_svg(*timeline_svg(report, tl)) +
            f"<figcaption>{timeline_caption(report, tl)}</figcaption></figure>")


def render_html(report, title=None, source=None):
    """The whole page as a string.  Raises PlanReportError when the report's stage_orders
    cannot run (a step waits for one that never runs)."""
    tl = build_timeline(report)
    b_svg = breakdown_svg(report)
    m_svg = memory_svg(report)
    title = title or f"autopar plan \u2013 {report.model}"
    pred = report.predicted
    rows1, rows2 = _header_rows(report)
    warn = ""
    if report.warnings:
        warn = ('<div class=warn><b>Report inconsistencies:</b><ul>' +
                "".join(f"<li>{esc(w)}</li>" for w in report.warnings) + "</ul></div>")
    sub = (f"{esc(report.mode)} \u00b7 {esc(report.precision)} \u00b7 {report.world_size} GPUs "
           f"\u00b7 predicted {fmt_time(pred.step_time_s)} per step, MFU {fmt_pct(pred.mfu)}")
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1><div class=sub>{sub}</div>",
        f"<div class=cols>{_kv_table(rows1)}{_kv_table(rows2)}</div>",
        warn,
        "<h2>Pipeline schedule</h2>", _timeline_figure(report, tl),
        "<h2>Step time breakdown</h2><figure>", inline_svg(*b_svg),
        "<figcaption>Predicted time of one step by component (predicted."
        "step_time_breakdown_s); the bubble is idle pipeline time.</figcaption></figure>",
        "<h2>Memory per GPU</h2><figure>", inline_svg(*m_svg),
        f"<figcaption>{memory_caption(report)}</figcaption></figure>",
    ]
    if report.stages:
        parts += ["<h2>Pipeline stages</h2>", _stages_table(report)]
    parts += ["<h2>Alternatives</h2>",
              _alternatives_table(report) if report.alternatives else
              "<p>The report lists no alternatives.</p>"]
    foot = "Drawn by autopar.draw"
    if source:
        foot += f" from {esc(os.path.basename(source))}"
    parts += [f"<div class=foot>{foot}.</div></body></html>\n"]
    return "".join(parts)


def render_svg(report, title=None):
    """The pictures as one standalone SVG; the pipeline schedule is only a heading saying
    why it is not drawn when the report has no stage_orders."""
    tl = build_timeline(report)
    b, bw, bh = breakdown_svg(report)
    m, mw, mh = memory_svg(report)
    p = report.predicted
    title = title or (f"autopar plan \u2013 {report.model}: dp\u00d7tp\u00d7pp {report.mesh}, "
                      f"ZeRO {report.zero_stage}, {report.num_micro_batches}\u00d7"
                      f"{report.micro_batch_size} micro-batches, {fmt_time(p.step_time_s)}/step, "
                      f"MFU {fmt_pct(p.mfu)}")
    panels = [(b, bw, bh, "Step time breakdown"), (m, mw, mh, "Memory per GPU")]
    if tl is None:
        panels.insert(0, ("", 0, 0, "Pipeline schedule: not drawn, the report lists no "
                                    "stage_orders (written before autopar-compile did)"))
    else:
        t, tw, th = timeline_svg(report, tl)
        sched = _schedule_name(report, tl.schedule)
        note = " (stages assumed balanced)" if tl.source == "balanced" else ""
        panels.insert(0, (t, tw, th, f"Pipeline schedule ({sched}){note}"))
    return standalone_svg(panels, title=title)
