"""The ``streamproc`` command: ``run`` and ``describe`` (``reprocess`` plugs in the same way).

::

    streamproc run topologies.sessions --bootstrap-servers localhost:9092 --application-id sessions
    streamproc describe topologies.currency

``MODULE[:ATTR]`` names a module exposing ``build() -> Topology`` or a ``topology`` attribute; with
``:ATTR`` that attribute is used (a Topology, or a callable returning one). ``run`` takes every
setting of :class:`~streamproc.config.Config` as a flag (``--commit-interval-ms 500``), plus
``--config FILE``; ``STREAMPROC_*`` variables and the file fill in what flags do not give.

Exit status: 0 after a graceful stop (SIGTERM/SIGINT: stop fetching, finish the batch, commit,
close, within ``shutdown_timeout_ms``; a second signal exits at once), 1 on a fatal error (printed
as one clear line), 2 on a usage or configuration error, including topics on the cluster that do not
fit the topology (:class:`~streamproc.errors.TopicSetupError`: one line per problem, before any
record is processed).

Subcommands are :class:`Command` entries of :data:`COMMANDS`; a new one (the Spark reprocessing
issue's ``reprocess``) is one more entry: a name, a help line, a function adding its arguments to
its sub-parser and a handler ``(args) -> exit status``.
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import logging
import re
import signal
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .config import CONFIG_FILE_ENV, Config, ConfigError, settings
from .engine.loading import TopologyLoadError
from .engine.loading import load_topology as _load_topology
from .errors import TopicSetupError

__all__ = ["COMMANDS", "Command", "add_config_arguments", "build_parser", "load_topology", "main"]

log = logging.getLogger("streamproc.cli")

LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


class UsageError(Exception):
    """Bad command-line input (exit status 2)."""


@dataclass(frozen=True)
class Command:
    """A subcommand: ``configure(parser)`` adds its arguments, ``handler(args)`` runs it."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    handler: Callable[[argparse.Namespace], int]


# ---- loading a topology -----------------------------------------------------------------------


def load_topology(spec: str) -> Any:
    """``MODULE[:ATTR]`` -> a Topology, the current directory searched first
    (:func:`streamproc.engine.loading.load_topology`)."""
    return _load_topology(spec, search_cwd=True)


# ---- config flags -------------------------------------------------------------------------------


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per setting (``--commit-interval-ms``), all defaulting to "not given"."""
    group = parser.add_argument_group("settings (flag > STREAMPROC_* env > config file > default)")
    group.add_argument("--config", metavar="FILE", default=None,
                       help=f"config file, .toml or .properties (default: ${CONFIG_FILE_ENV})")
    for info in settings():
        default = info.default if info.default not in ("", None) else "none"
        helptext = f"{info.doc} [env {info.env}; default {default}]"
        kwargs: dict[str, Any] = {"dest": info.name, "default": argparse.SUPPRESS, "help": helptext}
        if info.is_map:
            kwargs.update(action="append", metavar=info.metavar or "KEY=VALUE")
        elif info.choices:
            kwargs.update(metavar="{" + ",".join(info.choices) + "}")
        else:
            kwargs.update(metavar=info.metavar or "VALUE")
        group.add_argument(info.flag, **kwargs)


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    return {info.name: getattr(args, info.name) for info in settings() if hasattr(args, info.name)}


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), format=LOG_FORMAT, force=True)
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLogger().level))


# ---- run ----------------------------------------------------------------------------------------


def _configure_run(p: argparse.ArgumentParser) -> None:
    p.add_argument("topology", metavar="MODULE[:ATTR]", help="module exposing build() or `topology`")
    add_config_arguments(p)


def _run(args: argparse.Namespace) -> int:
    topology = load_topology(args.topology)
    defaults = {"application_id": topology.application_id} if topology.application_id else None
    config = Config.load(_flags(args), file=args.config, defaults=defaults)
    _setup_logging(config.log_level)
    log.info("streamproc run %s: application_id=%s bootstrap_servers=%s guarantee=%s loop=%s",
             args.topology, config.application_id, config.bootstrap_servers, config.processing_guarantee,
             config.loop)
    for name, value in config.describe():
        log.debug("setting %s = %r", name, value)
    return _run_app(topology, config)


def _loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if name == "asyncio":
        return None
    try:
        import uvloop
    except ImportError as exc:
        raise ConfigError(f"loop: 'uvloop' is not installed ({exc}); install it or pass --loop asyncio") from None
    return uvloop.new_event_loop


def _run_app(topology: Any, config: Config) -> int:
    from .runtime.app import StreamApp

    async def serve() -> None:
        app = StreamApp(topology, config)
        loop = asyncio.get_running_loop()

        def on_signal(sig: signal.Signals) -> None:
            log.info("received %s", sig.name)
            for s in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(s)  # a second signal acts at once (default handlers)
            app.request_stop()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        await app.run()

    with asyncio.Runner(loop_factory=_loop_factory(config.loop)) as runner:
        try:
            runner.run(serve())
        except TopicSetupError:
            raise  # a usage error: exit 2 with its message (main)
        except KeyboardInterrupt:
            log.error("interrupted")
            return 130
        except Exception as exc:  # noqa: BLE001 - the one-line fatal report
            log.error("streamproc stopped on a fatal error: %s: %s", type(exc).__name__, exc)
            return 1
    log.info("stopped")
    return 0


# ---- describe -----------------------------------------------------------------------------------


def _configure_describe(p: argparse.ArgumentParser) -> None:
    p.add_argument("topology", metavar="MODULE[:ATTR]", help="module exposing build() or `topology`")
    p.add_argument("--format", choices=("text", "mermaid"), default="text",
                   help="text: Kafka Streams' form (sub-topologies, nodes, topics, stores); mermaid: only a "
                        "Mermaid flowchart, for a ```mermaid block in Markdown (default text)")
    p.add_argument("--application-id", default=None,
                   help="name repartition and changelog topics as the daemon run with this id does "
                        "(<id>-<name>-repartition, <id>-<store>-changelog); default: the topology's own id, "
                        "else <application_id> placeholders")


def _describe(args: argparse.Namespace) -> int:
    topology = load_topology(args.topology)
    print(topology.describe(args.format, application_id=args.application_id), end="")
    return 0


# ---- reprocess (Spark; imported lazily so `run` never loads PySpark) ------------------------------


def _configure_reprocess(p: argparse.ArgumentParser) -> None:
    from .spark.cli import add_reprocess_arguments

    add_reprocess_arguments(p)


def _reprocess(args: argparse.Namespace) -> int:
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        raise UsageError("PySpark is not installed: pip install 'streamproc[spark]' (only reprocess needs it; "
                         "the daemon and the TopologyTestDriver do not)")
    from .spark.cli import run_reprocess

    return run_reprocess(args)


# ---- native: which hot-path modules run compiled ---------------------------------------------------


def _configure_native(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true", help="exit 1 when any module runs from its Python source")


def _native(args: argparse.Namespace) -> int:
    from . import _native

    current = _native.status()
    for module, why in current.items():
        print(f"{module:45} {why}")
    compiled = sum(1 for why in current.values() if why == "compiled")
    print(f"{compiled}/{len(current)} hot-path modules compiled")
    return 1 if args.check and compiled != len(current) else 0


# ---- the parser -----------------------------------------------------------------------------------

COMMANDS: list[Command] = [
    Command("run", "run a topology as a daemon on Kafka", _configure_run, _run),
    Command("describe", "print a topology's sub-topologies, topics and stores", _configure_describe, _describe),
    Command("reprocess", "re-run a topology over history on Spark", _configure_reprocess, _reprocess),
    Command("native", "list the hot-path modules and whether each runs compiled", _configure_native, _native),
]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamproc")
    except PackageNotFoundError:  # run from a source tree that is not installed
        return "unknown (not installed)"


def build_parser(commands: Sequence[Command] | None = None) -> argparse.ArgumentParser:
    """The ``streamproc`` parser: one sub-parser per command (``handler`` holds its function)."""
    parser = argparse.ArgumentParser(prog="streamproc", description="An asyncio stream processor for Kafka.")
    parser.add_argument("--version", action="version", version=f"streamproc {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in commands if commands is not None else COMMANDS:
        p = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help)
        cmd.configure(p)
        p.set_defaults(handler=cmd.handler, command_parser=p)
    return parser


def unknown_options_message(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """One line naming the arguments ``parser`` does not know, each option with the closest one it
    knows ("did you mean --bootstrap-servers?")."""
    known = sorted(set(re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", parser.format_help())))
    options = [arg for arg in unknown if arg.startswith("-")]
    if not options:  # only extra positional arguments
        return f"unexpected argument(s): {' '.join(unknown)}"
    parts = []
    for arg in options:  # a positional after an unknown option is that option's value: not reported
        name = arg.split("=", 1)[0]
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        parts.append(f"unrecognized option {name}{hint}")
    return "; ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command_parser = getattr(args, "command_parser", parser)
        command_parser.print_usage(sys.stderr)
        print(f"{command_parser.prog}: error: {unknown_options_message(command_parser, unknown)}", file=sys.stderr)
        return 2
    try:
        return int(args.handler(args))
    except (UsageError, ConfigError, TopicSetupError, TopologyLoadError) as exc:
        print(f"streamproc {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
