"""`slotop web [URL]` and `slotop web --demo`: the dashboard in a browser, one hand on the dials."""

from __future__ import annotations

import argparse
import sys

from slotop.cli.common import add_allow_remote_load, add_common
from slotop.config import Settings
from slotop.errors import ConfigError

_DESCRIPTION = """\
Serve the live dashboard of a replica (as `slotop attach URL` shows it) to web browsers:
the same panes, keys and actions, for a tuning session around one screen or a demo on
a projector. One dashboard runs, whoever watches: every browser sees the same screen,
and the one holding the control types into it.

The address printed carries a random access token, made anew each start: requests
without it are refused. It listens on 127.0.0.1 (this machine alone) unless --host says
otherwise; from another machine, forward the port over SSH. Every file the page loads
comes from this server (no font or script from the internet), so it works on an
air-gapped box.

The control: the first browser to open the dashboard holds it; its keys reach the app
(l, +/-, s, t, k, n, b ...). Every other browser is read-only, its bar saying who holds
the control and since when. The holder releases it with the bar's button, or by closing
the page; then the next browser to press a key takes it. The dashboard is as large as
the smallest browser watching (80x24 at least). When the last browser closes, the
dashboard stays a minute (a reload keeps it), then quits as `slotop attach` quits: the
probe stops, and the demo's replica with it. The next browser starts a new one.
"""

_EPILOG = """\
examples:
  slotop web --demo                    the simulated replica under a little load
  slotop web http://127.0.0.1:8000     a replica's dashboard, for browsers on this machine
  slotop web URL --port 0              any free port
  slotop web URL --host 0.0.0.0        every network this machine is on (the token still
                                       required; plain HTTP: prefer ssh -L 8750:127.0.0.1:8750)

in the browser, after the address slotop web prints:
  ?name=alice                          the name the other browsers' bars give this one
  ?fontsize=20                         a larger terminal font (16 by default), for a projector

The terminal in the page is textual-serve's (a dependency of slotop), served from here.
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop web` and its flags."""
    from slotop.web.run import DEFAULT_PORT

    parser = sub.add_parser(
        "web",
        help="the dashboard in a browser: several watch, one holds the control",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(parser)
    parser.add_argument(
        "url", nargs="?", help="replica base URL (default from settings; found as attach finds it)"
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="serve `slotop demo`: the simulated replica started with the dashboard, under load",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1, this machine only); 0.0.0.0 is every "
        "network this machine is on: the token is still required, and the traffic is plain HTTP",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port to listen on (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    add_allow_remote_load(parser)
    parser.add_argument(
        "--no-record",
        action="store_true",
        help="do not record the dashboard's sessions (by default each run of the dashboard is "
        "recorded, as `slotop attach` records it)",
    )
    demo = parser.add_argument_group("with --demo", "the simulated replica, as `slotop demo` takes")
    demo.add_argument("--gpu", help="simulated GPU (default h100-sxm)")
    demo.add_argument("--model", help="simulated model (default llama-3.1-8b)")
    demo.add_argument(
        "--concurrency", type=int, help="probe concurrency to start at ([tui] demo_concurrency)"
    )
    parser.set_defaults(handler=_run)


def app_command(args: argparse.Namespace, url: str | None) -> list[str]:
    """The command line of the dashboard the server runs: `slotop attach URL` or `slotop demo`."""
    argv = [sys.executable, "-m", "slotop"]
    argv += ["demo"] if args.demo else ["attach", *([url] if url else [])]
    if args.config is not None:
        argv += ["--config", str(args.config.resolve())]
    if args.no_record:
        argv.append("--no-record")
    if args.demo:
        for flag, value in (
            ("--gpu", args.gpu),
            ("--model", args.model),
            ("--concurrency", args.concurrency),
        ):
            if value is not None:
                argv += [flag, str(value)]
    elif args.allow_remote_load:
        argv.append("--allow-remote-load")
    return argv


def _run(args: argparse.Namespace, settings: Settings) -> int:
    demo_flags = [args.gpu, args.model, args.concurrency]
    if args.demo and args.url:
        raise ConfigError("slotop web takes a replica URL or --demo, not both")
    if not args.demo and any(flag is not None for flag in demo_flags):
        raise ConfigError("--gpu, --model and --concurrency are for --demo")
    from slotop.web.assets import textual_serve_static
    from slotop.web.run import serve

    textual_serve_static()  # before anything starts: a missing package says so at once
    url: str | None = None
    if not args.demo:
        from slotop.tui.run import replica_to_watch

        url = replica_to_watch(settings, args.url) or settings.replica.url
    what = "the simulated replica (slotop demo)" if args.demo else url

    def say(line: str) -> None:
        print(f"slotop web: {line}", file=sys.stderr, flush=True)

    return serve(app_command(args, url), what=str(what), host=args.host, port=args.port, say=say)
