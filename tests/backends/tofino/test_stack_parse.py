"""Stack elements numbered from the back (backends/tofino/stack_parse.py), on ITCH's spec."""

from __future__ import annotations

from backends.common.parser import emit_statements
from backends.tofino.stack_parse import first_only, fix_stack_indices
from compiler.spec import Extract, read_spec


def _itch():
    return read_spec("apps/itch/itch.p4")


def test_every_itch_state_extracts_one_fixed_element_counted_from_the_back():
    spec, fixed = fix_stack_indices(_itch())
    assert fixed
    extracts = {(name, s.header) for name, st in spec.parser_states.items() for s in st.statements
                if isinstance(s, Extract)}
    assert not any(s.next for st in spec.parser_states.values() for s in st.statements if isinstance(s, Extract))
    # msgs_k extracts element k - 1 of mold_msg; add_order_k element k - 1 of add_order
    for k in range(1, 13):
        assert (f"msgs_{k}", f"mold_msg[{k - 1}]") in extracts
        assert (f"add_order_{k}", f"add_order[{k - 1}]") in extracts
        assert spec.parser_states[f"msgs_{k}"].select_keys == (f"mold_msg[{k - 1}].msg_type",)


def test_the_deparser_emits_from_the_highest_element_down():
    spec, fixed = fix_stack_indices(_itch())
    emits = [e for e in emit_statements(spec, descending=fixed) if "mold_msg" in e or "add_order" in e]
    assert emits[:4] == ["packet.emit(hdr.mold_msg[11]);", "packet.emit(hdr.add_order[11]);",
                         "packet.emit(hdr.mold_msg[10]);", "packet.emit(hdr.add_order[10]);"]
    assert emits[-1] == "packet.emit(hdr.add_order[0]);"


def test_first_only_puts_the_first_message_in_element_0():
    from backends.tofino import TOFINO1
    from backends.tofino.program import tna_spec

    stopped, _ = tna_spec(_itch(), "stop", TOFINO1)  # as the renderer: skipping states end the parse
    spec, fixed = fix_stack_indices(first_only(stopped, "add_order"))
    assert fixed
    headers = {s.header for st in spec.parser_states.values() for s in st.statements if isinstance(s, Extract)}
    assert {h for h in headers if "[" in h} == {"mold_msg[0]", "add_order[0]"}
    # ... and the stacks are declared with that one element (bf-p4c gives every declared element PHV)
    assert spec.header("mold_msg").stack_size == spec.header("add_order").stack_size == 1
    assert [e for e in emit_statements(spec, descending=fixed) if "[" in e] == [
        "packet.emit(hdr.mold_msg[0]);", "packet.emit(hdr.add_order[0]);"]


def test_a_fixed_stack_keeps_the_elements_its_longest_path_extracts():
    spec, fixed = fix_stack_indices(_itch())
    assert fixed and spec.header("mold_msg").stack_size == spec.header("add_order").stack_size == 12


def test_a_select_on_an_element_an_earlier_state_extracted_is_left_as_it_was():
    spec = _itch()
    states = dict(spec.parser_states)
    st = states["add_order_3"]  # select on mold_msg.last in a state that does not extract mold_msg
    from dataclasses import replace

    from compiler.spec import SelectCase
    states["add_order_3"] = replace(st, select_keys=("mold_msg.last.msg_type",),
                                    cases=(SelectCase(((65, 255),), "msgs_2"), SelectCase((None,), "accept", True)))
    changed = replace(spec, parser_states=states)
    out, fixed = fix_stack_indices(changed)
    assert not fixed and out is changed
