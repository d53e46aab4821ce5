"""The report page's stylesheet, inlined into every page: a light and a dark scheme (the
reader's ``prefers-color-scheme``), one column on a phone, and print rules (no colours
that waste ink, no link targets hidden)."""

from __future__ import annotations

from typing import Final

STYLE: Final = """
:root{--bg:#fff;--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--panel:#f6f8fa;
--ok:#1a7f37;--fail:#cf222e;--timeout:#bc4c00;--pending:#8c959f;--bar:#0969da;--link:#0969da}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;
--line:#30363d;--panel:#161b22;--ok:#3fb950;--fail:#f85149;--timeout:#db6d28;
--pending:#6e7681;--bar:#4493f8;--link:#4493f8}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:72rem;padding:1rem;background:var(--bg);color:var(--fg);
font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
a{color:var(--link)}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.2rem;border-bottom:1px solid var(--line);
padding-bottom:.2rem;margin-top:2rem}h3{font-size:1.05rem;margin:.3rem 0}h4{margin:.8rem 0 .3rem}
nav ul{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.4rem 1rem}
code,pre{font:13px/1.35 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
pre{background:var(--panel);border:1px solid var(--line);padding:.5rem;overflow-x:auto;
white-space:pre-wrap;overflow-wrap:anywhere}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}
table{border-collapse:collapse;margin:.5rem 0;width:100%}
caption{text-align:left;color:var(--muted);font-size:.9rem}
th,td{border-bottom:1px solid var(--line);padding:.25rem .4rem;text-align:left;vertical-align:top;
overflow-wrap:anywhere}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(20rem,1fr));gap:1rem}
.panel{margin:0;padding:.5rem;border:1px solid var(--line);background:var(--panel)}
.panel.wide{grid-column:1/-1}
figure{margin:.5rem 0}figcaption{font-size:.9rem;color:var(--muted)}
.panel table{font-size:.85rem}
svg.chart{width:100%;height:auto;display:block;max-width:28rem}
svg.timeline{max-width:44rem}
.attempts td:nth-child(4),.attempts td:nth-child(5){white-space:nowrap}
svg .label,svg .value,svg .tick{fill:var(--fg);font-size:12px}
svg .tick{fill:var(--muted)}svg .axis{stroke:var(--line)}
svg .bar{fill:var(--bar)}svg .ok,svg .completed{fill:var(--ok)}
svg .fail,svg .failed,svg .needs-human{fill:var(--fail)}
svg .timeout,svg .awaiting-approval{fill:var(--timeout)}svg .pending{fill:var(--pending)}
.state{display:inline-block;white-space:nowrap;padding:0 .4rem;border-radius:.6rem;border:1px solid currentColor;
font-size:.85rem}
.state.completed{color:var(--ok)}.state.failed,.state.needs-human,.state.refused,
.state.state-error{color:var(--fail)}.state.awaiting-approval{color:var(--timeout)}
.meta,.files{color:var(--muted);font-size:.9rem}
.halt,.warn{color:var(--fail)}
.run{border:1px solid var(--line);border-radius:.4rem;padding:.6rem .8rem;margin:1rem 0}
.waiting{border-left:4px solid var(--timeout);padding-left:.8rem;margin:1rem 0}
tr.fail td:first-child,tr.timeout td:first-child{border-left:4px solid var(--fail)}
tr.ok td:first-child{border-left:4px solid var(--ok)}
.tag{font-size:.8rem;color:var(--muted)}
ul.checks{margin:.2rem 0;padding-left:1.1rem}
.decisions li{margin-bottom:.6rem}.why{font-weight:600;margin:.2rem 0}
@media (max-width:40rem){body{padding:.5rem;font-size:14px}
.attempts thead{display:none}.attempts tr{display:block;border-bottom:1px solid var(--line)}
.attempts td{display:block;border:0;padding:.1rem .2rem}
dl.facts{grid-template-columns:1fr}dl.facts dd{margin-bottom:.4rem}}
@media print{:root{--bg:#fff;--fg:#000;--panel:#fff;--muted:#333;--link:#000}
nav{display:none}.panel,figure{break-inside:avoid}
a[href]:not([href^="#"])::after{content:" (" attr(href) ")";font-size:.8em}}
"""
