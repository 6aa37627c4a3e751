"""The report's Jinja2 template (kept in a module so that it ships with the package like any code)."""

TEMPLATE = r"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="lm-anonymity-toolkit {{ version }}">
<meta name="identifiers" content="{{ 'clear' if show_identifiers else 'keyed-hash' }}">
<title>{{ title }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #222; line-height: 1.45; }
main { max-width: 72em; margin: 0 auto; padding: 1em 2em 4em; }
header.top { background: #24364b; color: #fff; padding: 1.2em 2em; }
header.top h1 { margin: 0 0 .2em; font-size: 1.6em; }
header.top p { margin: 0; opacity: .85; }
nav { background: #f3f5f8; border-bottom: 1px solid #dde3ea; padding: .6em 2em; font-size: .92em; }
nav a { margin-right: 1.1em; color: #24364b; }
h2 { border-bottom: 2px solid #24364b; padding-bottom: .2em; margin-top: 2.2em; }
h3 { margin-top: 1.8em; color: #24364b; }
section.run > h2 { background: #eef2f7; border: none; padding: .4em .6em; }
table.tbl { border-collapse: collapse; margin: .8em 0; font-size: .88em; }
table.tbl th, table.tbl td { border-bottom: 1px solid #dde3ea; padding: .25em .7em; text-align: right; vertical-align: top; }
table.tbl th { background: #f3f5f8; }
table.tbl td:first-child, table.tbl th:first-child { text-align: left; }
.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: .6em 1em; margin: 1em 0; }
.absent { color: #666; font-style: italic; }
.privacy-mode { background: #e8f5e9; border-left: 4px solid #2e7d32; padding: .6em 1em; margin: 1em 0; }
.privacy-mode.raw { background: #ffebee; border-left-color: #c62828; }
pre { background: #f6f8fa; padding: .8em; overflow-x: auto; font-size: .8em; max-height: 40em; }
.figure { margin: 1em 0 2em; }
.caption { font-size: .88em; color: #555; margin-top: -.4em; }
code { background: #f3f5f8; padding: 0 .2em; }
ul.findings li { margin-bottom: .35em; }
section#verdict { border: 2px solid #24364b; border-radius: .4em; padding: .2em 1.2em 1em; margin: 1.2em 0; }
section#verdict h2 { margin-top: .6em; }
tr.verdict-incomplete td:last-child { color: #424242; border-left: 3px solid #616161; padding-left: .6em !important; }
h4 { margin: 1.6em 0 .4em; color: #24364b; font-size: 1.05em; }
dl.glossary dt { font-weight: 600; margin-top: .5em; }
dl.glossary dd { margin-left: 1.5em; }
.swatch { display: inline-block; width: 1.6em; height: .8em; margin: 0 .3em 0 1em; border-radius: .2em; vertical-align: middle; }
@media print { nav { display: none; } .figure { page-break-inside: avoid; } }
</style>
<script type="text/javascript">{{ plotly_js }}</script>
</head>
<body>
<header class="top">
  <h1>{{ title }}</h1>
  <p>Generated {{ generated }} by the LM anonymity audit toolkit {{ version }} · {{ runs|length }} run(s)</p>
</header>
<nav>
  <a href="#verdict">Verdict</a>
  <a href="#summary">Summary</a>
  {% if frontiers %}<a href="#frontier">Privacy–utility frontier</a>{% endif %}
  {% for run in runs %}<a href="#{{ run.id }}">{{ run.label }}</a>{% endfor %}
  <a href="#reading">What the figures show and do not show</a>
  <a href="#glossary">Glossary</a>
  <a href="#appendix">Appendix</a>
</nav>
<main>
{% for text in incomplete %}<div class="privacy-mode raw incomplete"><strong>Incomplete run.</strong> {{ text }}</div>
{% endfor %}
<section id="verdict">
<h2>Verdict</h2>
{{ verdicts_html }}
<h3>The rules, with their thresholds</h3>
{{ thresholds_html }}
<p class="caption">A verdict covers the attacks and the sample size stated; the sections below give every figure
behind it.</p>
</section>
{% if frontiers %}
<section id="frontier">
<h2>Privacy–utility frontier</h2>
<p>Of the ways to fine-tune that every attack finds green, which keeps the largest share of what plain fine-tuning
learns on notes the model never saw — its gain retained, (U − U_base) / (U_plain − U_base), 0% the untouched base
model, 100% plain fine-tuning — and does one keep at least {{ gain_goal }}? One model per strategy and privacy
budget ε (DP-SGD with the individual as the unit; ∞: no DP), per corpus size; its verdict applies the rules above.</p>
{% for f in frontiers %}
<p>Frontier <code>{{ f.path }}</code>: {{ f.summary }}</p>
<ul class="findings">{% for b in f.best %}<li>{{ b }}</li>{% endfor %}</ul>
<div class="figure">{{ f.figure|safe }}<p class="caption">Gain retained (share of plain fine-tuning's held-out gain
over the base model) against the AUC of the strongest membership attack; the shaded region is the goal (AUC ≤ 0.55,
gain retained ≥ {{ gain_goal }}); only the verdict says whether a model there is green under every attack. The black
point per size is the base model before any fine-tuning (gain retained 0%; a dotted line where its attack AUC was not
recorded); the hover text gives each model's held-out utility and, labelled, its utility on the training notes (the
papers' metric, which also rewards memorising them).</p></div>
<p>{{ f.base }}</p>
{{ f.table|safe }}
<details><summary>What decided each colour, and under which rules it was judged</summary>
<p>{{ f.rules }}</p>
<ul>{% for v in f.verdicts %}<li>{{ v }}</li>{% endfor %}</ul></details>
{% endfor %}
</section>
{% endif %}

{% if show_identifiers %}
<div class="privacy-mode raw"><strong>This report contains raw identifiers</strong> (it was built with
<code>--show-identifiers</code>). Handle it as personal data: do not share it outside the audit team.</div>
{% else %}
<div class="privacy-mode">No identifier of the audited corpora is printed in this report: identifiers are
counted, or shown as a keyed hash of the normalised word (HMAC-SHA-256, first 12 hexadecimal digits); the key stays in
the run directory; without it the tokens cannot be matched to names. Within one run the same word always has the same
token; different runs have different keys. Build the report with <code>--show-identifiers</code> to see the words.</div>
{% endif %}

<section id="summary">
<h2>Summary in plain language</h2>
{% for run in runs %}
<h3>{{ run.label }}</h3>
{% if run.findings %}<ul class="findings">{% for f in run.findings %}<li>{{ f }}</li>{% endfor %}</ul>
{% else %}<p class="absent">No audit results in this run.</p>{% endif %}
{% endfor %}
<p>The last section, <a href="#reading">what the figures show and do not show</a>, says how far these numbers go.</p>
</section>

{% for run in runs %}
<section class="run" id="{{ run.id }}">
<h2>{{ run.label }}</h2>
<p>Run directory: <code>{{ run.path }}</code>{% if run.kind %} · model kind: <strong>{{ run.kind_text }}</strong>{% endif %}{% if run.description %} · {{ run.description }}{% endif %}</p>
{% for sec in run.sections %}
<section id="{{ run.id }}-{{ sec.id }}" class="part">
<h3>{{ sec.title }}</h3>
{% for b in sec.blocks %}
{% if b.kind == "p" %}<p>{{ b.body }}</p>
{% elif b.kind == "h" %}<h4>{{ b.body }}</h4>
{% elif b.kind == "absent" %}<p class="absent">{{ b.body }}</p>
{% elif b.kind == "note" %}<div class="note">{{ b.body }}</div>
{% elif b.kind == "list" %}<ul>{% for item in b.body %}<li>{{ item }}</li>{% endfor %}</ul>
{% elif b.kind == "pre" %}<details><summary>{{ b.caption }}</summary><pre>{{ b.body }}</pre></details>
{% elif b.kind == "table" %}{% if b.caption %}<p class="caption">{{ b.caption }}</p>{% endif %}{{ b.body|safe }}
{% elif b.kind == "figure" %}<div class="figure">{{ b.body|safe }}{% if b.caption %}<p class="caption">{{ b.caption }}</p>{% endif %}</div>
{% endif %}
{% endfor %}
</section>
{% endfor %}
{% if run.absent %}<p class="absent">Not in this run: {% for a in run.absent %}{{ a.title }} ({{ a.body }}){% if not loop.last %}; {% endif %}{% endfor %}</p>{% endif %}
</section>
{% endfor %}

<section id="reading">
<h2>What the figures show and do not show</h2>
{% for para in reading %}<p>{{ para }}</p>{% endfor %}
<h3>Regulatory framing (EDPB Opinion 28/2024)</h3>
{% for para in edpb %}<p>{{ para }}</p>{% endfor %}
</section>

<section id="glossary">
<h2>Glossary</h2>
<dl class="glossary">{% for term, text in glossary %}<dt>{{ term }}</dt><dd>{{ text }}</dd>{% endfor %}</dl>
<p>Colours: every figure draws a strategy in the same colour (masked and causal variants of one strategy share it):
{% for name, colour in colours %}<span class="swatch" style="background: {{ colour }}"></span>{{ name }}{% endfor %}.</p>
</section>

<section id="appendix">
<h2>Appendix: technical material</h2>
{% for run in runs %}
<h3>{{ run.label }}</h3>
{% for sec in run.appendix %}
<section id="{{ run.id }}-{{ sec.id }}" class="part">
<h4>{{ sec.title }}</h4>
{% for b in sec.blocks %}
{% if b.kind == "p" %}<p>{{ b.body }}</p>
{% elif b.kind == "absent" %}<p class="absent">{{ b.body }}</p>
{% elif b.kind == "pre" %}<details><summary>{{ b.caption }}</summary><pre>{{ b.body }}</pre></details>
{% elif b.kind == "table" %}{% if b.caption %}<p class="caption">{{ b.caption }}</p>{% endif %}{{ b.body|safe }}
{% elif b.kind == "figure" %}<div class="figure">{{ b.body|safe }}{% if b.caption %}<p class="caption">{{ b.caption }}</p>{% endif %}</div>
{% endif %}
{% endfor %}
</section>
{% endfor %}
{% endfor %}
</section>
</main>
</body>
</html>
"""
