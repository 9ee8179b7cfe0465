"""bf-p4c, the Tofino compiler, run on a program p4sub rendered, and what its logs say it placed.

The resource figures ``compile`` writes are p4sub's own estimate (:mod:`backends.tofino.resources`):
a model of bf-p4c's first-pass estimate, not a placement. bf-p4c (p4lang/p4c with
``-DENABLE_TOFINO=ON``, or the SDE's) is the judge: it accepts or refuses the program (PHV
allocation, crossbar, action data and stage dependencies the estimate does not model) and, with
``-g``, writes ``pipe/logs/resources.json``: every SRAM, TCAM and map RAM unit of every MAU stage
with the tables using it (schema: ``compiler_interfaces/schemas/resources_schema.py`` in that tree).
:func:`read` turns that file into per-table and per-stage counts in the estimate's units (a unit is
a 1024 x 128 b SRAM, a 512 x 44 b TCAM, a map RAM), so the two can be set side by side.

bf-p4c names its tables after the P4 ones with the control's name in front and suffixes for the
parts it splits a table into (``SwitchIngress.field_x``, ``field_x$tind`` for a ternary table's
action-data RAMs, ``field_x$action`` ...); :func:`p4_table` strips them, so a table's figure is the
sum over its parts, as the estimate counts it.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from compiler.base import ResourceError, TargetError

COMPILER = "bf-p4c"
HOW_TO_GET = (f"{COMPILER} is not on PATH. It is p4c built with -DENABLE_TOFINO=ON (https://github.com/p4lang/p4c, "
              "backends/tofino; or the Tofino SDE's bf-p4c): put the directory holding it on PATH or pass --bf-p4c "
              "PATH. See docs/tofino.md, \"Judged by bf-p4c\".")
#: Where ``-g`` leaves the resource log, relative to the output directory (one pipe, named ``pipe``).
RESOURCES_LOG = Path("pipe") / "logs" / "resources.json"
#: Suffixes bf-p4c gives the parts of one P4 table.
_PART = re.compile(r"(\$(tind|action|salu|gw|stateful|selector|counter|meter|idletime)\w*|-\d+)$")


def command(program: Path, into: Path, compiler: str = COMPILER, extra: tuple[str, ...] | list[str] = ()) -> list[str]:
    """bf-p4c on a TNA program, with the logs (``-g``) and the BF Runtime schema in ``into``."""
    return [compiler, "--target", "tofino", "--arch", "tna", "-g", "--bf-rt-schema", str(into / "bf-rt.json"),
            "-o", str(into), *extra, str(program)]


def version(compiler: str = COMPILER) -> str:
    """``bf-p4c --version``'s first line (which build judged the program)."""
    try:
        done = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"{compiler}: cannot run it: {exc}") from None
    lines = (done.stdout or done.stderr).strip().splitlines()
    return lines[0].strip() if lines else "unknown"


def p4_table(name: str) -> str:
    """The P4 table a bf-p4c table part belongs to: ``SwitchIngress.field_x$tind`` -> ``field_x``."""
    base = name.rsplit(".", 1)[-1]
    while True:
        stripped = _PART.sub("", base)
        if stripped == base:
            return base
        base = stripped


@dataclass(frozen=True)
class TableUse:
    """What bf-p4c gave one P4 table: memory units and the stages they are in."""

    name: str
    sram_blocks: int
    tcam_blocks: int
    map_rams: int
    stages: tuple[int, ...]


@dataclass(frozen=True)
class StageUse:
    stage: int
    sram_blocks: int
    tcam_blocks: int
    map_rams: int
    tables: tuple[str, ...]


@dataclass(frozen=True)
class Measured:
    """bf-p4c's placement of a program, in the units of the estimate (``resources.json``)."""

    compiler_version: str
    stages: int  # MAU stages holding at least one table (a pipeline's length)
    stages_available: int
    sram_blocks: int
    sram_blocks_available: int
    tcam_blocks: int
    tcam_blocks_available: int
    map_rams: int
    tables: tuple[TableUse, ...]
    per_stage: tuple[StageUse, ...] = field(default_factory=tuple)

    @property
    def sram_percent(self) -> float:
        return 100.0 * self.sram_blocks / self.sram_blocks_available

    @property
    def tcam_percent(self) -> float:
        return 100.0 * self.tcam_blocks / self.tcam_blocks_available

    def to_json(self) -> dict:
        data = asdict(self)
        data["source"] = "bf-p4c"
        data["sram_percent"], data["tcam_percent"] = self.sram_percent, self.tcam_percent
        return data


def _units(section: dict | None, key: str) -> list[dict]:
    return list((section or {}).get(key) or [])


def read(build_dir: Path) -> Measured:
    """The placement in ``build_dir/pipe/logs/resources.json`` (bf-p4c ``-g``); TargetError when absent."""
    log = build_dir / RESOURCES_LOG
    if not log.is_file():
        found = sorted(build_dir.rglob("resources.json"))
        if not found:
            raise TargetError(f"{build_dir}: no {RESOURCES_LOG} (was bf-p4c run with -g?)")
        log = found[0]
    data = json.loads(log.read_text())
    return parse(data)


def parse(data: dict) -> Measured:
    """:class:`Measured` from a parsed ``resources.json`` (bf-p4c's schema, 1.x)."""
    mau = (data.get("resources") or {}).get("mau") or {}
    stages = mau.get("mau_stages") or []
    n_stages = int(mau.get("nStages", 12))
    per_table: dict[str, dict[str, int]] = defaultdict(lambda: {"sram": 0, "tcam": 0, "map": 0})
    table_stages: dict[str, set[int]] = defaultdict(set)
    per_stage: list[StageUse] = []
    sram_avail = tcam_avail = 0
    for st in stages:
        number = int(st.get("stage_number", len(per_stage)))
        rams, maps, tcams = st.get("rams") or {}, st.get("map_rams") or {}, st.get("tcams") or {}
        sram_avail += int(rams.get("nRows", 8)) * int(rams.get("nColumns", 10))
        tcam_avail += int(tcams.get("nRows", 12)) * int(tcams.get("nColumns", 2))
        counts = {"sram": 0, "tcam": 0, "map": 0}
        names: set[str] = set()
        for kind, units in (("sram", _units(rams, "srams")), ("tcam", _units(tcams, "tcams")),
                            ("map", _units(maps, "maprams"))):
            for unit in units:
                users = {p4_table(u.get("used_by", "")) for u in unit.get("usages") or [] if u.get("used_by")}
                counts[kind] += 1
                # A unit shared by several tables (rare: bf-p4c packs tables in one RAM only for tiny
                # ones) is counted for each, so per-table sums may exceed the stage's count.
                for name in users:
                    per_table[name][kind] += 1
                    table_stages[name].add(number)
                    names.add(name)
        for logical in (st.get("logical_tables") or {}).get("ids") or []:  # every table, memory or not
            if logical.get("table_name"):
                name = p4_table(logical["table_name"])
                names.add(name)
                table_stages[name].add(number)
                per_table.setdefault(name, {"sram": 0, "tcam": 0, "map": 0})
        per_stage.append(StageUse(number, counts["sram"], counts["tcam"], counts["map"], tuple(sorted(names))))
    if not stages:
        sram_avail, tcam_avail = 80 * n_stages, 24 * n_stages
    else:  # the schema lists only stages in use on some versions: scale to the whole pipe
        sram_avail = sram_avail * n_stages // len(stages)
        tcam_avail = tcam_avail * n_stages // len(stages)
    tables = tuple(TableUse(name, c["sram"], c["tcam"], c["map"], tuple(sorted(table_stages[name])))
                   for name, c in sorted(per_table.items()))
    used_stages = [s for s in per_stage if s.tables or s.sram_blocks or s.tcam_blocks]
    return Measured(
        compiler_version=str(data.get("compiler_version", "unknown")),
        stages=(max(s.stage for s in used_stages) + 1) if used_stages else 0,
        stages_available=n_stages,
        sram_blocks=sum(s.sram_blocks for s in per_stage), sram_blocks_available=sram_avail,
        tcam_blocks=sum(s.tcam_blocks for s in per_stage), tcam_blocks_available=tcam_avail,
        map_rams=sum(s.map_rams for s in per_stage), tables=tables, per_stage=tuple(per_stage))


def compare(estimate: dict, measured: Measured) -> dict:
    """The estimate (``resources.json`` as ``compile`` wrote it) beside bf-p4c's figures.

    Per resource: both figures and the estimate's error relative to bf-p4c's; per table the same for
    SRAM and TCAM, with the tables only one side has (bf-p4c's own tables, folded tables).
    """
    def error(est: float | None, real: float) -> float | None:
        return None if real == 0 or est is None else round(100.0 * (est - real) / real, 1)

    measured_by_name = {t.name: t for t in measured.tables}
    rows = []
    for t in estimate.get("tables", []):
        m = measured_by_name.get(t["name"])
        rows.append({"table": t["name"], "gress": t.get("gress"),
                     "estimate": {"sram": t["sram_blocks"], "tcam": t["tcam_blocks"],
                                  "stages": [t.get("first_stage"), t.get("last_stage")]},
                     "bf_p4c": None if m is None else {"sram": m.sram_blocks, "tcam": m.tcam_blocks,
                                                       "map_rams": m.map_rams, "stages": list(m.stages)}})
    known = {t["name"] for t in estimate.get("tables", [])}
    only_bf = [asdict(t) for t in measured.tables if t.name not in known]
    totals = {}
    # A program without an estimate (header-stack and VT delivery) has no figure to compare: None, not
    # an error of -100 %.
    for key, est, real in (("sram_blocks", estimate.get("sram_blocks"), measured.sram_blocks),
                           ("tcam_blocks", estimate.get("tcam_blocks"), measured.tcam_blocks),
                           ("stages", estimate.get("stages"), measured.stages)):
        totals[key] = {"estimate": est, "bf_p4c": real, "error_percent": error(est, real)}
    return {"compiler_version": measured.compiler_version, "totals": totals, "tables": rows,
            "bf_p4c_only_tables": only_bf}


#: bf-p4c's words for "the program is valid but does not fit the chip": the fit search may answer
#: them with a smaller layout. Anything else it refuses is a p4sub bug or an unsupported construct.
_DOES_NOT_FIT = re.compile(r"supports up to \d+ stages, using \d+|could not fit|PHV allocation was not successful|"
                           r"[Rr]an out of|not enough|too many", re.ASCII)


class DoesNotFit(ResourceError):
    """bf-p4c's "the program does not fit"; ``stages_used`` when it said how many stages it needed."""

    def __init__(self, message: str, stages_used: int | None = None) -> None:
        super().__init__(message)
        self.stages_used = stages_used


def judge(program_text: str, compiler: str = COMPILER, timeout: float | None = None) -> Measured:
    """bf-p4c on a rendered program, in a scratch directory: its placement, or ResourceError when it
    says the program does not fit (more stages than the chip, PHV, crossbar: the fit search then
    tries a smaller layout), TargetError for any other refusal.

    This is what ``compile --target tofino --fit-by bf-p4c`` asks of every layout the estimate
    accepts: the estimate is a lower bound on stages (bf-p4c's greedy placement took up to 3 more on
    the programs measured, docs/tofino.md), so only bf-p4c can say a layout at the edge fits."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="p4sub-bf-p4c-") as tmp:
        where = Path(tmp)
        (where / "program.p4").write_text(program_text, encoding="utf-8")
        try:
            done = subprocess.run(command(where / "program.p4", where / "program.tofino", compiler),
                                  capture_output=True, text=True, timeout=timeout)
        except OSError as exc:
            raise TargetError(f"{compiler}: cannot run it: {exc.strerror or exc}") from None
        except subprocess.TimeoutExpired:
            raise TargetError(f"{compiler} did not finish within {timeout:.0f} s") from None
        if done.returncode == 0:
            return read(where / "program.tofino")
    errors = [line.split("error:", 1)[1].strip() for line in done.stderr.splitlines() if "error:" in line]
    first = errors[0] if errors else (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    if any(_DOES_NOT_FIT.search(e) for e in errors):
        used = next((int(m[1]) for e in errors if (m := re.search(r"using (\d+)", e))), None)
        raise DoesNotFit(f"bf-p4c: {first}", used)
    raise TargetError(f"bf-p4c refused the program (exit {done.returncode}): {first}")
