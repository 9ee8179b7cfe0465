"""``manifest.json``: which command wrote an output directory, and the SHA-256 of every file it wrote.

``compile`` and ``route`` write their directory whole (:func:`compiler.base.outputs.staged_dir`) and
record in it what they wrote. That record is what makes a directory safe to act on later:
``install`` pushes only files the manifest lists with the hash they have now (a hand-edited
entries file, a stale switch directory of an earlier route, an unfinished ``build`` are refused),
and a later compile replaces only a directory that p4sub wrote (not one the user keeps files in).
The format is documented in docs/compiler.md, "Output directories".
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from compiler import __version__
from compiler.base.atomic import staged
from compiler.base.errors import P4subError

MANIFEST = "manifest.json"
FORMAT = "p4sub-output/1"
RECOMPILE = "recompile it with this p4sub (p4sub compile or p4sub route, -o a new or empty directory)"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_files(root: Path) -> list[str]:
    """Every regular file under ``root`` as a POSIX path relative to it, the manifest left out, sorted."""
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and p.relative_to(root).as_posix() != MANIFEST)


def compile_id(files: Mapping[str, str]) -> str:
    """Names and hashes of the files a command wrote, hashed: two directories with the same id hold
    the same outputs. (Not a hash of the inputs: an incremental and a full compile of the same rules
    may differ in table layout, and the id must tell them apart.)"""
    text = "".join(f"{name}\0{sha}\n" for name, sha in sorted(files.items()))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def write_manifest(root: Path, kind: str, argv: Iterable[str] = ()) -> dict:
    """Hash every file under ``root`` and write ``root/manifest.json``; the manifest."""
    files = {name: file_sha256(root / name) for name in tree_files(root)}
    doc = {"format": FORMAT, "p4sub": __version__, "kind": kind, "command": list(argv),
           "compile_id": compile_id(files), "files": files}
    (root / MANIFEST).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    return doc


def read_manifest(root: Path) -> dict | None:
    """``root/manifest.json`` checked for shape, or None when there is none; a damaged one is an error."""
    path = root / MANIFEST
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise P4subError(f"{path}: damaged ({exc}); {RECOMPILE}") from None
    files = doc.get("files") if isinstance(doc, dict) else None
    if (not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(files, dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items())):
        raise P4subError(f"{path}: not a {FORMAT} manifest (format {doc.get('format') if isinstance(doc, dict) else None!r}); "
                         f"{RECOMPILE}")
    return doc


def unlisted(root: Path, doc: Mapping) -> list[str]:
    """Files under ``root`` its manifest does not list (what replacing ``root`` would destroy)."""
    listed = doc["files"]
    return [name for name in tree_files(root) if name not in listed]


@dataclass(frozen=True)
class Listed:
    """An output directory as its manifest describes it: ``root`` holds the manifest; ``prefix`` is
    the directory's path in it ("" for a compile, ``"s1/"`` for switch s1 of a routed network)."""

    root: Path
    prefix: str
    doc: dict

    def lists(self, name: str) -> bool:
        return self.prefix + name in self.doc["files"]

    def check(self, names: Iterable[str]) -> None:
        """Each of ``names`` (in the directory) is listed with the hash it has now, or P4subError naming it."""
        for name in names:
            key, path = self.prefix + name, self.root / (self.prefix + name)
            want = self.doc["files"].get(key)
            if want is None:
                raise P4subError(f"{path}: not in {self.root / MANIFEST} (compile {self.doc['compile_id']}): no p4sub "
                                 "command wrote it; recompile, or run p4sub build for program.json and p4info.txt")
            if not path.is_file():
                what = ("is a directory" if path.is_dir() else "is a device, FIFO or socket" if path.exists()
                        else "is missing")
                raise P4subError(f"{path}: listed in {self.root / MANIFEST} as a file p4sub wrote, but {what} "
                                 f"now; {RECOMPILE}")
            if file_sha256(path) != want:
                raise P4subError(f"{path}: changed since p4sub wrote it (its SHA-256 differs from the one in "
                                 f"{self.root / MANIFEST}, compile {self.doc['compile_id']}); {RECOMPILE}")

    def check_switch_directories(self) -> None:
        """In a routed network, every directory beside the switch's is one the route wrote: a stale
        switch directory (of an earlier route, copied in by hand) would be pushed by a loop over them."""
        if not self.prefix:
            return
        listed = {name.split("/", 1)[0] for name in self.doc["files"] if "/" in name}
        for entry in sorted(self.root.iterdir()):
            if entry.is_dir() and entry.name not in listed:
                raise P4subError(f"{entry}: a directory the {self.doc.get('kind', 'route')} that wrote {self.root} did "
                                 f"not write (not in {self.root / MANIFEST}): a stale switch? Route again into a new "
                                 "or empty directory")

    def record(self, names: Iterable[str]) -> None:
        """Add ``names`` (files just written into the directory, e.g. by ``build``) to the manifest,
        rewritten whole; the compile id stays: it names the compile these files were built from."""
        files = dict(self.doc["files"])
        for name in names:
            files[self.prefix + name] = file_sha256(self.root / (self.prefix + name))
        doc = {**self.doc, "files": dict(sorted(files.items()))}
        with staged(self.root / MANIFEST) as tmp:
            Path(tmp).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def find_listed(out: str | os.PathLike[str]) -> Listed | None:
    """The manifest that describes directory ``out``: its own, or its network's (``out`` a switch
    directory of a ``route`` output); None when neither has one. A switch directory its network's
    manifest does not list is refused."""
    out = Path(out)
    doc = read_manifest(out)
    if doc is not None:
        return Listed(out, "", doc)
    parent, name = out.resolve().parent, out.resolve().name
    doc = read_manifest(parent)
    if doc is None:
        return None
    if not any(key.startswith(name + "/") for key in doc["files"]):
        raise P4subError(f"{out}: not in {parent / MANIFEST}: the command that wrote {parent} did not write it "
                         "(a stale switch directory?); route again into a new or empty directory")
    return Listed(parent, name + "/", doc)


def listed(out: str | os.PathLike[str], why: str) -> Listed:
    """:func:`find_listed`, refusing a directory without a manifest, saying ``why`` one is needed."""
    found = find_listed(out)
    if found is None:
        raise P4subError(f"{out}: has no {MANIFEST} ({why}): it was written by an older p4sub, or not by p4sub; "
                         f"{RECOMPILE}")
    return found
