"""Batch mode split on Tofino (backends/tofino/split.py): one copy of the tables, a recirculated copy
per message, each evaluated alone in a second pass.

The executable check walks the parse graph the program renders (Tofino's stop at a packet-dependent
advance, elements numbered from the back) with the project's parse-graph reader over a generated ITCH
feed, follows the copies table, the PRE records and the pick table as ``entries.bfrt.json`` and
``program.p4`` state them, and compares the message each copy evaluates with an independent decoding
of the packet's bytes (struct over Ethernet/IPv4/UDP/MoldUDP64/ITCH).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from backends.tofino import TOFINO1, build
from backends.tofino.layout import TofinoOptions
from backends.tofino.program import tna_spec
from backends.tofino.stack_parse import fix_stack_indices
from compiler.spec import Extract, HeaderInstance, ParserState, Spec, read_spec
from p4sub import main
from runtime.parse_graph import ParseGraph

from .helpers import ITCH_RULES, ITCH_SPEC, control_body, itch_pipeline, tables_in

AO_BYTES = 36  # the Add Order message, type byte included


@pytest.fixture(scope="module")
def split_itch():
    return build(itch_pipeline(delivery="groups"), TofinoOptions(batch="split"))


def test_one_copy_of_the_tables_serves_every_message(split_itch):
    text = split_itch.program.text
    tables = tables_in(text)
    assert not [t for t in tables if re.search(r"_m\d+$", t)], "no per-slot copies"
    assert "p4sub_split_copies" in tables and "p4sub_split_pick" in tables
    assert [k[0] for k in tables["p4sub_split_pick"]["keys"]] == ["hdr.p4sub_split.rid"]
    assert [k[0] for k in tables["p4sub_split_copies"]["keys"]] == [f"meta.p4sub_valid_m{i}" for i in range(12)]
    # The field tables match the picked message's copies, not a stack element.
    price = [t for n, t in tables.items() if n.startswith("field_add_order_price")]
    assert price and all("hdr.add_order" not in k[0] for t in price for k in t["keys"])
    ingress = control_body(text, "SwitchIngress")
    assert "9w68: parse_p4sub_split;" in text
    assert ingress.index("p4sub_split_pick.apply();") < ingress.index("leaf_actions.apply();")
    egress = control_body(text, "SwitchEgress")
    assert "hdr.p4sub_split.rid = eg_intr_md.egress_rid;" in egress
    assert "pkt.emit(hdr.p4sub_split);" in control_body(text, "SwitchEgressDeparser")
    assert "p4sub_ipv4_checksum.update(" in control_body(text, "SwitchIngressDeparser")
    notes, cost = split_itch.resources["notes"], split_itch.resources["batch"]
    assert notes["batch_mode"] == "split" and cost["passes_per_message"] == 2
    assert cost["max_recirculated_copies_per_packet"] == 12 and cost["recirculation_gbps_assumed"] == 100
    # 12 Add Orders: 62 header bytes + 12 * 38 = 518, 2 more for the split header, 24 of framing.
    assert cost["full_packet_bytes"] == 518
    assert cost["max_input_packets_per_s_full_stack"] == round(100e9 / (12 * (520 + 24) * 8))


def test_the_pick_action_keeps_one_message_and_says_so(split_itch):
    text = split_itch.program.text
    body = re.search(r"action p4sub_pick_m5\(bit<64> position\) \{(.*?)\n    \}", text, re.S).group(1)
    assert "meta.p4sub_msg_add_order_price = hdr.add_order[5].price;" in body
    invalid = set(re.findall(r"hdr\.(\w+)\[(\d+)\]\.setInvalid\(\);", body))
    assert invalid == {(h, str(i)) for h in ("mold_msg", "add_order") for i in range(12) if i != 5}
    assert "hdr.moldudp.msg_cnt = 1;" in body
    assert "hdr.ipv4.total_len = 86;" in body and "hdr.udp.length = 66;" in body  # 20 + 8 + 20 + 2 + 36
    assert "hdr.udp.checksum = 0;" in body and "hdr.moldudp.seq = hdr.moldudp.seq + position;" in body


def _plain(spec: Spec) -> Spec:
    """The fixed-element spec with each element ``h[i]`` a plain header ``h__i``: what the parse-graph
    reader walks (it knows stacks only through ``.next``)."""
    headers = []
    for h in spec.headers:
        headers += ([HeaderInstance(f"{h.name}__{i}", h.type_name) for i in range(h.stack_size)] if h.stack_size
                    else [h])

    def rename(ref: str) -> str:
        return re.sub(r"(\w+)\[(\d+)\]", r"\1__\2", ref)
    states = {n: replace(st, statements=tuple(Extract(rename(s.header)) if isinstance(s, Extract) else s
                                              for s in st.statements),
                         select_keys=tuple(rename(k) for k in st.select_keys))
              for n, st in spec.parser_states.items()}
    return replace(spec, headers=tuple(headers), parser_states=states)


def _pcap_packets(path: Path):
    data = path.read_bytes()
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    at = 24
    while at < len(data):
        incl = struct.unpack(endian + "I", data[at + 8:at + 12])[0]
        yield data[at + 16:at + 16 + incl]
        at += 16 + incl


def _leading_add_orders(pkt: bytes) -> tuple[int, list[dict]]:
    """Independent decoding: the MoldUDP64 sequence number and the Add Orders before the first other
    message (at most 12: the program's parse stops there, docs/tofino.md "Parsing ITCH")."""
    assert struct.unpack("!H", pkt[12:14])[0] == 0x0800 and pkt[14] == 0x45 and pkt[23] == 17
    assert struct.unpack("!H", pkt[36:38])[0] == 1234
    mold = pkt[42:62]
    seq, count = struct.unpack("!QH", mold[10:20])
    out, at = [], 62
    if count == 0xFFFF:  # end of session: no message
        return seq, out
    for _ in range(min(count, 12)):
        length = struct.unpack("!H", pkt[at:at + 2])[0]
        if pkt[at + 2] != ord("A"):
            break
        body = pkt[at + 3:at + 2 + length]
        bsi, shares, stock, price = struct.unpack("!cI8sI", body[18:35])
        out.append({"buy_sell_indicator": bsi[0], "shares": shares, "stock": int.from_bytes(stock, "big"),
                    "price": price})
        at += 2 + length
    return seq, out


def test_pass_two_evaluates_message_r_for_every_r_below_n(split_itch, tmp_path):
    feed = tmp_path / "feed.pcap"
    assert main(["gen", "itch", "--messages", "3000", "--seed", "11", "-o", str(feed)]) == 0
    text = split_itch.program.text
    # Each extract of add_order[i] marks slot i (the copies table's key).
    for i in range(12):
        assert re.search(rf"pkt\.extract\(hdr\.add_order\[{i}\]\);\n\s*meta\.p4sub_valid_m{i} = 1w1;", text)
    picks = {int(m.group(1)): int(m.group(2)) for m in re.finditer(
        r"action p4sub_pick_m(\d+)\(bit<64> position\) \{\n\s*meta\.p4sub_msg_\w+ = hdr\.add_order\[(\d+)\]", text)}
    doc = split_itch.entries
    copies = {tuple(v["value"] for v in e["key"].values()): e["data"]["group"]
              for e in doc["entries"] if e["table_name"].endswith("p4sub_split_copies")}
    pick = {e["key"]["hdr.p4sub_split.rid"]["value"] if "hdr.p4sub_split.rid" in e["key"]
            else next(iter(e["key"].values()))["value"]: (int(e["action"].rsplit("_m", 1)[1]), e["data"]["position"])
            for e in doc["entries"] if e["table_name"].endswith("p4sub_split_pick")}
    nodes = {r["key"]["$MULTICAST_NODE_ID"]["value"]: r["data"] for r in doc["pre"] if r["table_name"] == "$pre.node"}
    groups = {r["key"]["$MGID"]["value"]: r["data"]["$MULTICAST_NODE_ID"] for r in doc["pre"]
              if r["table_name"] == "$pre.mgid"}
    spec, fixed = fix_stack_indices(tna_spec(read_spec(ITCH_SPEC), "stop", TOFINO1)[0])
    assert fixed
    graph = ParseGraph(_plain(spec))
    checked = 0
    for pkt in _pcap_packets(feed):
        parsed = graph.parse(pkt)
        seq, wanted = _leading_add_orders(pkt)
        valid = tuple(int(f"add_order__{i}" in parsed.headers) for i in range(12))
        group = copies.get(valid)
        if group is None:  # the copies table misses: dropped
            assert not wanted and not any(valid)
            continue
        copies_made = [nodes[n] for n in groups[group]]
        assert all(c["$DEV_PORT"] == [68] for c in copies_made)
        seen = []
        for c in copies_made:
            element, position = pick[c["$MULTICAST_RID"]]
            assert picks[element] == element
            got = parsed.headers[f"add_order__{element}"].fields
            assert {k: got[k] for k in wanted[position]} == wanted[position]
            seen.append(position)
        assert sorted(seen) == list(range(len(wanted)))
        checked += 1
    assert checked > 100


def _judge_options(**limits) -> TofinoOptions:
    return TofinoOptions(target=replace(TOFINO1, **limits))


def test_auto_takes_union_when_it_fits_and_split_when_it_does_not():
    pipeline = itch_pipeline(delivery="groups")
    assert build(pipeline, TofinoOptions()).resources["notes"]["batch_mode"] == "union"
    # A chip with a twelfth of the TCAM: twelve copies cannot fit, one can.
    small = build(pipeline, _judge_options(tcam_blocks_per_stage=2))
    assert small.resources["notes"]["batch_mode"] == "split"
    assert "copies of the tables need at least" in small.resources["notes"]["union_refused"]
    assert build(pipeline, TofinoOptions(batch="split")).resources["notes"]["batch_mode"] == "split"


def test_split_on_the_command_line_states_its_cost_in_stats(tmp_path):
    out = tmp_path / "out"
    rules = tmp_path / "r.sub"
    rules.write_text(ITCH_RULES)
    assert main(["compile", str(ITCH_SPEC), str(rules), "--target", "tofino", "--delivery", "groups",
                 "--batch", "split", "-o", str(out)]) == 0
    stats = json.loads((out / "stats.json").read_text())
    res = json.loads((out / "resources.json").read_text())
    assert stats["batch"]["mode"] == "split" and stats["batch"] == res["batch"]
    assert res["multicast_groups"] >= 78  # the split groups are counted with the rules'


@pytest.mark.tofino
@pytest.mark.skipif(shutil.which("bf-p4c") is None, reason="bf-p4c is not on PATH (p4c built with -DENABLE_TOFINO=ON)")
@pytest.mark.parametrize("delivery", ["groups", "bitmap"])
def test_bf_p4c_accepts_a_split_program(tmp_path, delivery):
    out = tmp_path / "out"
    rules = tmp_path / "r.sub"
    rules.write_text(ITCH_RULES)
    assert main(["compile", str(ITCH_SPEC), str(rules), "--target", "tofino", "--delivery", delivery,
                 "--batch", "split", "-o", str(out)]) == 0
    assert main(["build", str(out)]) == 0
    res = json.loads((out / "resources.json").read_text())
    assert res["stages"] <= 12 and res["notes"]["batch_mode"] == "split"


@pytest.fixture(scope="module")
def split_bitmap_itch():
    return build(itch_pipeline(delivery="bitmap", lanes=3), TofinoOptions(batch="split"))


def test_port_bitmaps_ride_split_mode_pass_two_only(split_bitmap_itch):
    """Issue 26 item 2 on Tofino: pass 2 evaluates one message, so the single program's bitmap
    delivery follows the pick (lanes ORed, p4sub_no_ports, the delivery group, the bitmap bridged);
    pass 1's copies carry an empty bitmap, and the egress checks port bits only on copies that are not
    on their way round the recirculation port."""
    text = split_bitmap_itch.program.text
    ingress = control_body(text, "SwitchIngress")
    pick = ingress.index("p4sub_split_pick.apply();")
    assert pick < ingress.index("p4sub_no_ports.apply()") < ingress.index("p4sub_split_copies.apply();")
    assert not re.search(r"leaf_actions", ingress)  # bitmap delivery: no leaf table
    egress = control_body(text, "SwitchEgress")
    assert re.search(r"isValid\(\) && eg_intr_md\.egress_rid < 16w0xf000\)|isValid\(\) && eg_intr_md\.egress_rid < "
                     r"16w61440\)", egress), egress
    assert "p4sub_port_bit.apply()" in egress
    assert split_bitmap_itch.resources["notes"]["batch_mode"] == "split"
    assert len([g for g in split_bitmap_itch.batched.groups]) == 1  # the delivery group; the split groups apart


def test_union_refuses_port_bitmaps_and_auto_takes_split_for_them():
    with pytest.raises(Exception, match="batch mode split"):
        build(itch_pipeline(delivery="bitmap"), TofinoOptions(batch="union"))
    assert build(itch_pipeline(delivery="bitmap"), TofinoOptions()).resources["notes"]["batch_mode"] == "split"
