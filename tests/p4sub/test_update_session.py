"""``compile --update`` from a kept session (compiler/incremental/cache.py) and ``p4sub serve``.

Every updated pipeline is proved equal to its new rules by ``compiler.verify`` (a BDD proof that
shares no code with the incremental path), the delta takes the old entries and groups to exactly
the new ones (replayed here, keyed as a switch keys them), and the BMv2 files written from the old
output's lines are byte for byte a fresh render of the new pipeline.
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from backends.bmv2 import render
from backends.bmv2 import update_plan as up
from backends.bmv2.hitless import Pusher
from backends.bmv2.p4runtime import entities
from backends.bmv2.program import Bmv2Options, build_program
from compiler import ir
from compiler.base import file_sha256
from compiler.incremental.delta import load as load_delta
from compiler.rules import check_rules, read_rules
from compiler.verify import verify
from p4sub import main
from tests.compiler.incremental.test_incremental import replay

REPO = Path(__file__).resolve().parents[2]
ITCH = str(REPO / "apps/itch/itch.p4")
STOCKS = ["GOOGL", "AAPL", "MSFT", "TEAM", "KHC"]


def p4sub(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def rule_line(rng: random.Random) -> str:
    ports = ", ".join(str(p) for p in sorted(rng.sample(range(1, 12), rng.randint(1, 3))))
    return f'add_order.stock == "{rng.choice(STOCKS)}" and add_order.price > {rng.randint(1, 400) / 4} : fwd({ports});'


def rules_file(path: Path, lines: list[str]) -> Path:
    path.write_text("# rules\n" + "\n".join(lines) + "\n")
    return path


def proved(out: Path, rules: Path, render_too: bool = True) -> None:
    pipeline = ir.load(out / "pipeline.json")
    verdict = verify(pipeline, check_rules(read_rules(rules), pipeline.spec))
    assert verdict.equivalent, verdict.differences[:2]
    files = render(pipeline) if render_too else {}
    for name, text in files.items():
        assert (out / name).read_text() == text, name


def delta_exact(old: Path, new: Path) -> None:
    entries, groups = replay(ir.load(old / "pipeline.json"), load_delta(new / "delta.json"))
    after = ir.load(new / "pipeline.json")
    assert entries == {(e.table, e.matches, e.priority): e for e in after.entries}
    assert groups == {g.id: tuple(g.ports) for g in after.multicast_groups}


@pytest.mark.parametrize("seed", [1, 2])
def test_updates_from_a_kept_session_equal_the_new_rules_and_render_as_a_fresh_compile(tmp_path, capsys, seed):
    rng = random.Random(seed)
    lines = [rule_line(rng) for _ in range(60)]
    base = tmp_path / "u0"
    code, _, err = p4sub(capsys, "compile", ITCH, rules_file(tmp_path / "r0.sub", lines), "--target", "bmv2",
                         "--session", "-o", base)
    assert code == 0 and (base / "session.pickle").is_file(), err
    prev = base
    for step in range(1, 5):  # four updates in a chain: the journal, then past it a session written again
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(lines))
            if rng.random() < 0.5:
                lines[i] = rule_line(rng)
            elif rng.random() < 0.5:
                del lines[i]
            else:
                lines.insert(i, rule_line(rng))
        new_rules = rules_file(tmp_path / f"r{step}.sub", lines)
        out = tmp_path / f"u{step}"
        code, stdout, err = p4sub(capsys, "compile", "--update", prev, new_rules, "--target", "bmv2", "-o", out)
        assert code == 0, err
        assert "load_session" in stdout and "reading the pipeline back" not in err
        proved(out, new_rules)
        delta_exact(prev, out)
        prev = out


def test_the_journal_is_replayed_and_then_written_over(tmp_path, capsys, monkeypatch):
    from compiler.incremental import cache

    monkeypatch.setattr(cache, "JOURNAL_LIMIT", 2)
    rng = random.Random(5)
    lines = [rule_line(rng) for _ in range(40)]
    prev = tmp_path / "u0"
    assert p4sub(capsys, "compile", ITCH, rules_file(tmp_path / "r0.sub", lines), "--session", "-o", prev)[0] == 0
    chain, journals = 0, 0
    for step in range(1, 7):
        lines[step] = rule_line(rng)
        rules = rules_file(tmp_path / f"r{step}.sub", lines)
        out = tmp_path / f"u{step}"
        assert p4sub(capsys, "compile", "--update", prev, rules, "-o", out)[0] == 0
        incremental = json.loads((out / "stats.json").read_text())["update"]["incremental"]
        # A journal while the chain of incremental updates stays within the limit; else the session again.
        expect = incremental and chain + 1 <= cache.JOURNAL_LIMIT
        assert (out / cache.JOURNAL).exists() == expect
        chain = chain + 1 if expect else 0
        journals += expect
        pipeline = ir.load(out / "pipeline.json")
        assert verify(pipeline, check_rules(read_rules(rules), pipeline.spec)).equivalent
        prev = out
    assert journals >= 2


def test_a_tampered_or_stale_session_is_not_used(tmp_path, capsys):
    rng = random.Random(3)
    a, b = tmp_path / "a", tmp_path / "b"
    ra = rules_file(tmp_path / "a.sub", [rule_line(rng) for _ in range(30)])
    rb = rules_file(tmp_path / "b.sub", [rule_line(rng) for _ in range(30)])
    assert p4sub(capsys, "compile", ITCH, ra, "--target", "bmv2", "--session", "-o", a)[0] == 0
    assert p4sub(capsys, "compile", ITCH, rb, "--target", "bmv2", "--session", "-o", b)[0] == 0
    new = rules_file(tmp_path / "n.sub", ra.read_text().splitlines()[1:-1] + [rule_line(rng)])
    # Tampered: another byte in the pickle, the manifest not updated.
    data = bytearray((a / "session.pickle").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (a / "session.pickle").write_bytes(bytes(data))
    code, _, err = p4sub(capsys, "compile", "--update", a, new, "--target", "bmv2", "-o", tmp_path / "u1")
    assert code == 0 and "session.pickle changed since p4sub wrote it" in err
    proved(tmp_path / "u1", new)
    # Stale: b's session copied into a, the manifest made to list it (the header still names b's pipeline).
    shutil.copyfile(b / "session.pickle", a / "session.pickle")
    manifest = json.loads((a / "manifest.json").read_text())
    manifest["files"]["session.pickle"] = file_sha256(a / "session.pickle")
    (a / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = p4sub(capsys, "compile", "--update", a, new, "--target", "bmv2", "-o", tmp_path / "u2")
    assert code == 0 and "belongs to another pipeline.json (stale)" in err
    proved(tmp_path / "u2", new)


def test_a_bad_line_in_the_new_rules_is_located_and_writes_nothing(tmp_path, capsys):
    rng = random.Random(4)
    lines = [rule_line(rng) for _ in range(20)]
    base = tmp_path / "base"
    assert p4sub(capsys, "compile", ITCH, rules_file(tmp_path / "r.sub", lines), "--session", "-o", base)[0] == 0
    bad = rules_file(tmp_path / "bad.sub", lines[:5] + ['add_order.stock == "X" and add_order.nope > 1 : fwd(1);']
                     + lines[5:])
    code, _, err = p4sub(capsys, "compile", "--update", base, bad, "-o", tmp_path / "out")
    assert code == 2 and f"{bad}:7:28: unknown field 'add_order.nope'" in err
    bad.write_text(bad.read_text().replace("> 1 :", "> 1 (:"))
    code, _, err = p4sub(capsys, "compile", "--update", base, bad, "-o", tmp_path / "out")
    assert code == 2 and f"{bad}:7:" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_rules_that_span_lines_are_parsed_whole_and_still_update(tmp_path, capsys):
    rng = random.Random(6)
    lines = [rule_line(rng) for _ in range(20)]
    base = tmp_path / "base"
    assert p4sub(capsys, "compile", ITCH, rules_file(tmp_path / "r.sub", lines), "--session", "-o", base)[0] == 0
    split = [line.replace(" : ", " :\n    ") for line in lines[:3]] + lines[4:]
    new = rules_file(tmp_path / "n.sub", split)
    code, _, err = p4sub(capsys, "compile", "--update", base, new, "-o", tmp_path / "u")
    assert code == 0, err
    pipeline = ir.load(tmp_path / "u" / "pipeline.json")
    assert verify(pipeline, check_rules(read_rules(new), pipeline.spec)).equivalent


# -- serve -------------------------------------------------------------------------------------------

class StandIn:
    """The installer's in-memory switch: entities keyed as P4Runtime keys them (update_plan.entity_key)."""

    def __init__(self, entities_: list[dict]) -> None:
        self.state = {up.entity_key(e): e for e in entities_}

    def write(self, ops: list) -> list[str | None]:
        out = []
        for op in ops:
            key = up.entity_key(op.entity)
            if op.type == up.INSERT and key in self.state or op.type != up.INSERT and key not in self.state:
                out.append("refused")
                continue
            if op.type == up.DELETE:
                del self.state[key]
            else:
                self.state[key] = op.entity
            out.append(None)
        return out

    def normal(self) -> dict:
        return {k: up.entity_value(e) for k, e in self.state.items()}


@pytest.mark.parametrize("seed", [11, 12])
def test_serve_applies_changes_whose_deltas_and_pushes_give_the_new_rules(tmp_path, capsys, seed):
    from p4sub.serve import Server, load_session

    rng = random.Random(seed)
    lines = [rule_line(rng) for _ in range(50)]
    base = tmp_path / "base"
    assert p4sub(capsys, "compile", ITCH, rules_file(tmp_path / "r.sub", lines), "--target", "bmv2", "--session",
                 "-o", base)[0] == 0
    session = load_session(base)
    start = ir.load(base / "pipeline.json")
    program = build_program(start, Bmv2Options(batch="union"))
    switch = StandIn(entities(start, program))
    pusher = Pusher(start, switch.write, Bmv2Options(batch="union"))
    err = io.StringIO()
    server = Server(session, deltas=tmp_path / "d", push=pusher.push, out=io.StringIO(), err=err)
    (tmp_path / "d").mkdir()
    current = Counter(read_rules(tmp_path / "r.sub").rules)
    changes = []
    for n in range(1, 16):
        if rng.random() < 0.5 and lines:
            line = lines.pop(rng.randrange(len(lines)))
            changes.append("- " + line)
        else:
            line = rule_line(rng)
            lines.append(line)
            changes.append("+ " + line)
    refused_before = 0
    for n, change in enumerate(changes, 1):
        assert server.handle(n, change), err.getvalue()
        if n % 5 == 0:  # bad lines in between: an error each, nothing changes
            counts = session.counts()
            assert not server.handle(100 + n, "* nonsense")
            assert not server.handle(200 + n, "+ add_order.stock == \"A\" and add_order.bogus > 1 : fwd(1);")
            assert not server.handle(300 + n, "- add_order.stock == \"NOPE\" : fwd(1);")
            assert session.counts() == counts and server.errors == refused_before + 3
            refused_before = server.errors
    messages = err.getvalue().splitlines()
    assert any("<stdin>:105:1: a change is '+ RULE'" in m for m in messages)
    assert any("<stdin>:205:30: unknown field 'add_order.bogus'" in m for m in messages)
    final = session.pipeline()
    rules = session.rule_set()
    assert Counter(rules.rules) == Counter(read_rules(rules_file(tmp_path / "final.sub", lines)).rules)
    assert verify(final, check_rules(rules, final.spec)).equivalent
    # The numbered deltas, applied in sequence to the start, give the final pipeline.
    pipeline = start
    for path in sorted((tmp_path / "d").iterdir()):
        entries, groups = replay(pipeline, load_delta(path))
        pipeline = ir.Pipeline(**{**{f: getattr(pipeline, f) for f in pipeline.__dataclass_fields__},
                                  "entries": tuple(entries.values()),
                                  "multicast_groups": tuple(ir.MulticastGroup(i, p) for i, p in groups.items())})
    assert {(e.table, e.matches, e.priority, e.action, e.args) for e in pipeline.entries} == \
        {(e.table, e.matches, e.priority, e.action, e.args) for e in final.entries}
    # The stand-in switch, pushed each change hitlessly, holds the final pipeline's entities.
    assert switch.normal() == StandIn(entities(final, build_program(final, Bmv2Options(batch="union")))).normal()


def test_serve_on_the_command_line(tmp_path, capsys):
    rng = random.Random(8)
    lines = [rule_line(rng) for _ in range(20)]
    base = tmp_path / "base"
    assert p4sub(capsys, "compile", ITCH, rules_file(tmp_path / "r.sub", lines), "--session", "-o", base)[0] == 0
    changes = tmp_path / "changes.txt"
    changes.write_text(f"# changes\n+ {rule_line(rng)}\n\n- {lines[3]}\nadd it\n")
    code, out, err = p4sub(capsys, "serve", base, "--changes", changes, "--deltas", tmp_path / "d")
    assert code == 2 and f"{changes}:5:1: a change is '+ RULE' (add) or '- RULE' (remove)" in err
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["000001.json", "000002.json"]
    assert out.count("incremental") == 2 and '"changes": 2, "refused": 1' in err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_serve_interrupted_leaves_every_file_as_it_was(tmp_path, capsys, sig):
    rng = random.Random(9)
    base = tmp_path / "base"
    assert p4sub(capsys, "compile", ITCH, rules_file(tmp_path / "r.sub", [rule_line(rng) for _ in range(20)]),
                 "--session", "-o", base)[0] == 0
    before = {p.name: p.read_bytes() for p in base.iterdir()}
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "p4sub", "serve", str(base), "--deltas", str(tmp_path / "d")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    proc.stdin.write("+ " + rule_line(rng) + "\n")
    proc.stdin.flush()
    assert "1: incremental" in proc.stdout.readline()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig and "interrupted" in err
    assert {p.name: p.read_bytes() for p in base.iterdir()} == before
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["000001.json"]
    json.loads((tmp_path / "d" / "000001.json").read_text())


@pytest.mark.parametrize("spec, rules, extra", [
    ("examples/coexistence/coexistence.p4", "examples/coexistence/rules.sub", ("--target", "bmv2")),
    ("apps/itch/itch.p4", None, ("--delivery", "bitmap", "--lanes", "2")),  # lanes: the assignment is kept too
])
def test_other_layouts_update_from_a_session_and_render_as_a_fresh_compile(tmp_path, capsys, spec, rules, extra):
    rng = random.Random(10)
    if rules is None:
        lines = [rule_line(rng) for _ in range(40)]
    else:
        lines = [line for line in (REPO / rules).read_text().splitlines() if line.strip() and not line.startswith("#")]
    base = tmp_path / "u0"
    code, _, err = p4sub(capsys, "compile", REPO / spec, rules_file(tmp_path / "r0.sub", lines), "--session", *extra,
                         "-o", base)
    assert code == 0, err
    assert "--lanes" not in extra or (base / "lanes.json").is_file()
    prev = base
    for step in range(1, 4):
        if step % 2:
            lines.pop(rng.randrange(len(lines)))
        else:
            lines.insert(rng.randrange(len(lines)), lines[rng.randrange(len(lines))].replace("fwd(", "fwd(7, ", 1))
        new_rules = rules_file(tmp_path / f"r{step}.sub", lines)
        out = tmp_path / f"u{step}"
        code, stdout, err = p4sub(capsys, "compile", "--update", prev, new_rules, *extra[:2], "-o", out)
        assert code == 0, err
        assert "load_session" in stdout
        proved(out, new_rules, render_too="bmv2" in extra)
        delta_exact(prev, out)
        prev = out
