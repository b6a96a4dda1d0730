"""Data analysis of a churn table: CSV heads, pandas tables, and a threshold chosen early.

Shape: the user asks a question about one CSV; the agent inspects it (head, info,
describe), aggregates, and *chooses* a churn threshold with a stated rationale and a
rule for missing values. Both decisions are reused much later: by the analysis script,
by the sensitivity check and by the final report. Outputs are tables, mostly read once.
"""

from __future__ import annotations

from doctrine.session import Session

from ._render import bash_output, csv_head, table
from ._text import Picker
from ._tools import DEFAULT_SIZE, SessionBuilder, SessionSize, session_id

FAMILY = "data_analysis"
_REGIONS = ("north-east", "north-west", "midlands", "south-east", "south-west", "london", "wales", "scotland",
            "yorkshire", "east-anglia", "northern-ireland", "cornwall", "cumbria", "kent", "sussex", "essex")
_PLANS = ("basic", "plus", "pro", "team")


def _quantile(values: list[float], q: float) -> float:
    """Linear-interpolation quantile (pandas' default)."""
    xs = sorted(values)
    pos = (len(xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def generate(seed: int, size: SessionSize = DEFAULT_SIZE) -> Session:
    """One data_analysis session for ``seed`` at ``size``."""
    p = Picker(f"{FAMILY}:{seed}")
    bounds = size.tool_output_lines
    name = p.choice(["customers_2025", "subscriptions_q3", "accounts_export", "members_2026"])
    csv = f"data/{name}.csv"
    root = f"/workspace/{p.project()}-analysis"
    regions = p.sample(_REGIONS, p.int(9, 16))
    churn = {r: p.float(0.04, 0.31, 4) for r in regions}
    counts = {r: p.int(300, 6000) for r in regions}
    n_rows = sum(counts.values())
    missing = p.int(40, 900)
    header = ["customer_id", "region", "plan", "signup_date", "monthly_spend", "tickets_90d", "churned"]

    b = SessionBuilder(FAMILY, seed)
    b.system()
    b.step()
    rules = [f"Do not modify anything under data/; {csv} is the raw export.", "Use pandas only, no new dependencies.",
             "Put the final table in out/report.md, rates rounded to 3 decimals."]
    u = b.user(f"In {root}, {csv} has one row per customer. Which regions have a churn rate that is clearly too high? "
               "Pick a sensible threshold and justify it.\n\nConstraints:\n" + "\n".join(f"- {r}" for r in rules))
    f_raw, f_pandas, f_report = (b.fact(r, "user_intent", u) for r in rules)
    b.offer_probe(f_report, "Where should the final table go, and how should rates be rounded?")
    rows = []
    for _ in range(p.lines(bounds, 3.0)):
        reg = p.choice(regions)
        rows.append([f"C{100000 + p.int(0, 899999)}", reg, p.choice(_PLANS),
                     None if p.chance(0.05) else f"20{p.int(19, 25)}-{p.int(1, 12):02d}-{p.int(1, 28):02d}",
                     p.float(5, 240), p.int(0, 9), int(p.chance(churn[reg]))])
    b.bash(f"cd {root} && wc -l {csv} && head -n {len(rows) + 1} {csv}",
           bash_output(f"{n_rows + 1} {csv}\n" + csv_head(header, rows), 0), "A first look at the file.")
    info = ["<class 'pandas.core.frame.DataFrame'>", f"RangeIndex: {n_rows} entries, 0 to {n_rows - 1}",
            f"Data columns (total {len(header)} columns):", " #   Column         Non-Null Count  Dtype  ",
            "---  ------         --------------  -----  "]
    dtypes = ["object", "object", "object", "object", "float64", "int64", "int64"]
    for i, (col, dt) in enumerate(zip(header, dtypes, strict=True)):
        nn = n_rows - missing if col == "signup_date" else n_rows
        info.append(f" {i}   {col:<14} {nn} non-null{'':<4} {dt}")
    info += ["dtypes: float64(1), int64(2), object(4)", f"memory usage: {n_rows * 56 / 1024 / 1024:.1f}+ MB"]
    r = b.bash(f"cd {root} && python -c \"import pandas as pd; pd.read_csv('{csv}').info()\"", bash_output("\n".join(info), 0))
    f_nulls = b.fact(f" 3   signup_date    {n_rows - missing} non-null", "exact_values", r)
    b.offer_probe(f_nulls, "How many non-null signup_date values did df.info() report? Quote its line.")
    b.fact(f"memory usage: {n_rows * 56 / 1024 / 1024:.1f}+ MB", "exact_values", r)  # noise
    b.say(f"{missing} rows have no signup_date; everything else is complete.")
    st: dict = {}

    def describe() -> None:
        stats = ["count", "unique", "top", "freq", "mean", "std", "min", "25%", "50%", "75%", "max"]
        cols = header
        top_reg = max(regions, key=lambda x: counts[x])
        vals = [[n_rows, n_rows, n_rows, n_rows - missing, n_rows, n_rows, n_rows],
                [n_rows, len(regions), len(_PLANS), p.int(600, 2400), None, None, None],
                [f"C{p.int(100000, 999999)}", top_reg, p.choice(_PLANS), f"2024-{p.int(1, 12):02d}-01", None, None, None],
                [1, counts[top_reg], p.int(3000, 9000), p.int(20, 90), None, None, None],
                [None, None, None, None, p.float(40, 90), p.float(0.5, 2.5), p.float(0.08, 0.2, 4)],
                [None, None, None, None, p.float(20, 60), p.float(0.5, 2), p.float(0.25, 0.4, 4)],
                [None, None, None, None, 5.0, 0.0, 0.0], [None, None, None, None, p.float(20, 40), 0.0, 0.0],
                [None, None, None, None, p.float(40, 70), 1.0, 0.0], [None, None, None, None, p.float(80, 120), 2.0, 0.0],
                [None, None, None, None, 240.0, 9.0, 1.0]]
        b.bash(f"cd {root} && python -c \"import pandas as pd; print(pd.read_csv('{csv}').describe(include='all').to_string())\"",
               bash_output(table([""] + cols, [[s] + v for s, v in zip(stats, vals, strict=True)], index=False), 0))
        b.say("Spend is right-skewed; churned is a 0/1 flag, so its mean is the churn rate.")

    def by_region() -> None:
        b.use(f_pandas)
        out = table(["region", "customers", "churn_rate"], [[r, counts[r], churn[r]] for r in sorted(regions)], index=False)
        months = [f"2025-{m:02d}" for m in range(1, 13)]
        pivot = table(["region"] + months, [[r] + [round(max(0.0, churn[r] + p.float(-0.06, 0.06, 4)), 3) for _ in months]
                                            for r in sorted(regions)], index=False)
        r = b.bash(f"cd {root} && python -c \"import pandas as pd; d = pd.read_csv('{csv}'); "
                   "print(d.groupby('region').churned.agg(['size', 'mean']).round(4)); print(); "
                   "print(d.pivot_table(index='region', columns='month', values='churned').round(3).to_string())\"",
                   bash_output(out + "\n\n" + pivot, 0), "Churn per region, overall and by month.")
        top = max(regions, key=lambda x: churn[x])
        row = next(ln.strip() for ln in out.split("\n") if ln.strip().startswith(top + " "))
        st["f_top_row"] = b.fact(row, "exact_values", r)
        b.offer_probe(st["f_top_row"], f"What did the per-region table show for {top}? Quote its row.")
        note_regions()

    def by_plan() -> None:
        b.user("Could the plan mix explain it? Split by plan and tenure too.")
        rows = [[r, pl, t, p.int(10, 900), round(min(0.6, max(0.0, churn[r] + p.float(-0.05, 0.05, 4))), 4),
                 p.float(20, 150), p.float(0.2, 3.0)]
                for r in sorted(regions) for pl in _PLANS for t in ("<6m", "6-12m", "1-2y", ">2y")][: p.lines(bounds, 2.0)]
        b.bash(f"cd {root} && python -c \"import pandas as pd; d = pd.read_csv('{csv}'); "
               "print(d.groupby(['region', 'plan', 'tenure']).agg(size=('churned', 'size'), churn=('churned', 'mean'), "
               "spend=('monthly_spend', 'mean'), tickets=('tickets_90d', 'mean')).round(4).to_string())\"",
               bash_output(table(["region", "plan", "tenure", "size", "churn", "spend", "tickets"], rows, index=False), 0),
               "Splitting by plan and tenure.")
        b.say("The plan split does not change the picture: the high regions are high on every plan.")

    def threshold() -> None:
        b.use(st.get("f_region_note"), st.get("f_top_row"))
        q90 = _quantile(list(churn.values()), 0.9)
        med = _quantile(list(churn.values()), 0.5)
        ranked = "\n".join(f"{x:<18}{churn[x]:.4f}" for x in sorted(regions, key=lambda x: churn[x]))
        b.bash(f"cd {root} && python -c \"import pandas as pd; s = pd.read_csv('{csv}').groupby('region').churned.mean(); "
                   "print(s.sort_values().to_string()); print(s.quantile([0.5, 0.75, 0.9]).round(4))\"",
                   bash_output(f"region\n{ranked}\n0.50    {med:.4f}\n0.75    {_quantile(list(churn.values()), 0.75):.4f}\n0.90    {q90:.4f}\n"
                               "Name: churned, dtype: float64", 0))
        thr = round(q90, 2)
        st["thr"] = thr
        d = (f"I'll flag regions with a churn rate above {thr:.2f}, because that is the 90th percentile of regional churn "
             f"({q90:.4f}) rounded, well above the median of {med:.4f}.")
        a = b.say(d)
        st["f_thr"] = b.fact(d, "decisions", a)
        b.offer_probe(st["f_thr"], "What churn threshold did you choose, and why?")
        rows = [[f"C{100000 + p.int(0, 899999)}", p.choice(regions), p.choice(_PLANS), None, p.float(5, 240), p.int(0, 9),
                 int(p.chance(0.15))] for _ in range(p.lines(bounds))]
        b.bash(f"cd {root} && python -c \"import pandas as pd; d = pd.read_csv('{csv}'); "
               f"print(d[d.signup_date.isna()].head({len(rows)}).to_string())\"", bash_output(table(header, rows), 0),
               "What do the rows without a signup date look like?")
        d2 = f"Rows without signup_date ({missing}) stay in, because the churn rate does not need tenure."
        a = b.say(d2)
        b.use(f_nulls)
        st["f_nulls_dec"] = b.fact(d2, "decisions", a)
        b.offer_probe(st["f_nulls_dec"], "What did you decide about the rows without a signup date?")

    def script() -> None:
        b.use(st.get("f_thr"), st.get("f_nulls_dec"), f_raw, f_pandas)
        thr = st.get("thr", 0.2)
        src = ["import pandas as pd", "", f"CHURN_THRESHOLD = {thr:.2f}", f"RAW = \"{csv}\"", "", "",
               "def churn_by_region(df: pd.DataFrame) -> pd.DataFrame:",
               "    out = df.groupby(\"region\").churned.agg(customers=\"size\", churn_rate=\"mean\")",
               "    return out.sort_values(\"churn_rate\", ascending=False)", "", "",
               "if __name__ == \"__main__\":", "    df = pd.read_csv(RAW)  # read-only: the raw export is never written",
               "    table = churn_by_region(df)", "    flagged = table[table.churn_rate > CHURN_THRESHOLD]",
               "    print(table.round(3).to_string())", "    print()", "    print(f\"flagged ({len(flagged)}):\")",
               "    print(flagged.round(3).to_string())"]
        r = b.editor({"command": "create", "path": f"{root}/analysis.py", "file_text": "\n".join(src)},
                     f"File created successfully at: {root}/analysis.py", "Putting the analysis in a script.")
        st["f_const"] = b.fact(f"CHURN_THRESHOLD = {thr:.2f}", "exact_values", r - 1)
        b.offer_probe(st["f_const"], "What constant did analysis.py define for the threshold? Quote the line.")
        ordered = sorted(regions, key=lambda x: -churn[x])
        flagged = [x for x in ordered if churn[x] > thr]
        out = (table(["region", "customers", "churn_rate"], [[x, counts[x], round(churn[x], 3)] for x in ordered], index=False)
               + f"\n\nflagged ({len(flagged)}):\n"
               + table(["region", "customers", "churn_rate"], [[x, counts[x], round(churn[x], 3)] for x in flagged], index=False))
        r = b.bash(f"cd {root} && python analysis.py", bash_output(out, 0))
        st["flagged"] = flagged
        st["f_flagged"] = b.fact(f"flagged ({len(flagged)}):", "exact_values", r)

    def sensitivity() -> None:
        b.use(st.get("f_thr"), st.get("f_const"))
        thr = st.get("thr", 0.2)
        rows = [[f"{t:.2f}", sum(1 for v in churn.values() if v > t)] for t in (thr - 0.04, thr - 0.02, thr, thr + 0.02, thr + 0.04)]
        grid = ", ".join(r[0] for r in rows)
        b.bash(f"cd {root} && python -c \"import pandas as pd, analysis as a; t = a.churn_by_region(pd.read_csv(a.RAW)); "
               f"print(pd.DataFrame([(x, (t.churn_rate > x).sum()) for x in [{grid}]], "
               "columns=['threshold', 'n_flagged']).to_string(index=False))\"",
               bash_output(table(["threshold", "n_flagged"], rows, index=False), 0), "How sensitive is the list to the threshold?")
        b.say("The flagged list moves by at most one region within ±0.02, so the choice is not fragile.")

    def cohorts() -> None:
        b.user("Is this a recent thing? Show me retention by signup cohort.")
        weeks = [f"2025-W{w:02d}" for w in range(1, 53)] + [f"2026-W{w:02d}" for w in range(1, 53)]
        rows = [[m] + [p.float(0.0, 0.35, 3) for _ in range(12)] for m in weeks[: max(3, p.lines(bounds, 1.5))]]
        b.bash(f"cd {root} && python cohorts.py", bash_output(table(["cohort"] + [f"m{i}" for i in range(1, 13)], rows), 0),
               "Retention by signup cohort, for context.")
        b.say("Cohorts decay at similar rates; no single month explains the regional gap.")

    def corr() -> None:
        b.user("Do spend or support tickets go with churn?")
        cols = ["monthly_spend", "tickets_90d", "churned"]
        rows = [[c] + [1.0 if i == j else p.float(-0.3, 0.5, 3) for j in range(3)] for i, c in enumerate(cols)]
        b.bash(f"cd {root} && python -c \"import pandas as pd; print(pd.read_csv('{csv}')[{cols}].corr().round(3))\"",
                   bash_output(table([""] + cols, rows, index=False), 0))
        b.say("Support tickets correlate with churn more than spend does; worth a note in the report, not a change of method.")

    def note_regions() -> None:
        b.use(st.get("f_top_row"))
        top = sorted(regions, key=lambda x: -churn[x])[:3]
        a = b.say(f"Highest raw churn: {', '.join(f'{x} {churn[x]:.4f}' for x in top)}.")
        st["f_region_note"] = b.fact(f"{top[0]} {churn[top[0]]:.4f}", "exact_values", a)

    def outliers() -> None:
        b.user("Before you trust the numbers, check the high spenders for data errors.")
        cut = p.int(150, 200)
        rows = [[f"C{100000 + p.int(0, 899999)}", p.choice(regions), p.choice(_PLANS), p.float(cut, 240), p.int(0, 9),
                 int(p.chance(0.2))] for _ in range(p.lines(bounds, 2.0))]
        b.bash(f"cd {root} && python -c \"import pandas as pd; d = pd.read_csv('{csv}'); "
               f"print(d[d.monthly_spend > {cut}].drop(columns='signup_date').to_string())\"",
               bash_output(table([h for h in header if h != "signup_date"], rows), 0), "Checking the high spenders.")
        b.say(f"Nothing implausible above {cut}; no outlier filtering needed.")

    order = [describe, by_region, threshold, by_plan, script, outliers, sensitivity, cohorts, corr]
    if size.steps - 2 < len(order):  # keep the load-bearing ones first
        keep = [threshold, script, by_region, describe, sensitivity, by_plan, outliers, cohorts, corr]
        order = sorted(keep[: size.steps - 2], key=order.index)
    while len(order) < size.steps - 2:
        order.append([cohorts, by_plan, outliers, corr, sensitivity][len(order) % 5])
    b.probes_due(size, 1)
    for n, fn in enumerate(order, start=2):
        b.step()
        fn()
        b.probes_due(size, n)
    # ---------------------------------------------------------------- the report reuses the early threshold
    b.step()
    b.user("Please write the report now.")
    b.use(st.get("f_thr"), st.get("f_nulls_dec"), st.get("f_flagged"), f_report, f_raw)
    thr = st.get("thr", 0.2)
    flagged = st.get("flagged", [x for x in regions if churn[x] > thr])
    lines = [f"# Regional churn in {csv}", "", f"Threshold: churn rate above {thr:.2f} (90th percentile of regional churn).",
             "", "| region | customers | churn_rate |", "|---|---|---|"]
    lines += [f"| {x} | {counts[x]} | {churn[x]:.3f} |" for x in flagged]
    lines += ["", f"{missing} rows without signup_date are included; churn does not depend on tenure."]
    b.editor({"command": "create", "path": f"{root}/out/report.md", "file_text": "\n".join(lines)},
             f"File created successfully at: {root}/out/report.md")
    b.finish(f"Report in out/report.md: {len(flagged)} regions above the {thr:.2f} threshold. The raw CSV was not modified.")
    meta = {"generator": "data_gen.synthetic", "workload": "data analysis", "dataset": csv,
            "size": {"steps": size.steps, "tool_output_lines": list(bounds), "probes": size.probes}}
    return b.build(session_id(FAMILY, seed, size), meta)
