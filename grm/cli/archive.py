"""`grm archive stats|train|demote`: the archive tier's subcommands. Common flags go before or after
the action.

stats   what the tier holds, from the catalog only (no model is loaded)
train   train codebooks for the current model on PATH... (or the tenant's stored documents) and
        save them in the store
demote  archive stored blocks or grafts (KEY... or --all) with the newest codebooks of the model
"""

from __future__ import annotations

import argparse

from grm.cli.common import Choices, common_parser, emit, open_runtime, open_store, show_progress
from grm.errors import UserInputError

RULES = Choices("grm.runtime.archiving", "SALIENT_RULES")
SALIENT_STORAGES = Choices("grm.runtime.archiving", "SALIENT_STORAGES")
CODEBOOK_STORAGES = Choices("grm.runtime.archiving", "CODEBOOK_STORAGES")
CODECS = Choices("grm.runtime.archiving", "CODECS")
KINDS = Choices("grm.runtime.archiving", "DEMOTABLE_KINDS")


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    nested = common_parser(nested=True)
    p = sub.add_parser("archive", parents=[common], help="archive tier: stats, train codebooks, demote blocks",
                       description="The archive tier: cold K/V as RVQ index streams with an exact window "
                       "(mounting from it is lossy, never an exact hit).")
    asub = p.add_subparsers(dest="archive_command", metavar="ACTION")
    asub.required = True
    asub.add_parser("stats", parents=[nested], help="archived records, tokens, bytes, ratios, codebooks",
                    description="What the archive tier holds (catalog only). Ratios are against fp16 K/V of "
                    "the same tokens; all-in adds the codebooks the records use, once.")
    t = asub.add_parser("train", parents=[nested], help="train codebooks for the model and store them",
                        description="Train per-head RVQ codebooks on PATH... (files or folders), or on the "
                        "tenant's stored documents, for the current model; save them in the store.")
    t.add_argument("paths", nargs="*", metavar="PATH", help="files or folders to train on (default: stored documents)")
    t.add_argument("--k", type=int, default=None, help="centroids per stage (default 256, smaller for short text)")
    t.add_argument("--key-stages", type=int, default=4, help="stages for keys (default 4)")
    t.add_argument("--value-stages", type=int, default=3, help="stages for values (default 3)")
    t.add_argument("--iters", type=int, default=15, help="Lloyd rounds per k-means (default 15)")
    t.add_argument("--max-train", type=int, default=60000, help="vectors per codebook (default 60000)")
    t.add_argument("--storage", default="int8", choices=CODEBOOK_STORAGES, metavar="FORM",
                   help="codebook storage: %(choices)s (default int8: a float16 scale per centroid, half the bytes "
                   "of float16)")
    t.add_argument("--seed", type=int, default=0, help="random seed of k-means (default 0)")
    d = asub.add_parser("demote", parents=[nested], help="archive stored blocks or grafts (KEY... or --all)",
                        description="Archive stored blocks (or, with --kind graft, grafts that hold their own K/V: "
                        "chat evidence, facts, slices) of the tenant with the newest codebooks of the current "
                        "model (or --codebook VERSION). With --recent N the last N tokens of each stay exact; with "
                        "--keep-salient digits|names the tokens holding numbers (and names) also keep rows of their own. KEY may be "
                        "a unique prefix. Mounting from the archive is lossy, never an exact hit.")
    d.add_argument("keys", nargs="*", metavar="KEY", help="key (or unique prefix) of a stored record of --kind")
    d.add_argument("--kind", choices=KINDS, default=None, metavar="KIND",
                   help="what to demote: %(choices)s (default block; document grafts follow their block)")
    d.add_argument("--all", action="store_true",
                   help="every stored record of --kind of the tenant (fact grafts stay exact unless named)")
    d.add_argument("--keep-newest", type=int, default=0, metavar="N", help="with --all: leave the N newest (default 0)")
    d.add_argument("--drop-exact", action="store_true",
                   help="drop the exact K/V once the archive record commits: a block row is deleted (the text "
                   "stays), a graft row stays without its payload")
    d.add_argument("--recent", type=int, default=0, metavar="N",
                   help="tokens at the end of each record kept exact (default 0: the sinks and the live turn, "
                   "never archived, are the exact window)")
    d.add_argument("--keep-salient", default="none", choices=RULES, metavar="RULE",
                   help="salient tokens whose K/V rows are also kept beside the index streams (int8 per row by "
                   "default, see --salient-storage): none (default), digits (every token "
                   "with a digit), names (digits and every token of a capitalized word). Quantized spans lose "
                   "numbers and names; bench/results/archive_recall.md measures what each rule costs and recalls")
    d.add_argument("--salient-context", type=int, default=4, metavar="N",
                   help="with --keep-salient: also keep the N tokens either side of each salient token (default 4: "
                   "digits alone recalled 13/40 facts, digits with 4 tokens of context 30/40, as many as the exact K/V)")
    d.add_argument("--salient-storage", default="int8", choices=SALIENT_STORAGES, metavar="FORM",
                   help="how salient tokens' rows are stored: int8 (default: a float16 scale per row, about half "
                   "the bytes of float16; digits recalled 13/40 facts int8, 14/40 float16) or float16")
    d.add_argument("--key-stages", type=int, default=None, help="key stages to use (default: all trained)")
    d.add_argument("--value-stages", type=int, default=None, help="value stages to use (default: all trained)")
    d.add_argument("--codebook", metavar="VERSION", help="codebook version (default: the newest of this model)")
    d.add_argument("--codec", default="chaos", choices=CODECS, metavar="CODEC",
                   help="index stream codec: %(choices)s (default chaos)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.archive_command == "stats":
        from grm.runtime.archiving import stats

        with open_store(args, read_only=True) as store:
            emit(stats(store, args.tenant), args.json)
        return 0
    if args.archive_command == "train":
        return _train(args)
    return _demote(args)


def _bar(args: argparse.Namespace, desc: str, unit: str):
    """A progress bar on stderr and the (done, total) callback that moves it."""
    from tqdm import tqdm

    bar = tqdm(desc=desc, unit=unit, disable=not show_progress(args), leave=False)

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    return bar, progress


def _train(args: argparse.Namespace) -> int:
    from grm.runtime.archiving import TrainConfig, train
    from grm.runtime.files import collect

    cfg = TrainConfig(k=args.k, key_stages=args.key_stages, value_stages=args.value_stages, iters=args.iters,
                      max_train=args.max_train, seed=args.seed, storage=args.storage)
    with open_runtime(args) as rt:
        if args.paths:
            text = "\n\n".join(d.text for d in collect(args.paths))
        else:
            text = rt.stored_text()
        bar, progress = _bar(args, "harvest", "window")
        with bar:
            out = train(rt, text, cfg, progress)
    emit(out, args.json)
    return 0


def _demote(args: argparse.Namespace) -> int:
    from grm.runtime.archiving import DEMOTABLE_KINDS, ArchiveConfig, demote

    if args.all == bool(args.keys):
        raise UserInputError("give KEY... or --all (not both)")
    if args.keep_newest < 0 or (args.keep_newest and not args.all):
        raise UserInputError("--keep-newest N needs --all and N >= 0")
    kind = args.kind or DEMOTABLE_KINDS[0]
    cfg = ArchiveConfig(recent=args.recent, key_stages=args.key_stages, value_stages=args.value_stages,
                        codec=args.codec, drop_exact=args.drop_exact, keep_salient=args.keep_salient,
                        salient_context=args.salient_context, salient_storage=args.salient_storage)
    with open_runtime(args, create=False) as rt:
        bar, progress = _bar(args, "demote", kind)
        with bar:
            version, report = demote(rt, None if args.all else args.keys, kind, cfg, version=args.codebook,
                                     keep_newest=args.keep_newest, progress=progress)
    out = {"codebook": version, **report.to_json()}
    if not args.json:
        out.pop("keys")
        out.pop("skipped_keys")
    emit(out, args.json)
    return 0
