"""What every P4 backend renders the same way, from a Spec and a Pipeline IR.

The BMv2 (v1model) and Tofino (TNA) backends import these pieces and only add what their
architecture spells differently (their :class:`~backends.common.target.TargetFacts` and templates).
The API (stable; other backends depend on it):

``names``
    ``identifier(name)`` legal P4 identifier; ``name_annotation(name)`` ``@name("...")``;
    ``field_expression(ref, hdr="hdr", meta="meta", index=None)`` P4 expression of an IR field
    reference; ``meta_member(ref)``; ``is_meta(ref)``; ``split_field(ref)``; ``is_packet_field(spec, ref)``;
    ``check_key_fields(pipeline, target)``; control-plane names ``p4info_table_name(table, control)``,
    ``p4info_action_name(action, control)``, ``p4info_key_name(key)`` (= ``key.field``),
    ``p4info_param_name(param)`` (= ``identifier(param.name)``).
``literals``
    ``literal(value, width)`` sized P4 literal; ``canonical_bytes(value)`` (P4Runtime 1.3+);
    ``width_bytes(value, width)`` (BF Runtime); ``from_bytes``; ``all_ones``; ``prefix_mask``.
``headers``
    ``header_type_decls(spec)``; ``headers_struct_decl(spec, name)``; ``struct_decl(name, members)``;
    ``Member(type, name, annotations)``; ``bits(width)``; ``header_width(spec, header)``;
    ``ref_width(spec, ref)``; constants ``HEADERS_STRUCT``, ``METADATA_STRUCT``, ``INDENT``.
``parser``
    ``parser_states(spec, packet="packet", hdr="hdr")`` every state of the parse graph;
    ``emit_statements(spec, ...)`` the deparser's emit list (every headers-struct member, in order;
    adjacent stacks of equal size interleaved element by element); ``emit_groups(spec)``.
``controls``
    ``action_decls(pipeline, target)``; ``action_decl``; ``table_decl(table, pipeline, key_expression,
    size=None, extra=())``; ``apply_statements(pipeline)`` (``if (!t.apply().hit) { t_miss.apply(); }``
    chains); ``chained_tables(pipeline)``; ``pipeline_metadata_members(pipeline)``;
    ``user_call_members(pipeline)``; ``default_action_call(table, pipeline)``.
``target``
    ``TargetFacts`` (an architecture's facts as data), ``unsupported(target, what)`` (raises
    ``TargetError``), ``check_match_kinds(pipeline, target)``.
``messages``
    ``message_layout(pipeline, count_field=None, length_fields=None, udp_checksum=None) -> MessageLayout``
    (which stack holds the queried messages, what forms one message, the count and length fields);
    ``ipv4_checksum(spec) -> Ipv4Checksum | None``.
"""
