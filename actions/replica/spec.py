"""The managed replica's recipe: dials, the command that starts it, and the state file it leaves.

Pure and file-level parts only; the process group itself is driven by `process.py`.
The state file lets a later `slotop restart` find the replica an earlier `slotop launch` started,
and prove (by PID and kernel start time) that it is still that process before signalling it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from slotop.actions.errors import ActionError
from slotop.actions.replica.engine_dials import DIAL_FLAGS, engine_of_command, kv_dtype_problem
from slotop.collectors.engines import parse_engine
from slotop.collectors.names import Engine
from slotop.config import LAUNCH_DIAL_FLAGS, LaunchSettings, Settings, secret_values
from slotop.redact import NO_SECRETS, Scrubber

STATE_DIR_NAME = "slotop"
_STATE_VERSION = 1


class LaunchError(ActionError):
    """The managed replica cannot be started, found, stopped or restarted."""


class ReplicaExitedError(LaunchError):
    """The replica process ended before /health answered."""


class HealthTimeoutError(LaunchError):
    """The replica did not answer /health within the health timeout."""


@dataclass(frozen=True, slots=True)
class Dials:
    """The start-up settings slotop turns, and the engine whose flags turn them; None leaves the
    replica's own default."""

    kv_cache_dtype: str = "auto"
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    engine: Engine = "vllm"

    def flag_args(self) -> tuple[str, ...]:
        """The engine's flags for these dials, one argument each (`--name=value`): `vllm serve`'s
        or `sglang.launch_server`'s."""
        dtype_flag, seqs_flag, tokens_flag = DIAL_FLAGS[self.engine]
        args = [f"{dtype_flag}={self.kv_cache_dtype}"]
        if self.max_num_seqs is not None:
            args.append(f"{seqs_flag}={self.max_num_seqs}")
        if self.max_num_batched_tokens is not None:
            args.append(f"{tokens_flag}={self.max_num_batched_tokens}")
        return tuple(args)

    def problem(self) -> str | None:
        """Why the engine cannot start with these dials (a KV dtype it does not name), else None."""
        return kv_dtype_problem(self.engine, self.kv_cache_dtype)

    def changes(self, new: Dials) -> tuple[tuple[str, str, str], ...]:
        """Each dial that differs in `new`, as (name, before, after) in words."""
        return tuple(
            (name, dial_words(getattr(self, name)), dial_words(getattr(new, name)))
            for name in DIAL_NAMES
            if getattr(self, name) != getattr(new, name)
        )

    def to_json(self) -> dict[str, Any]:
        """The dials as a JSON-ready mapping; the engine only when it is not vLLM, so what was
        written before engines were kept reads back the same."""
        data: dict[str, Any] = {name: getattr(self, name) for name in DIAL_NAMES}
        if self.engine != "vllm":
            data["engine"] = self.engine
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Dials:
        """Dials back from `to_json`'s mapping (vLLM's when it names no engine)."""
        return cls(
            kv_cache_dtype=str(data.get("kv_cache_dtype") or "auto"),
            max_num_seqs=_optional_int(data.get("max_num_seqs")),
            max_num_batched_tokens=_optional_int(data.get("max_num_batched_tokens")),
            engine=_engine(data.get("engine")),
        )


DIAL_NAMES: tuple[str, ...] = ("kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens")


def dial_words(value: object) -> str:
    """A dial value in words: None is the replica's default."""
    return "default" if value is None else str(value)


def _optional_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _engine(value: object) -> Engine:
    try:
        return parse_engine(value) if isinstance(value, str) else "vllm"
    except ValueError:
        return "vllm"


def launch_engine(settings: Settings) -> Engine:
    """The engine of the managed replica: [replica] engine when named, else the one [launch]
    command starts (`sglang.launch_server` or `sglang serve` is SGLang), else vLLM."""
    named = settings.replica.engine.strip().lower()
    if named != "auto":
        return parse_engine(named)
    return engine_of_command(settings.launch.command) or "vllm"


def dials_from_settings(launch: LaunchSettings, engine: Engine = "vllm") -> Dials:
    """The dials [launch] holds, 0 meaning the replica's default, for the engine's flags."""
    return Dials(
        kv_cache_dtype=launch.kv_cache_dtype.strip(),
        max_num_seqs=launch.max_num_seqs or None,
        max_num_batched_tokens=launch.max_num_batched_tokens or None,
        engine=engine,
    )


def url_host_port(url: str) -> tuple[str, int]:
    """The host and port a replica URL names (80/443 when it names none)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    return host, parts.port or (443 if parts.scheme == "https" else 80)


def sim_command(url: str, python: str = sys.executable) -> tuple[str, ...]:
    """The simulated replica's command on the URL's host and port (the demo's launch command)."""
    host, port = url_host_port(url)
    return (python, "-m", "slotop.sim", "--host", host, "--port", str(port))


def split_dial_args(args: Sequence[str], base: Dials = Dials()) -> tuple[tuple[str, ...], Dials]:
    """Take the dial flags (`--flag value` or `--flag=value`) out of `args` into dials."""
    rest: list[str] = []
    values: dict[str, object] = {}
    items = list(args)
    index = 0
    while index < len(items):
        flag, equals, inline = items[index].partition("=")
        if flag not in LAUNCH_DIAL_FLAGS:
            rest.append(items[index])
            index += 1
            continue
        if equals:
            value, index = inline, index + 1
        elif index + 1 < len(items):
            value, index = items[index + 1], index + 2
        else:
            raise LaunchError(f"{flag} needs a value")
        name = flag.removeprefix("--").replace("-", "_")
        if name == "kv_cache_dtype":
            values[name] = value
        else:
            try:
                values[name] = int(value) or None
            except ValueError:
                raise LaunchError(f"{flag} {value!r}: expected a whole number") from None
    return tuple(rest), dataclasses.replace(base, **values)  # type: ignore[arg-type]


def demo_launch_spec(
    url: str, sim_args: Sequence[str], state_folder: Path
) -> tuple[LaunchSpec, Dials]:
    """The simulated replica as a managed replica (what `slotop demo` runs), and its dials.

    Dial flags among `sim_args` become the dials, so restarts can change them.
    """
    rest, dials = split_dial_args(sim_args)
    spec = LaunchSpec(
        url=url,
        command=(*sim_command(url), *rest),
        log_path=state_folder / "demo-replica.log",
        state_path=state_folder / "demo-replica.json",
        health_timeout_s=60.0,
        stop_grace_s=5.0,
        drain_timeout_s=10.0,
        dials=dials,
    )
    return spec, dials


def state_dir() -> Path:
    """slotop's state folder: $XDG_STATE_HOME/slotop, else ~/.local/state/slotop."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / STATE_DIR_NAME


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """Everything needed to start, stop and find the managed replica, resolved from settings."""

    url: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    working_dir: Path | None = None
    log_path: Path = Path("replica.log")
    state_path: Path = Path("replica.json")
    health_timeout_s: float = 600.0
    stop_grace_s: float = 30.0
    drain_timeout_s: float = 30.0
    dials: Dials = Dials()
    restart_command: tuple[str, ...] = ()
    api_key: str | None = field(default=None, repr=False, compare=False)
    scrub: Scrubber = field(default=NO_SECRETS, repr=False, compare=False)
    """Hides the settings' secrets in what the replica writes to its log, before it is shown."""

    def argv(self, dials: Dials) -> list[str]:
        """The start command with the dial flags appended."""
        return [*self.command, *dials.flag_args()]

    def restart_argv(self, dials: Dials) -> list[str]:
        """The restart command template with the dials filled in, each value its own argument."""
        return restart_command_argv(self.restart_command, dials)


def restart_command_argv(template: tuple[str, ...], dials: Dials) -> list[str]:
    """Fill a restart template: {name} inside an argument, {dial_args} as the flags themselves."""
    values = {name: dial_words(getattr(dials, name)) for name in DIAL_NAMES}
    argv: list[str] = []
    for argument in template:
        if argument == "{dial_args}":
            argv.extend(dials.flag_args())
        else:
            argv.append(argument.format(**values))
    return argv


def launch_spec_from_settings(
    settings: Settings, *, state_folder: Path | None = None
) -> LaunchSpec:
    """Resolve [launch] and [replica] into a spec; an empty command means the simulated replica."""
    launch = settings.launch
    url = settings.replica.url
    host, port = url_host_port(url)
    folder = state_folder or state_dir()
    working_dir = Path(launch.working_dir).expanduser() if launch.working_dir else None
    log_path = (
        Path(launch.log_file).expanduser() if launch.log_file else folder / f"replica-{port}.log"
    )
    if not log_path.is_absolute():
        log_path = (working_dir or Path.cwd()) / log_path
    return LaunchSpec(
        url=url,
        command=launch.command or sim_command(url),
        env=launch.env,
        working_dir=working_dir,
        log_path=log_path,
        state_path=folder / f"managed-{host}-{port}.json",
        health_timeout_s=launch.health_timeout_s,
        stop_grace_s=launch.stop_grace_s,
        drain_timeout_s=launch.drain_timeout_s,
        dials=dials_from_settings(launch, launch_engine(settings)),
        restart_command=launch.restart_command,
        api_key=settings.replica.api_key,
        scrub=Scrubber(secret_values(settings)),
    )


@dataclass(frozen=True, slots=True)
class ManagedState:
    """What the state file says about the replica slotop started: which process, with what."""

    pid: int
    start_ticks: int | None
    argv: tuple[str, ...]
    dials: Dials
    url: str
    log_path: str
    log_offset: int
    started_at_unix_s: float


def write_state(path: Path, state: ManagedState | None, last_downtime_s: float | None) -> None:
    """Write the state file atomically; with no process, keep only the last measured downtime
    (and the record of a restart under way, which only `write_restart` changes)."""
    data: dict[str, Any] = {"version": _STATE_VERSION, "last_downtime_s": last_downtime_s}
    kept = _read_json(path)
    for key in _ENTRIES:
        if isinstance(kept.get(key), dict):
            data[key] = kept[key]
    if state is not None:
        data["replica"] = {
            "pid": state.pid,
            "start_ticks": state.start_ticks,
            "argv": list(state.argv),
            "dials": state.dials.to_json(),
            "url": state.url,
            "log_path": state.log_path,
            "log_offset": state.log_offset,
            "started_at_unix_s": state.started_at_unix_s,
        }
    _write_json(path, data)


_ENTRIES = ("restart", "start_spread")
"""What the state file keeps whatever process it records: a restart under way, and the replica's
start-to-start spread (`actions.restart.starts`)."""


def write_entry(path: Path, key: str, record: Mapping[str, Any] | None) -> None:
    """Put one of `_ENTRIES` in the state file (None: drop it), keeping the rest."""
    if key not in _ENTRIES:
        raise ValueError(f"the state file keeps no {key!r}")
    data = _read_json(path) or {"version": _STATE_VERSION, "last_downtime_s": None}
    if record is None:
        data.pop(key, None)
    else:
        data[key] = dict(record)
    _write_json(path, data)


def read_entry(path: Path, key: str) -> dict[str, Any] | None:
    """One of `_ENTRIES` as the state file holds it, None when it holds none."""
    record = _read_json(path).get(key)
    return record if isinstance(record, dict) else None


def write_restart(path: Path, record: Mapping[str, Any] | None) -> None:
    """Put the record of a restart under way in the state file (None: it ended), keeping the
    rest; a slotop killed mid-restart leaves it for the next one to find."""
    write_entry(path, "restart", record)


def read_restart(path: Path) -> dict[str, Any] | None:
    """The record of a restart under way, None when the state file holds none."""
    return read_entry(path, "restart")


def _read_json(path: Path) -> dict[str, Any]:
    """The state file as written, {} when there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_json(path: Path, data: Mapping[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        partial.replace(path)
    except OSError as exc:
        raise LaunchError(
            f"cannot write the replica state file {path} ({exc.strerror or exc}); "
            "check that the folder is writable, or set $XDG_STATE_HOME"
        ) from None


def read_state(path: Path) -> tuple[ManagedState | None, float | None]:
    """Read the state file: the recorded replica (None when none) and the last downtime."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as exc:
        raise LaunchError(
            f"cannot read the replica state file {path} ({exc}); delete it if no replica that "
            "slotop started is running"
        ) from None
    downtime = data.get("last_downtime_s") if isinstance(data, dict) else None
    downtime = float(downtime) if isinstance(downtime, int | float) else None
    replica = data.get("replica") if isinstance(data, dict) else None
    if not isinstance(replica, dict):
        return None, downtime
    try:
        state = ManagedState(
            pid=int(replica["pid"]),
            start_ticks=_optional_int(replica.get("start_ticks")),
            argv=tuple(str(a) for a in replica["argv"]),
            dials=Dials.from_json(replica.get("dials") or {}),
            url=str(replica["url"]),
            log_path=str(replica["log_path"]),
            log_offset=int(replica.get("log_offset", 0)),
            started_at_unix_s=float(replica.get("started_at_unix_s", 0.0)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise LaunchError(
            f"the replica state file {path} is damaged ({exc!r}); delete it if no replica that "
            "slotop started is running"
        ) from None
    return state, downtime


@contextlib.contextmanager
def restart_lock(state_path: Path) -> Iterator[None]:
    """Hold the replica's lock file while changing it; refuse when another slotop holds it."""
    lock_path = state_path.with_name(state_path.name + ".lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        handle = lock_path.open("a")
    except OSError as exc:
        raise LaunchError(
            f"cannot open the lock file {lock_path} ({exc.strerror or exc})"
        ) from None
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LaunchError(
                f"another slotop is starting or restarting this replica (it holds {lock_path}); "
                "wait for it to finish"
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
