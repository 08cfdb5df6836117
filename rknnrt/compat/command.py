"""`rknnrt compat install | uninstall | status [--target DIR | --user]`."""

from __future__ import annotations

import argparse
import sys

from . import layer


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compat", help="import names rknn.api / rknnlite.api forwarding to "
                       "rknnrt, for unchanged vendor scripts")  # fmt: skip
    p.add_argument("action", choices=("install", "uninstall", "status"))
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--target", metavar="DIR", help="site directory (default: this interpreter's site-packages)"
    )
    where.add_argument("--user", action="store_true", help="the user site directory")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    site = args.target or layer.default_site(args.user)
    try:
        if args.action == "install":
            written = layer.install(site)
            if not written:
                print(f"I compat: already installed in {site}")
            else:
                print(f"I compat: installed {', '.join(layer.IMPORT_NAMES)} in {site} "
                      f"({len(written)} files, forwarding to rknnrt)")  # fmt: skip
        elif args.action == "uninstall":
            removed, kept = layer.uninstall(site)
            if not removed and not kept:
                print(f"I compat: not installed in {site}")
            else:
                print(f"I compat: removed {len(removed)} files from {site}")
            if kept:
                sys.stderr.write(f"W compat: kept (changed since install): {', '.join(kept)}\n")
        else:
            state = layer.status(site)
            if state.installed:
                print(f"compat: active in {site}: {', '.join(layer.IMPORT_NAMES)} -> rknnrt")
            else:
                print(f"compat: not installed in {site}")
            for rel in state.modified:
                print(f"compat: {rel} changed or missing since install")
            for dist in state.vendor:
                print(f"compat: the vendor's {dist} is installed")
    except layer.CompatError as exc:
        sys.stderr.write(f"E compat: {exc}\n")
        return 1
    return 0
