"""The console page (``GET /``) and the figures it polls (``GET /api/console``).

Modelled on CockroachDB's DB Console Jobs and Changefeeds pages: a table of every YDB changefeed
and CockroachDB job (state, what the pipeline is doing, high water, lag, messages, errors), and
two plots over the last hour, emitted messages per second and lag per feed, that update live
(the page polls every :data:`POLL_MS` ms and redraws with ``Plotly.react``). The charting library
is plotly.js from the installed ``plotly`` Python package (``package_data/plotly.min.js``),
served by the endpoint itself: no CDN, and it works for a pip-installed changefeed.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Sequence
from typing import Any

from changefeed.feeds.status import FeedStatus
from changefeed.observe.metrics import SAMPLE_S, Metrics

POLL_MS = 2000


def plotly_js() -> bytes:
    """plotly.min.js from the installed ``plotly`` package (empty when it is missing)."""
    try:
        return (importlib.resources.files("plotly") / "package_data" / "plotly.min.js").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        return b""


def data(statuses: Sequence[FeedStatus], metrics: Metrics, node: dict[str, Any]) -> dict[str, Any]:
    figures = metrics.snapshot()
    feeds = []
    series: dict[str, dict[str, list[Any]]] = {}
    for s in statuses:
        f = figures.get(s.label)
        row = s.to_json()
        row.update(
            emitted_messages=f.emitted_messages if f else 0,
            emitted_bytes=f.emitted_bytes if f else 0,
            error_retries=f.error_retries if f else 0,
            commit_latency_p50_s=_q(f, 0.5),
            commit_latency_p99_s=_q(f, 0.99),
        )
        feeds.append(row)
        if f is not None and f.history:
            pts = list(f.history)
            series[s.label] = {
                "t": [p[0] * 1000 for p in pts],
                "rate": [round(p[1] / SAMPLE_S, 3) for p in pts],
                "lag": [None if p[2] is None else round(p[2], 3) for p in pts],
            }
    endpoints = metrics.endpoint_snapshot()
    node = dict(node)
    node["endpoints"] = [
        {
            "name": name,
            "address": addr,
            "connections": endpoints[name].connections if name in endpoints else 0,
            "requests": endpoints[name].requests if name in endpoints else 0,
            "errors": endpoints[name].errors if name in endpoints else 0,
        }
        for name, addr in dict(node.get("endpoints", {})).items()
    ]
    return {"node": node, "feeds": feeds, "series": series, "sample_s": SAMPLE_S}


def _q(f: Any, q: float) -> float | None:
    if f is None:
        return None
    v = f.commit_latency.quantile(q)
    return None if v is None or v == float("inf") else round(v / 1e9, 3)


PAGE = (
    b"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>changefeed console</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#242a35;background:#f5f7fa}
header{background:#0b1d39;color:#fff;padding:12px 24px;display:flex;gap:24px;align-items:baseline}
header h1{font-size:18px;margin:0}
header .meta{font-size:13px;opacity:.8}
main{padding:16px 24px}
h2{font-size:15px;margin:20px 0 8px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e3e7ee;white-space:nowrap}
th{background:#eef1f6;font-weight:600}
td.err{color:#c0392b;white-space:normal;max-width:420px}
td.rs{white-space:normal;max-width:300px}
.state{padding:2px 8px;border-radius:10px;font-size:12px}
.s-running{background:#d4f4e2;color:#146c3a}.s-scanning{background:#dde9ff;color:#1d4ed8}
.s-paused,.s-pause-requested{background:#fff1c2;color:#8a5a00}
.s-failed,.s-canceled{background:#fde2e1;color:#a61b1b}.s-succeeded,.s-done{background:#e8e8e8;color:#444}
.plots{display:grid;grid-template-columns:1fr 1fr;gap:16px}
.plot{background:#fff;height:320px}
#endpoints td,#endpoints th{width:auto}
.muted{color:#7a8394}
</style>
<script src="/static/plotly.min.js"></script>
</head><body>
<header><h1>changefeed</h1><span class="meta" id="node"></span><span class="meta" id="ready"></span></header>
<main>
<h2>Changefeeds and jobs</h2>
<table id="feeds"><thead><tr>
<th>feed / job</th><th>kind</th><th>table</th><th>topic</th><th>state</th><th>running status</th>
<th>high water</th><th>lag</th><th>messages</th><th>commit latency p99</th><th>retries</th><th>error</th>
</tr></thead><tbody></tbody></table>
<h2>Last hour</h2>
<div class="plots"><div class="plot" id="throughput"></div><div class="plot" id="lag"></div></div>
<h2>Endpoints</h2>
<table id="endpoints"><thead><tr><th>endpoint</th><th>address</th><th>connections</th><th>requests</th><th>errors</th></tr></thead><tbody></tbody></table>
</main>
<script>
"use strict";
const POLL_MS = """
    + str(POLL_MS).encode()
    + b""";
function esc(s){return String(s===null||s===undefined?"":s).replace(/[&<>"]/g,c=>({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;"}[c]));}
function hw(f){const w=f.high_water.wall; if(!w) return ""; const d=new Date(w/1e6); return d.toISOString().replace("T"," ").replace("Z"," UTC");}
function lag(s){if(!s) return "0 s"; if(s<60) return s.toFixed(3)+" s"; if(s<3600) return (s/60).toFixed(1)+" min"; return (s/3600).toFixed(1)+" h";}
function row(f){
  return "<tr data-feed=\\""+esc(f.label)+"\\"><td>"+esc(f.label)+"</td><td>"+esc(f.kind)+"</td><td>"+esc(f.table)+"</td><td>"+esc(f.topic)+
    "</td><td><span class=\\"state s-"+esc(f.state)+"\\">"+esc(f.state)+"</span></td><td class=rs>"+esc(f.running_status)+
    "</td><td title=\\""+esc(f.high_water_crdb)+"\\">"+esc(hw(f))+"</td><td>"+esc(lag(f.lag_s))+"</td><td>"+esc(f.emitted_messages)+
    "</td><td>"+(f.commit_latency_p99_s===null?"<span class=muted>-</span>":"&le; "+esc(f.commit_latency_p99_s)+" s")+
    "</td><td>"+esc(f.error_retries)+"</td><td class=err>"+esc(f.error)+"</td></tr>";
}
const layout=(title,unit)=>({title:{text:title,font:{size:14}},margin:{l:50,r:10,t:40,b:40},
  xaxis:{type:"date"},yaxis:{title:{text:unit},rangemode:"tozero"},legend:{orientation:"h"},showlegend:true});
function traces(series,key){
  return Object.keys(series).sort().map(k=>({x:series[k].t.map(t=>new Date(t)),y:series[k][key],name:k,mode:"lines+markers",type:"scatter",marker:{size:4}}));
}
async function refresh(){
  let d;
  try{ const r=await fetch("/api/console",{cache:"no-store"}); d=await r.json(); }
  catch(e){ document.getElementById("ready").textContent="node unreachable"; return; }
  const n=d.node;
  document.getElementById("node").textContent=n.db;
  document.getElementById("ready").textContent=n.ready?"ready":"not ready: "+n.not_ready.join("; ");
  document.querySelector("#feeds tbody").innerHTML=d.feeds.map(row).join("")||"<tr><td colspan=12 class=muted>no changefeeds</td></tr>";
  document.querySelector("#endpoints tbody").innerHTML=n.endpoints.map(e=>"<tr><td>"+esc(e.name)+"</td><td>"+esc(e.address)+"</td><td>"+esc(e.connections)+"</td><td>"+esc(e.requests)+"</td><td>"+esc(e.errors)+"</td></tr>").join("");
  if(window.Plotly){
    Plotly.react("throughput",traces(d.series,"rate"),layout("Emitted messages per second","messages/s"),{displaylogo:false,responsive:true});
    Plotly.react("lag",traces(d.series,"lag"),layout("Lag (now minus high water)","seconds"),{displaylogo:false,responsive:true});
  }
}
refresh(); setInterval(refresh,POLL_MS);
</script>
</body></html>
"""
)
