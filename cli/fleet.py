"""`slotop fleet`: every replica at once, read from a Prometheus server or scraped directly."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from slotop.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, add_common
from slotop.config import Settings, with_overrides
from slotop.redact import shown_url, url_password

if TYPE_CHECKING:
    from slotop.actions.fleet.wiring import FleetWatch

_DESCRIPTION = """\
Every vLLM or SGLang replica at once, one row each (its engine named), worst first: the SLO verdict at the configured
percentiles ([slo]) over the window ([window] long_s), with the histogram bucket each
percentile fell in; output tokens/s; running and waiting requests; KV-cache usage;
preemptions/s; and whether the replica is up or its figures are stale. Below them, a row per
model: its replicas' histogram buckets merged (percentiles are never averaged), rates and
requests summed, KV usage averaged.

Where the rows come from:
  --prometheus URL   the Prometheus server that already scrapes the fleet (or [fleet]
                     prometheus_url): replicas are told apart by [fleet] replica_labels
                     (job, instance) and model_label (model_name); data-parallel engines fold
                     into their replica. Percentiles are PromQL's histogram_quantile over the
                     increase of the bucket series over the window.
  URL URL ...        scrape these replicas directly, as `slotop attach` scrapes one.
  --discover         scrape every replica answering on local ports 8000-8015 and 30000.

A replica that stands out from its model's median (three replicas or more) is flagged by name:
slow when its TTFT is at least [fleet] slow_ratio times the median and its whole bucket lies
above it; skewed when its KV usage is [fleet] skew_kv_ratio away from the median, or it runs
skew_running_ratio times more (or fewer) requests, two at least.

A server that is down, slow or errs, or answers only in part, never ends the view: each row
keeps its last good values, dimmed and marked stale with the reason. Credentials are read from
a file or the environment ([fleet] bearer_token_file / _env, basic_auth_file / _env), never
from the command line, and are never printed.

On screen, Enter opens the chosen replica's dashboard (the same panes as `slotop attach`; q
comes back). Through Prometheus it is fed from the server and loads or restarts the replica
only where a URL of its own is known ([fleet] direct_from_instance, or [replica] url).
"""

_EPILOG = """\
examples:
  slotop fleet --prometheus http://prometheus:9090
  slotop fleet --prometheus http://prometheus:9090 --json | jq '.replicas[0]'
  slotop fleet http://10.0.0.5:8000 http://10.0.0.6:8000
  slotop fleet --discover --json

--json prints one table (schema slotop.fleet/1; keys carry their units); each replica says
whether it "answered" the latest poll, and "replicas_answered" counts them.

exit status (as slotop snapshot's):
  0  the table was read and at least one replica answered (or the server lists none)
  1  the source could not be read, or no replica answered (every one down or unreachable):
     the JSON then says why in "error"
  2  a usage or settings error (the message names the flag or key)
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop fleet` and its flags."""
    parser = sub.add_parser(
        "fleet",
        help="every replica at once, worst first: through Prometheus, or scraped directly",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(parser)
    parser.add_argument("urls", nargs="*", metavar="URL", help="replica base URLs to scrape")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--prometheus",
        metavar="URL",
        help="the Prometheus server's base URL (default: [fleet] prometheus_url)",
    )
    source.add_argument(
        "--discover",
        action="store_true",
        help="scrape every vLLM or SGLang replica answering on local ports 8000-8015 and 30000",
    )
    parser.add_argument("--json", action="store_true", help="print one table as JSON and exit")
    parser.add_argument(
        "--window",
        type=float,
        metavar="SECONDS",
        help="the span verdicts and rates cover (default: [window] long_s); with URLs and "
        "--json, the time between the two scrapes (default: [replica] scrape_interval_s)",
    )
    parser.add_argument(
        "--direct-from-instance",
        action="store_true",
        default=None,
        help="take each replica's instance label as its own URL, so its dashboard may also "
        "probe and restart it ([fleet] direct_from_instance)",
    )
    parser.set_defaults(handler=_run)


def _urls(args: argparse.Namespace) -> list[str] | None:
    """The replicas to scrape directly, None to read Prometheus; [] when none was found."""
    if args.discover:
        from slotop.tui.run import find_local_replicas

        return find_local_replicas()
    return list(args.urls) if args.urls else None


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from slotop.actions.fleet.wiring import (
        FleetSource,
        FleetWatch,
        direct_fleet,
        prometheus_fleet,
    )
    from slotop.collectors.errors import ReplicaUrlError
    from slotop.collectors.prometheus import PrometheusError

    if args.urls and (args.prometheus or args.discover):
        print("slotop: give replica URLs, --prometheus or --discover, one of them", file=sys.stderr)
        return EXIT_USAGE
    settings = with_overrides(
        settings,
        {
            "fleet.direct_from_instance": args.direct_from_instance,
            "window.long_s": args.window if not (args.urls and args.json) else None,
            "window.short_s": min(args.window, settings.window.short_s) if args.window else None,
            "replica.scrape_interval_s": args.window if (args.urls and args.json) else None,
        },
    )
    urls = _urls(args)
    prometheus_url = args.prometheus or (settings.fleet.prometheus_url if urls is None else None)
    source: FleetSource
    try:
        if urls is None:
            if not prometheus_url:
                print(
                    "slotop: name a source: --prometheus URL (or [fleet] prometheus_url), "
                    "replica URLs, or --discover",
                    file=sys.stderr,
                )
                return EXIT_USAGE
            source = prometheus_fleet(settings, prometheus_url)
            mode = "prometheus"
        elif not urls:
            print(
                "slotop: no vLLM or SGLang replica answers on local ports 8000-8015 or 30000",
                file=sys.stderr,
            )
            return EXIT_FAILURE
        else:
            with_password = [url for url in urls if url_password(url) is not None]
            if with_password:
                print(
                    f"slotop: {shown_url(with_password[0])} carries a password; the fleet takes "
                    "none on the command line: give the replicas' API key in the variable "
                    "[replica] api_key_env names (VLLM_API_KEY by default)",
                    file=sys.stderr,
                )
                return EXIT_USAGE
            source = direct_fleet(settings, urls)
            mode = "direct"
    except (PrometheusError, ReplicaUrlError) as exc:
        print(f"slotop: {exc}", file=sys.stderr)
        return EXIT_USAGE
    watch = FleetWatch(source, settings)
    if args.json:
        return _print_json(watch, settings, mode)
    from slotop.tui.fleet.run import run_fleet

    return run_fleet(
        settings, watch, prometheus_url=prometheus_url if mode == "prometheus" else None
    )


def _print_json(watch: FleetWatch, settings: Settings, mode: str) -> int:
    import json
    import time

    from slotop.actions.fleet.report import fleet_to_json

    try:
        if mode == "direct":
            watch.refresh()  # the first scrape; rates and quantiles need a second
            time.sleep(settings.replica.scrape_interval_s)
        table = watch.refresh()
    finally:
        watch.close()
    data = fleet_to_json(table, mode=mode)
    sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
    failed = table.error is not None or table.unanswered is not None
    return EXIT_FAILURE if failed else EXIT_OK
