"""The command line: ``python -m toolkit COMMAND`` (or ``lm-audit COMMAND``).

One module per command family, each with a ``register(subparsers)`` that adds its commands and a ``TITLE`` naming
the family; every command parses its options, calls the library and prints counts (never identifiers).
:mod:`toolkit.cli.common` runs a command under the error policy: a :class:`~toolkit.errors.ToolkitError` is one line
``error: …`` and exit status 2.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from toolkit.cli import audit, data, email, frontier, privacy, probe, review, run, scrub, training
from toolkit.cli.common import run_command

# task order: how `--help` lists the commands
FAMILIES = (run, frontier, probe, audit, data, training, email, scrub, review, privacy)

DESCRIPTION = ("LM anonymity audit toolkit: identifier analysis, privacy-preserving training\n"
               "and memorisation audits of language models.")


def package_version() -> str:
    """The installed distribution's version (``importlib.metadata``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lm-anonymity-toolkit")
    except PackageNotFoundError:
        return "unknown (not installed: pip install -e .)"


def _groups_epilog(groups: list[tuple[str, list[str]]]) -> str:
    """``commands by task:`` then one line per family, its commands wrapped under each other."""
    import textwrap

    width = max(len(title) for title, _ in groups)
    lines = [textwrap.fill(", ".join(names), 79, initial_indent=f"  {title:<{width}}  ",
                           subsequent_indent=" " * (width + 4), break_on_hyphens=False) for title, names in groups]
    return "commands by task:\n" + "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command; ``args.func(args)`` runs the chosen one."""
    p = argparse.ArgumentParser(prog="python -m toolkit", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}",
                   help="print the toolkit's version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    groups = []
    for family in FAMILIES:
        before = set(sub.choices)
        family.register(sub)
        groups.append((family.TITLE, [name for name in sub.choices if name not in before]))
    p.epilog = _groups_epilog(groups)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command and return its exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    return run_command(args)


__all__ = ["build_parser", "main", "package_version"]
