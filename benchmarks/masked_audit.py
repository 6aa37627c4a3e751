"""A masked audit with the CPU profile's estimator against exact pseudo-log-likelihood, in one run (issue 37): the
attack steps' time and what they conclude — membership AUC per attack, PII inference top-1 overall and per category
(members and non-members), the member-advantage p-value and the verdict — model by model.

The run of ``configs/cpu_masked.yaml`` (notebook 02's models) is made with the profile's estimator (strided PLL,
``pll_copies: K``: membership, PII inference and canaries alike; the table names K), then copied and re-run with
``--set audit.attacks.pll_copies=all``: only the attack steps re-run (every trained model, audit and identifier
table is shared, so the two sides differ by the estimator alone).

    python benchmarks/masked_audit.py --out runs/masked_audit            # trains once, then both audits
    python benchmarks/masked_audit.py --out runs/masked_audit --compare   # only compare two finished runs
    python benchmarks/masked_audit.py --set "training.strategies=[mlm,ppmlm]"  # the exact side on fewer models
    python benchmarks/masked_audit.py --out runs/masked_audit --audit      # `toolkit audit` of the run's models
    python benchmarks/masked_audit.py --out runs/masked_audit --grid 32/32,16/32,32/24 \
        --set "training.strategies=[mlm,ppmlm]"   # membership K / PII inference's K, each against exact

``--audit``: the issue's own measurement — ``python -m toolkit audit`` (its defaults: 256-token windows, PII inference
over 100 occurrences × 50 candidates of 256-token windows, 1,000 bootstrap resamples) of the finished run's fine-tuned
``mlm`` and ``ppmlm`` (last epoch; reference: their base) on the run's own members and non-members, once with
``--pll-copies K`` (the CPU profile's K) and once exact, timed end to end one after the other in this process; the same
comparison written to ``--out``/audit_comparison.json.

Only the models whose attack step the exact run re-ran are compared. Writes ``--out``/comparison.json and prints a
Markdown table (docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "cpu_masked.yaml"


def _run(config: Path, out: Path, extra: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "toolkit", "run", str(config), "--out", str(out), "--quiet", *extra],
                   cwd=ROOT, check=True)
    return time.perf_counter() - t0


def _steps(run: Path) -> dict[str, dict]:
    return {s["name"]: s for s in json.loads((run / "manifest.json").read_text(encoding="utf-8"))["steps"]}


def _seconds(step: dict) -> float:
    """A step's compute time: this run's, or (cached) the run's that computed it."""
    return step["seconds"] if step["status"] == "ran" else float(step.get("original_seconds") or 0.0)


def _models(run: Path) -> list[str]:
    return sorted(str(p.parent.relative_to(run / "attacks")) for p in (run / "attacks").rglob("verdict.json"))


def _read(run: Path, model: str) -> dict:
    d = run / "attacks" / model
    ids = json.loads((d / "identifiers.json").read_text(encoding="utf-8"))
    att = json.loads((d / "attacks.json").read_text(encoding="utf-8"))
    v = json.loads((d / "verdict.json").read_text(encoding="utf-8"))
    pii = ids["pii_inference"]
    adv = (pii.get("member_advantage") or {}).get("overall") or {}
    return {"verdict": v["level"], "rule": v.get("rule"),
            "auc": {a: x.get("auc") for a, x in att["attacks"].items()},
            "pii_top1": pii["overall"]["top1"], "pii_nonmembers_top1": (pii.get("nonmembers") or {}).get(
                "overall", {}).get("top1"),
            "pii_by_category": {c: x["top1"] for c, x in pii["by_category"].items()},
            "pii_advantage_p": adv.get("p_value"), "pll": pii.get("pll"),
            "canary_exposure": [c["exposure"] for c in (ids.get("canaries") or {}).get("canaries", [])]}


def _agreement(a: dict, b: dict) -> dict:
    """What one model's audit with the estimator (``a``) and exact (``b``) conclude, side by side."""
    return {"estimator": a, "exact": b,
            "max_abs_auc_difference": max(abs(a["auc"][k] - b["auc"][k]) for k in a["auc"]
                                          if a["auc"][k] is not None and b["auc"].get(k) is not None),
            "pii_top1_difference": a["pii_top1"] - b["pii_top1"],
            "pii_category_max_abs_difference": max(
                (abs(a["pii_by_category"][c] - b["pii_by_category"][c]) for c in a["pii_by_category"]), default=0.0),
            "same_verdict": a["verdict"] == b["verdict"]}


def compare(fast: Path, exact: Path) -> dict:
    sf, se = _steps(fast), _steps(exact)
    rows = {}
    for m in [m for m in _models(fast) if se.get(f"attacks/{m}", {}).get("status") == "ran"]:  # re-run exactly
        a, b = _read(fast, m), _read(exact, m)
        step = f"attacks/{m}"
        rows[m] = {"seconds": {"estimator": _seconds(sf[step]), "exact": _seconds(se[step])}, **_agreement(a, b)}

    def estimator(m: str) -> str:  # "K" or "K/K'" (membership / PII inference and canaries)
        a = json.loads((fast / "attacks" / m / "step.json").read_text(encoding="utf-8"))["inputs"]["attacks"]
        k, pii = a.get("pll_copies"), a.get("pii_pll_copies")
        return str(k) if pii in (None, k) else f"{k}/{pii}"

    copies = {estimator(m) for m in rows}
    t_fast = sum(r["seconds"]["estimator"] for r in rows.values())
    t_exact = sum(r["seconds"]["exact"] for r in rows.values())
    return {"fast": str(fast), "exact": str(exact), "models": rows, "pll_copies": sorted(map(str, copies)),
            "attack_seconds": {"estimator": t_fast, "exact": t_exact, "speed_up": t_exact / t_fast if t_fast else None},
            "same_verdicts": sum(r["same_verdict"] for r in rows.values()), "n_models": len(rows)}


def _pii(x: dict) -> str:
    """PII inference's top-1 of the members (and of the non-members) as the tables print it."""
    n = x["pii_nonmembers_top1"]
    return f"{x['pii_top1']:.3f}" + (f" ({n:.3f})" if n is not None else "")


def markdown(c: dict) -> str:
    k = "K = " + "/".join(c.get("pll_copies") or ["?"])
    out = [f"| model | attack step, {k} / exact | verdict, {k} / exact | PII top-1 members (non-members), "
           f"{k} / exact | max \\|Δ\\| PII top-1 per category | max \\|Δ AUC\\| |", "|---|---|---|---|---|---|"]
    for m, r in c["models"].items():
        a, b = r["estimator"], r["exact"]
        out.append(f"| {m} | {r['seconds']['estimator']:.0f} s / {r['seconds']['exact']:.0f} s | {a['verdict']} / "
                   f"{b['verdict']} | {_pii(a)} / {_pii(b)} | {r['pii_category_max_abs_difference']:.3f} | "
                   f"{r['max_abs_auc_difference']:.3f} |")
    s = c["attack_seconds"]
    ratio = f"{s['speed_up']:.1f}x" if s["speed_up"] else "—"
    out.append(f"| all | {s['estimator']:.0f} s / {s['exact']:.0f} s ({ratio}) | {c['same_verdicts']} of "
               f"{c['n_models']} equal | | | |")
    return "\n".join(out)


def audit_compare(run: Path, out: Path, copies: str) -> dict:
    """``toolkit audit`` of ``run``'s fine-tuned ``mlm`` and ``ppmlm`` with ``--pll-copies copies`` and exact."""
    import yaml

    cfg = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))  # the run's resolved config
    paths = cfg["corpus"]["path"]
    corpus = Path(paths[0] if isinstance(paths, list) else paths)
    models = [str(max((run / "runs" / s).glob("epoch-*"), key=lambda p: int(p.name.split("-")[1])))
              for s in ("mlm", "ppmlm")]
    c = cfg["corpus"]
    seconds, dirs = {}, {}
    for side, k in (("estimator", copies), ("exact", "all")):
        dirs[side] = out / f"audit-{side}"
        timed = dirs[side] / "benchmark_seconds.json"  # a side finished earlier (one side per invocation, if need be)
        if timed.is_file() and json.loads(timed.read_text(encoding="utf-8")).get("pll_copies") == k:
            seconds[side] = json.loads(timed.read_text(encoding="utf-8"))["seconds"]
            continue
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "toolkit", "audit", *models, "--corpus", str(corpus),
                        "--members", c["member_split"], "--nonmembers", c["nonmember_split"],
                        "--public", c["public_split"], "--n-individuals", str(c["n_individuals"]),
                        "--detector", cfg["identifiers"]["detector"], "--pll-copies", k, "--out", str(dirs[side]),
                        "--quiet"], cwd=ROOT, check=True)
        seconds[side] = time.perf_counter() - t0
        timed.write_text(json.dumps({"pll_copies": k, "seconds": seconds[side], "load": os.getloadavg()[0]}),
                         encoding="utf-8")
    rows = {}
    for m in _models(dirs["estimator"]):
        a, b = _read(dirs["estimator"], m), _read(dirs["exact"], m)
        rows[m] = _agreement(a, b)
    return {"run": str(run), "models": rows, "pll_copies": [copies], "seconds": seconds,
            "speed_up": seconds["exact"] / seconds["estimator"], "same_verdicts": sum(r["same_verdict"]
                                                                                    for r in rows.values()),
            "n_models": len(rows), "load": os.getloadavg()[0]}


def audit_markdown(c: dict) -> str:
    k = "K = " + "/".join(c["pll_copies"])
    out = [f"| model | verdict, {k} / exact | PII top-1 members (non-members), {k} / exact | max \\|Δ\\| PII top-1 "
           "per category | max \\|Δ AUC\\| |", "|---|---|---|---|---|"]
    for m, r in c["models"].items():
        a, b = r["estimator"], r["exact"]
        out.append(f"| {m} | {a['verdict']} / {b['verdict']} | {_pii(a)} / {_pii(b)} | "
                   f"{r['pii_category_max_abs_difference']:.3f} | {r['max_abs_auc_difference']:.3f} |")
    s = c["seconds"]
    out.append(f"| `toolkit audit`, both models, end to end | {c['same_verdicts']} of {c['n_models']} equal | "
               f"{s['estimator']:.0f} s / {s['exact']:.0f} s (**{c['speed_up']:.1f}×**) | | |")
    return "\n".join(out)


def grid(out: Path, config: str, extra: list[str], settings: list[str]) -> dict:
    """``--grid``: every membership/PII estimator against exact in one run — the attack steps of copies of the trained
    ``OUT/estimator`` re-run with each setting (exact last, so that every side runs on the same machine state)."""
    fast = out / "estimator"
    _run(Path(config), fast, extra)  # trained (or found trained) once; its attack steps are not compared
    sides = {}
    for setting in settings + ["all/all"]:
        k, pii = setting.split("/")
        side = out / ("exact" if setting == "all/all" else f"k{k}-pii{pii}")
        if side.exists():
            shutil.rmtree(side)
        shutil.copytree(fast, side, symlinks=True)
        shutil.rmtree(side / "attacks", ignore_errors=True)  # every compared attack step re-runs
        _run(Path(config), side, extra + ["--set", f"audit.attacks.pll_copies={k}",
                                          "--set", f"audit.attacks.pii_pll_copies={pii}"])
        sides[setting] = side
    result = {"load": os.getloadavg()[0], "settings": {}}
    for setting in settings:
        c = compare(sides[setting], sides["all/all"])
        result["settings"][setting] = c
        print(f"\n### membership K / PII K = {setting}\n\n{markdown(c)}")
    (out / "grid.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print("\n| membership K / PII K | attack steps | × exact | verdicts equal | max \\|Δ AUC\\| "
          "| max \\|Δ\\| PII top-1 "
          "per category | PII member-advantage p, estimator / exact |\n|---|---|---|---|---|---|---|")
    for setting, c in result["settings"].items():
        s, rows = c["attack_seconds"], c["models"].values()
        ps = "; ".join(f"{r['estimator']['pii_advantage_p']} / {r['exact']['pii_advantage_p']}" for r in rows)
        print(f"| {setting} | {s['estimator']:.0f} s / {s['exact']:.0f} s | {s['speed_up']:.1f} | "
              f"{c['same_verdicts']} of {c['n_models']} | {max(r['max_abs_auc_difference'] for r in rows):.3f} | "
              f"{max(r['pii_category_max_abs_difference'] for r in rows):.3f} | {ps} |")
    return result


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/masked_audit")
    ap.add_argument("--config", default=str(CONFIG))
    ap.add_argument("--compare", action="store_true", help="only compare OUT/estimator and OUT/exact")
    ap.add_argument("--set", nargs="*", default=[], help="extra --set overrides for both runs")
    ap.add_argument("--audit", action="store_true", help="only `toolkit audit` of OUT/estimator's mlm and ppmlm, "
                    "with --pll-copies K and exact")
    ap.add_argument("--pll-copies", default="32", help="K of --audit (the CPU profile's: 32)")
    ap.add_argument("--grid", help="membership/PII estimators to compare with exact, e.g. 32/32,16/32,32/24: each "
                    "re-runs the attack steps of a copy of OUT/estimator (trained once) with pll_copies/pii_pll_copies")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.grid:
        return grid(out, args.config, [x for s in args.set for x in ("--set", s)], args.grid.split(","))
    if args.audit:
        c = audit_compare(out / "estimator", out, args.pll_copies)
        (out / "audit_comparison.json").write_text(json.dumps(c, indent=1), encoding="utf-8")
        print(audit_markdown(c))
        return c
    fast, exact = out / "estimator", out / "exact"
    extra = [x for s in args.set for x in ("--set", s)]
    timings = {}
    if not args.compare:
        out.mkdir(parents=True, exist_ok=True)
        timings["estimator_run_seconds"] = _run(Path(args.config), fast, extra)
        if exact.exists():
            shutil.rmtree(exact)
        shutil.copytree(fast, exact, symlinks=True)
        timings["exact_run_seconds"] = _run(Path(args.config), exact,
                                            extra + ["--set", "audit.attacks.pll_copies=all"])
    c = compare(fast, exact)
    c.update(timings, load=os.getloadavg()[0])
    (out / "comparison.json").write_text(json.dumps(c, indent=1), encoding="utf-8")
    print(markdown(c))
    return c


if __name__ == "__main__":
    main()
