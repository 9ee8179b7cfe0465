// The fields the ITCH subscriptions of examples/coexist may test, Camus style: pragmas only.
// coexist.p4 declares the headers (instance add_order of struct headers) and parses them.
@pragma query_field_exact(add_order.stock, 64)
@pragma query_field_range(add_order.price, 32)
@pragma query_field_range(add_order.shares, 32)
@pragma query_field_exact(add_order.buy_sell_indicator, 8)
@pragma query_field_exact(standard_metadata.ingress_port, 9)
