"""``kafka-core users list|set-password|delete`` (SCRAM credentials) and ``kafka-core quotas
describe|alter`` (client quotas), as ``kafka-configs.sh`` does for users and quotas.

A password never comes from the command line (it would sit in the shell's history and in
``ps``): ``set-password`` asks for it twice on the terminal, or reads the first line of stdin
with ``--password-stdin``. It is salted and hashed before it leaves the process.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from kafka_core.cli.argtypes import positive_int
from kafka_core.cli.connect import open_admin, parse_pairs
from kafka_core.cli.output import EXIT_FAILED, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, CliError, Output, one_line

__all__ = ["add_parsers"]

MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ENTITY = "<default>"  # the default entity of a quota type (--user '<default>')


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    users = sub.add_parser("users", parents=[common], help="SCRAM users: list, set a password, delete")
    usub = users.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = usub.add_parser("list", parents=[common], help="users with SCRAM credentials and their mechanisms")
    ls.add_argument("users", nargs="*", metavar="USER", help="(default: every user)")
    ls.set_defaults(run=list_users)
    sp = usub.add_parser("set-password", parents=[common], help="create a SCRAM user or change its password")
    sp.add_argument("user", metavar="USER")
    sp.add_argument("--mechanism", choices=MECHANISMS, default="SCRAM-SHA-512")
    sp.add_argument("--iterations", type=positive_int, default=8192, help="4096..16384 (default 8192)")
    sp.add_argument("--password-stdin", action="store_true", help="read the password from stdin's first line")
    sp.set_defaults(run=set_password)
    de = usub.add_parser("delete", parents=[common], help="remove a user's SCRAM credentials")
    de.add_argument("user", metavar="USER")
    de.add_argument("--mechanism", choices=MECHANISMS, help="(default: every mechanism it has)")
    de.set_defaults(run=delete_user)

    quotas = sub.add_parser("quotas", parents=[common], help="client quotas: describe and alter")
    qsub = quotas.add_subparsers(dest="action", metavar="ACTION", required=True)
    qd = qsub.add_parser("describe", parents=[common], help="quotas by user, client id or IP")
    _entity_options(qd)
    qd.add_argument("--strict", action="store_true", help="only entities naming exactly these types")
    qd.set_defaults(run=describe_quotas)
    qa = qsub.add_parser("alter", parents=[common], help="set or remove quotas of one entity")
    _entity_options(qa)
    qa.add_argument("--set", action="append", metavar="QUOTA=VALUE", help="e.g. producer_byte_rate=1048576")
    qa.add_argument("--remove", action="append", metavar="QUOTA", help="e.g. consumer_byte_rate")
    qa.set_defaults(run=alter_quotas)


def _entity_options(p: argparse.ArgumentParser) -> None:
    for flag, kind in (("--user", "user"), ("--client-id", "client-id"), ("--ip", "ip")):
        p.add_argument(flag, metavar=kind.upper(), help=f"the {kind} ({DEFAULT_ENTITY!r}: the default one)")


def _entity(args: argparse.Namespace) -> dict[str, str | None]:
    given = {"user": args.user, "client-id": args.client_id, "ip": args.ip}
    return {k: None if v == DEFAULT_ENTITY else v for k, v in given.items() if v is not None}


def _show(entity: dict[str, str | None]) -> str:
    return ", ".join(f"{k}={DEFAULT_ENTITY if v is None else v}" for k, v in entity.items())


def list_users(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        results = admin.describe_user_scram_credentials(args.users or None)
    code = EXIT_OK
    rows: list[dict[str, Any]] = []
    for user in args.users or sorted(results):
        res = results.get(user)
        if res is None or not res.ok:
            missing = res is None or getattr(res.error, "name", "") == "RESOURCE_NOT_FOUND"
            code = code or (EXIT_NOT_FOUND if missing else EXIT_FAILED)
            why = "has no SCRAM credentials" if missing else one_line(res.error if res else "")
            print(f"kafka-core users list: error: user {user!r} {why}", file=sys.stderr, flush=True)
            continue
        rows.append(
            {
                "user": user,
                "credentials": [
                    {"mechanism": c.mechanism, "iterations": c.iterations} for c in res.value or []
                ],
            }
        )
    if out.as_json:
        out.json(rows)
    else:
        out.table(
            ["user", "mechanisms"],
            [
                [r["user"], " ".join(f"{c['mechanism']}({c['iterations']})" for c in r["credentials"])]
                for r in rows
            ],
        )
    return code


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        if not sys.stdin.isatty():
            raise CliError("no terminal to ask for the password on: use --password-stdin", EXIT_USAGE)
        password = getpass.getpass(f"password for {args.user}: ")
        if getpass.getpass("again: ") != password:
            raise CliError("the passwords do not match", EXIT_USAGE)
    if not password:
        raise CliError("the password is empty", EXIT_USAGE)
    return password


def set_password(args: argparse.Namespace, out: Output) -> int:
    from kafka_core.admin import ScramUpsertion

    password = _read_password(args)
    change = ScramUpsertion(args.user, password, args.mechanism, args.iterations)
    with open_admin(args) as admin:
        res = admin.alter_user_scram_credentials([change])[args.user]
    if not res.ok:
        raise CliError(f"setting the password of {args.user!r} failed: {one_line(res.error)}", EXIT_FAILED)
    if out.as_json:
        out.json(
            {"user": args.user, "mechanism": args.mechanism, "iterations": args.iterations, "status": "set"}
        )
    else:
        out.line(f"{args.mechanism} password of {args.user} set")
    return EXIT_OK


def delete_user(args: argparse.Namespace, out: Output) -> int:
    from kafka_core.admin import ScramDeletion

    with open_admin(args) as admin:
        if args.mechanism is not None:
            mechanisms = [args.mechanism]
        else:
            found = admin.describe_user_scram_credentials([args.user]).get(args.user)
            if found is None or not found.ok:
                raise CliError(f"user {args.user!r} has no SCRAM credentials", EXIT_NOT_FOUND)
            mechanisms = [c.mechanism for c in found.value or []]
        for mechanism in mechanisms:  # one change per user per request, as the broker takes them
            res = admin.alter_user_scram_credentials([ScramDeletion(args.user, mechanism)])[args.user]
            if not res.ok:
                missing = getattr(res.error, "name", "") == "RESOURCE_NOT_FOUND"
                raise CliError(
                    f"user {args.user!r} has no {mechanism} credential"
                    if missing
                    else f"deleting {args.user!r}'s {mechanism} credential failed: {one_line(res.error)}",
                    EXIT_NOT_FOUND if missing else EXIT_FAILED,
                )
    if out.as_json:
        out.json({"user": args.user, "deleted": mechanisms})
    else:
        out.line(f"{args.user}: {' '.join(mechanisms)} deleted")
    return EXIT_OK


def describe_quotas(args: argparse.Namespace, out: Output) -> int:
    with open_admin(args) as admin:
        found = admin.describe_client_quotas(_entity(args), strict=args.strict)
    rows = [
        {"entity": e.as_dict(), "quotas": q}
        for e, q in sorted(found.items(), key=lambda kv: str(kv[0].parts))
    ]
    if out.as_json:
        out.json(rows)
    elif not rows:
        out.line("no quotas")
    else:
        out.table(
            ["entity", "quotas"],
            [
                [_show(r["entity"]), " ".join(f"{k}={v:g}" for k, v in sorted(r["quotas"].items()))]
                for r in rows
            ],
        )
    return EXIT_OK


def alter_quotas(args: argparse.Namespace, out: Output) -> int:
    from kafka_core.admin import ClientQuotaEntity

    entity = _entity(args)
    if not entity:
        raise CliError("name the entity: --user, --client-id and/or --ip", EXIT_USAGE)
    changes: dict[str, float | None] = {}
    for key, value in parse_pairs(args.set, "--set"):
        try:
            changes[key] = float(value)
        except ValueError:
            raise CliError(f"--set {key}: not a number: {value!r}", EXIT_USAGE) from None
    for key in args.remove or ():
        changes[key] = None
    if not changes:
        raise CliError("nothing to change: --set QUOTA=VALUE or --remove QUOTA", EXIT_USAGE)
    target = ClientQuotaEntity.of(entity)
    with open_admin(args) as admin:
        res = admin.alter_client_quotas({target: changes})[target]
    if not res.ok:
        raise CliError(f"altering the quotas of {_show(entity)} failed: {one_line(res.error)}", EXIT_FAILED)
    if out.as_json:
        out.json({"entity": entity, "changes": changes, "status": "altered"})
    else:
        out.line(f"quotas of {_show(entity)} altered")
    return EXIT_OK
