"""Log triage of a service incident: huge log outputs with one or two needles each.

Shape: the user describes the incident once; the agent greps, pages through log windows,
deploy history, config and metrics. Almost every output is hundreds of routine lines; the
needles are the first error line (re-quoted verbatim in the final report, so it is used
at the far end of the session), the config reload that changed a pool size, the deploy
that shipped it, the config line with its ``path:line``, and the rollback. One step greps
two services' logs with parallel tool calls.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from doctrine.session import Session

from ._render import bash_output, cat_n, log_line, tick
from ._text import Picker
from ._tools import DEFAULT_SIZE, SessionBuilder, SessionSize, session_id

FAMILY = "log_triage"
LOG_SCALE = 2.5  # log outputs are this many times the usual tool output size
_ROUTES = ("GET /cart/{n}", "POST /cart/{n}/items", "GET /products/{n}", "POST /checkout/{n}", "GET /health",
           "GET /orders/{n}", "POST /payments/{n}/authorize", "GET /shipping/quote/{n}")
_INFO = ("cache hit ratio={r}", "gc pause {ms}ms", "worker {n} heartbeat ok", "kafka consumer lag={n}",
         "feature flag refresh: {n} flags", "tls session resumed", "rate limiter tokens={n}")


def _epoch(ts: datetime) -> int:
    """Seconds since the epoch, reading the naive timestamp as UTC (never the local zone)."""
    return int((ts - datetime(1970, 1, 1)).total_seconds())


def _noise(p: Picker, ts: datetime, n: int, service: str, stop: datetime | None = None) -> tuple[list[str], datetime]:
    """``n`` routine log lines from ``ts`` on (request lines mostly, a few INFO/DEBUG)."""
    out = []
    for _ in range(n):
        ts = tick(p=p, ts=ts)
        if stop and ts >= stop:
            break
        if p.chance(0.75):
            route = p.choice(_ROUTES).format(n=p.int(1000, 99999))
            out.append(log_line(ts, "INFO", service, f"{route} 200 {p.int(4, 180)}ms", p.hex(12)))
        else:
            msg = p.choice(_INFO).format(r=p.float(0.6, 0.99), ms=p.int(2, 40), n=p.int(1, 400))
            out.append(log_line(ts, p.choice(("INFO", "DEBUG")), service, msg))
    return out, ts


def generate(seed: int, size: SessionSize = DEFAULT_SIZE) -> Session:
    """One log_triage session for ``seed`` at ``size``."""
    p = Picker(f"{FAMILY}:{seed}")
    bounds = size.tool_output_lines
    svc = p.choice(["checkout-api", "orders-api", "billing-worker", "cart-service"])
    upstream = p.choice(["payments-gw", "inventory-svc", "pricing-svc"])
    day = datetime(2026, p.int(1, 11), p.int(1, 28))
    t_deploy = day + timedelta(hours=p.int(8, 16), minutes=p.int(0, 50), seconds=p.int(0, 59))
    t_reload = t_deploy + timedelta(seconds=p.int(8, 30), milliseconds=p.int(0, 999))
    t_first = t_reload + timedelta(seconds=p.int(5, 25), milliseconds=p.int(0, 999))
    t_rollback = t_first + timedelta(minutes=p.int(25, 45), seconds=p.int(0, 59))
    old_pool, new_pool = p.choice([(20, 5), (32, 8), (16, 4), (24, 6)])
    timeout_ms = p.choice([3000, 5000, 8000])
    sha = p.hex(7)
    req = p.hex(12)
    first = log_line(t_first, "ERROR", svc, f"db pool exhausted: timeout after {timeout_ms}ms waiting for a connection "
                     f"(pool_size={new_pool}, in_use={new_pool}, waiting={p.int(9, 60)})", req)
    reload = log_line(t_reload, "INFO", svc, f"config reloaded: db.pool_size {old_pool} -> {new_pool} (release {sha})")
    rollback = log_line(t_rollback, "INFO", svc, f"config reloaded: db.pool_size {new_pool} -> {old_pool} (release rollback-{sha})")
    log = f"/var/log/{svc}/app.log"
    hhmm = f"{t_first:%Y-%m-%d} {t_first:%H:%M}"

    b = SessionBuilder(FAMILY, seed)
    b.system()
    b.step()
    rules = ["Read-only investigation: do not restart services or change any production config.",
             "Quote the first error line verbatim in the report.",
             f"Write the report to /workspace/incidents/{svc}-{t_first:%Y%m%d}.md."]
    u = b.user(f"{svc} started failing requests at about {hhmm} UTC and recovered roughly "
               f"{round((t_rollback - t_first).seconds / 60)} minutes later. Find the root cause.\n\nRules:\n"
               + "\n".join(f"- {r}" for r in rules))
    f_ro, f_quote, f_path = (b.fact(r, "user_intent", u) for r in rules)
    b.offer_probe(f_ro, "What did I say you may and may not do during this investigation?")
    files = [("app.log", p.int(200, 900)), ("app.log.1", p.int(200, 900)), ("access.log", p.int(100, 600)),
             ("gc.log", p.int(5, 40)), ("audit.log", p.int(1, 20))]
    listing = [f"total {sum(s for _, s in files) * 1024}"] + [
        f"-rw-r----- 1 svc adm {s * 1048576 + p.int(0, 99999):>10} {t_rollback:%b %d %H:%M} {n}" for n, s in files]
    b.bash(f"ls -la /var/log/{svc}/", bash_output("\n".join(listing), 0), "Starting with what logs there are.")
    n_err = p.int(400, 3000)
    b.bash(f"grep -c ' ERROR ' {log}", bash_output(str(n_err), 0))
    # ---------------------------------------------------------------- the first errors (needle: the very first)
    errs = [first]
    ts = t_first
    for _ in range(p.lines(bounds, LOG_SCALE) - 1):
        ts = tick(ts, p, 900)
        errs.append(log_line(ts, "ERROR", svc, p.choice([
            f"db pool exhausted: timeout after {timeout_ms}ms waiting for a connection (pool_size={new_pool}, in_use={new_pool}, waiting={p.int(9, 90)})",
            f"POST /checkout/{p.int(1000, 99999)} 503 {timeout_ms + p.int(1, 40)}ms",
            f"request failed: upstream timeout after {timeout_ms}ms"]), p.hex(12)))
    line_no = p.int(10000, 90000)
    numbered = []
    for e in errs:
        numbered.append(f"{line_no}:{e}")
        line_no += p.int(1, 30)  # routine lines between errors
    r = b.bash(f"grep -n ' ERROR ' {log} | head -{len(errs)}", bash_output("\n".join(numbered), 0),
               "The earliest errors.")
    f_first = b.fact(first, "error_strings", r)
    b.offer_probe(f_first, "What was the very first error line of the incident? Quote it exactly.")
    b.say(f"Errors start at {t_first:%H:%M:%S} and are almost all db pool timeouts with pool_size={new_pool}.")
    st = {"f_first": f_first, "facts": {}}

    def context() -> None:
        b.use(f_first)
        before, _ = _noise(p, t_reload - timedelta(seconds=40), p.lines(bounds, LOG_SCALE * 0.5), svc, t_reload)
        after, _ = _noise(p, t_reload, p.lines(bounds, LOG_SCALE * 0.5), svc, t_first)
        lines = before + [reload] + after + [first]
        r = b.bash(f"grep -n '' {log} | sed -n '/{t_reload - timedelta(seconds=40):%H:%M:%S}/,/{t_first:%H:%M:%S}/p'",
                   bash_output("\n".join(lines), 0), "What the service logged just before the first error.")
        st["facts"]["reload"] = b.fact(reload, "exact_values", r)
        b.offer_probe(st["facts"]["reload"], "What exactly did the config reload line before the first error say?")
        b.say(f"A config reload lowered db.pool_size from {old_pool} to {new_pool} {(t_first - t_reload).seconds} s before the first error.")

    def deploys() -> None:
        b.use(st["facts"].get("reload"))
        rows = []
        t = t_deploy - timedelta(days=p.int(3, 9))
        for _ in range(p.lines(bounds, 0.4)):
            t += timedelta(hours=p.int(2, 30), minutes=p.int(0, 59))
            if t >= t_deploy:
                break
            rows.append(f"{t:%Y-%m-%dT%H:%M:%SZ}  {p.hex(7)}  {p.choice(['ana', 'bo', 'chen', 'dara', 'eli'])}  "
                        f"{p.choice(['bump deps', 'tune logging', 'add metrics', 'fix typo in error text', 'refactor cart totals'])}")
        line = f"{t_deploy:%Y-%m-%dT%H:%M:%SZ}  {sha}  {p.choice(['ana', 'bo', 'chen'])}  tune db settings for cost"
        rows.append(line)
        r = b.bash(f"deployctl history {svc} --since 10d", bash_output("\n".join(["DEPLOYED_AT           RELEASE  BY    SUMMARY"] + rows), 0),
                   "Which release carried that config?")
        st["facts"]["deploy"] = b.fact(line, "exact_values", r)
        b.offer_probe(st["facts"]["deploy"], "Which deploy history line belongs to the release that changed the pool? Quote it.")

    def config() -> None:
        b.use(st["facts"].get("deploy"))
        keys = [f"  {k}: {v}" for k, v in (("host", "db.internal"), ("port", 5432), ("name", svc.replace("-", "_")))]
        lines = [f"service: {svc}", "http:", "  port: 8080", f"  read_timeout_ms: {timeout_ms * 2}", "db:"] + keys
        lines += [f"  pool_size: {new_pool}", f"  pool_timeout_ms: {timeout_ms}", "  statement_timeout_ms: 15000"]
        lines += [f"{k}:" if i % 4 == 0 else f"  {k}_{i}: {p.int(1, 500)}" for i, k in
                  enumerate(p.choice(["cache", "queue", "tracing", "features"]) for _ in range(p.lines(bounds, 0.5)))]
        path = f"deploy/{svc}/config.yaml"
        b.bash(f"git show {sha}:{path} | cat -n", bash_output(cat_n(lines), 0), f"The config as release {sha} shipped it.")
        ln = lines.index(f"  pool_size: {new_pool}") + 1
        a = b.say(f"{path}:{ln} sets `pool_size: {new_pool}` next to `pool_timeout_ms: {timeout_ms}`.")
        st["facts"]["config"] = b.fact(f"{path}:{ln}", "paths_with_lines", a)
        b.offer_probe(st["facts"]["config"], "Which file and line set the pool size in that release?")
        st["config_at"] = f"{path}:{ln}"

    def metrics() -> None:
        pts = [f'      [{_epoch(t_first + timedelta(minutes=i))}, "{p.int(20, 60) if i < 0 else p.int(timeout_ms - 200, timeout_ms + 40)}"]'
               for i in range(-3, p.lines(bounds, 0.5))]
        body = ['{', '  "status": "success",', '  "data": {', '    "resultType": "matrix",', '    "result": [{',
                f'      "metric": {{"service": "{svc}", "quantile": "0.99"}},', '      "values": ['] + [",\n".join(pts)] + [
                '      ]', '    }]', '  }', '}']
        b.bash(f"curl -s 'http://prometheus:9090/api/v1/query_range?query=db_wait_ms{{service=\"{svc}\",quantile=\"0.99\"}}&step=60'",
               bash_output("\n".join(body), 0), "p99 wait for a db connection over the incident.")
        b.say(f"p99 connection wait sits at the {timeout_ms} ms pool timeout for the whole window.")

    def upstream_logs() -> None:
        a, _ = _noise(p, t_first - timedelta(minutes=1), p.lines(bounds, LOG_SCALE * 0.6), upstream)
        herring = log_line(t_first + timedelta(seconds=p.int(30, 300)), "WARN", upstream, "rate limit at 82% of quota")
        a.insert(len(a) // 2, herring)
        c, _ = _noise(p, t_first - timedelta(minutes=1), p.lines(bounds, LOG_SCALE * 0.4), svc + "-sidecar")
        _, rs = b.calls([("execute_bash", {"command": f"grep -h '' /var/log/{upstream}/app.log | sed -n '1,{len(a)}p'"}, bash_output("\n".join(a), 0)),
                         ("execute_bash", {"command": f"tail -n {len(c)} /var/log/{svc}/sidecar.log"}, bash_output("\n".join(c), 0))],
                        f"Ruling out {upstream} and the sidecar at the same time.")
        b.fact(herring, "exact_values", rs[0])  # a red herring: never used
        b.say(f"{upstream} and the sidecar look healthy; one rate-limit warning, unrelated to the pool timeouts.")

    def trace() -> None:
        b.use(f_first)
        lines, t = _noise(p, t_first - timedelta(seconds=8), p.lines(bounds, LOG_SCALE * 0.5), svc, t_first)
        lines = [ln for ln in lines] + [first]
        mine = [log_line(t_first - timedelta(milliseconds=timeout_ms), "DEBUG", svc, "POST /checkout/start acquiring db connection", req),
                log_line(t_first + timedelta(milliseconds=2), "INFO", svc, f"POST /checkout/start 503 {timeout_ms + 3}ms", req)]
        out = sorted(lines + mine)
        b.bash(f"grep -n -C {len(out) // 2} 'req={req}' {log}", bash_output("\n".join(out), 0),
               "Following the request of the first error.")
        b.say(f"The request waited the full {timeout_ms} ms for a connection: a pool too small for the load, not a slow query.")

    def think() -> None:
        b.use(f_first, st["facts"].get("reload"), st["facts"].get("deploy"))
        d = (f"Root cause: release {sha} lowered db.pool_size from {old_pool} to {new_pool}, because the first pool timeout "
             f"follows that reload by {(t_first - t_reload).seconds} s and the pool is saturated throughout.")
        r = b.think(d)
        st["facts"]["decision"] = b.fact(d, "decisions", r - 1)
        b.offer_probe(st["facts"]["decision"], "What did you conclude was the root cause, and why?")

    def recovery() -> None:
        b.use(st["facts"].get("reload"))
        before, _ = _noise(p, t_rollback - timedelta(seconds=30), p.lines(bounds, LOG_SCALE * 0.4), svc, t_rollback)
        after, _ = _noise(p, t_rollback, p.lines(bounds, LOG_SCALE * 0.4), svc)
        r = b.bash(f"grep -n '' {log} | sed -n '/{t_rollback - timedelta(seconds=30):%H:%M:%S}/,+{len(before) + len(after)}p'",
                   bash_output("\n".join(before + [rollback] + after), 0), "And the recovery.")
        st["facts"]["rollback"] = b.fact(rollback, "exact_values", r)
        b.offer_probe(st["facts"]["rollback"], "Which log line marks the recovery? Quote it.")
        b.say(f"Recovery is the rollback restoring pool_size={old_pool} at {t_rollback:%H:%M:%S}; errors stop right after.")

    def older() -> None:
        lines, _ = _noise(p, t_first - timedelta(hours=p.int(2, 20)), p.lines(bounds, LOG_SCALE), svc)
        b.bash(f"zgrep -n '' {log}.1 | tail -n {len(lines)}", bash_output("\n".join(lines), 0),
               "Checking that nothing similar happened earlier.")
        b.say("No pool errors in the previous log file.")

    order = [context, deploys, config, think, recovery, metrics, upstream_logs, trace, older]
    plan = order[: size.steps - 2]
    while len(plan) < size.steps - 2:
        plan.append([older, metrics, trace, upstream_logs][len(plan) % 4])
    b.probes_due(size, 1)
    for n, fn in enumerate(plan, start=2):
        b.step()
        fn()
        b.probes_due(size, n)
    # ---------------------------------------------------------------- report (re-quotes the first error)
    b.step()
    b.user("Write it up.")
    b.use(f_first, f_quote, f_path, f_ro, *st["facts"].values())
    report = [f"# {svc} incident {t_first:%Y-%m-%d}", "", "## First error", "", "```", first, "```", "", "## Root cause", "",
              f"Release {sha} lowered `db.pool_size` from {old_pool} to {new_pool}"
              + (f" ({st['config_at']})" if "config_at" in st else "") + "; requests then waited "
              f"{timeout_ms} ms for a connection and failed with 503.", "", "## Recovery", "",
              f"The rollback at {t_rollback:%H:%M:%S} restored pool_size={old_pool}.", "", "## Proposed fix", "",
              f"Restore pool_size={old_pool} in the config and add an alert on db_wait_ms p99 > {timeout_ms // 2} ms."]
    path = f"/workspace/incidents/{svc}-{t_first:%Y%m%d}.md"
    b.editor({"command": "create", "path": path, "file_text": "\n".join(report)}, f"File created successfully at: {path}",
             "Writing the report; nothing in production was touched.")
    b.finish(f"Report written to {path}. First error, verbatim:\n{first}")
    meta = {"generator": "data_gen.synthetic", "workload": "log triage", "service": svc,
            "size": {"steps": size.steps, "tool_output_lines": list(bounds), "probes": size.probes}}
    return b.build(session_id(FAMILY, seed, size), meta)
